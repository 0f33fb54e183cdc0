"""The profiled program's process under `truestack record`.

The supervisor (`recording/supervisor.py`) forks it with the plan in hand and
the write end of a pipe: a fork, not a new interpreter, so the program starts
without a second interpreter start-up and second import of truestack. Before
the program runs, `sys.path` loses the entry Python put first for truestack's
own launcher, so the program sees what `python script.py` would give it (the
target runner then puts the script's directory first). The profile streams
over the pipe after every collector drain (`model/stream.py`), so a crash
loses at most one drain interval.
"""

from __future__ import annotations

import os
import sys
import time
from typing import BinaryIO, NoReturn

from ..errors import UsageError
from ..model import Profile
from ..model.stream import ProfileStreamWriter
from ..session import ProfileSession
from ..target import resolve_target
from .children import ChildWatch
from .plan import Plan
from .run import run_in_process

STATS_INTERVAL_S = 0.25


class StreamSink:
    """Streams the session's profile to the recorder as it grows, and once more at the end."""

    def __init__(self, out: BinaryIO, children: ChildWatch | None = None) -> None:
        self._out = out
        self._writer: ProfileStreamWriter | None = None
        self._children = children

    def started(self, session: ProfileSession) -> None:
        writer = ProfileStreamWriter(self._out, session.profile)
        writer.flush()  # the recorder now knows sampling began, and with what
        self._writer = writer
        stats_sent = 0.0  # the first drain sends them

        def flush() -> None:
            # Samples go out after every drain; the sampler's stats and the metadata with the
            # first and then at most once per STATS_INTERVAL_S (building them every 50 ms cost
            # as much as the samples at 1 kHz).
            # A profile cut short by a crash still says what the sampler did, up to then.
            nonlocal stats_sent
            now = time.monotonic()
            with_meta = now - stats_sent >= STATS_INTERVAL_S
            if with_meta:
                session.record_stats()
                stats_sent = now
            writer.flush(meta=with_meta)

        session.after_batch = flush

    def finished(self, profile: Profile) -> bool:
        if self._writer is None:
            return False
        note = self._children.note() if self._children else None
        stats = profile.meta.sampler_stats
        if note and stats is not None and note not in stats.notes:
            stats.notes.append(note)
        self._writer.flush(end=True)
        return not self._writer.broken


def run_forked(plan: Plan, fd: int) -> NoReturn:
    """The forked child's whole life: run the plan's program, stream its profile to `fd`, exit.

    Leaves by SystemExit, which unwinds the supervisor's (inert) frames up to
    the interpreter, so the program's atexit handlers and finalisation run as
    in a plain `python script.py`.
    """
    _forget_launcher_path()
    target = plan.target
    try:
        if target.kind == "module":
            plan.target = resolve_target(None, target.name, target.args)
        children = ChildWatch()
        children.install()
        with os.fdopen(fd, "wb", buffering=0) as out:
            status = run_in_process(plan, StreamSink(out, children))
    except UsageError as exc:
        sys.stderr.write(f"truestack: error: {exc}\n")
        sys.exit(2)
    sys.exit(status)


def _forget_launcher_path() -> None:
    """Drop the directory Python put first on sys.path for `truestack` / `python -m truestack`
    (none under -P or -I), as `python script.py` would not have it."""
    if not (getattr(sys.flags, "safe_path", False) or sys.flags.isolated) and sys.path:
        del sys.path[0]
