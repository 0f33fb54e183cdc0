"""The profiled program's process under `truestack record`.

Started by the supervisor (`recording/supervisor.py`) with the plan in
TRUESTACK_RECORD_PLAN and the write end of a pipe in TRUESTACK_RECORD_FD;
both leave the environment before the program runs, so it sees what
`python script.py` would give it. The profile streams over the pipe after
every collector drain (`model/stream.py`), so a crash loses at most one
drain interval.
"""

from __future__ import annotations

import os
import sys
from typing import BinaryIO

from ..errors import UsageError
from ..model import Profile
from ..model.stream import ProfileStreamWriter
from ..session import ProfileSession
from ..target import resolve_target
from .children import ChildWatch
from .run import Plan, run_in_process

PLAN_ENV = "TRUESTACK_RECORD_PLAN"
FD_ENV = "TRUESTACK_RECORD_FD"


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

        def flush() -> None:
            session.record_stats()  # a profile cut short by a crash still says what the sampler did
            writer.flush()

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


def main() -> None:
    plan = Plan.from_json(os.environ.pop(PLAN_ENV))
    fd = int(os.environ.pop(FD_ENV))
    os.set_inheritable(fd, False)  # the program's own children must not hold the pipe open
    target = plan.target
    try:
        plan.target = resolve_target(
            target.name if target.kind == "script" else None,
            target.name if target.kind == "module" else None,
            target.args,
        )
        children = ChildWatch()
        children.install()
        with os.fdopen(fd, "wb", buffering=0) as out:
            status = run_in_process(plan, StreamSink(out, children))
    except UsageError as exc:
        sys.stderr.write(f"truestack: error: {exc}\n")
        sys.exit(2)
    sys.exit(status)
