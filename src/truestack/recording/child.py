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

import contextlib
import gc
import os
import sys

from ..errors import UsageError
from ..target import resolve_target
from .children import ChildWatch
from .pipe_out import PipeOut
from .plan import Plan
from .run import run_in_process
from .sink import StreamSink

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import NoReturn


def run_forked(plan: Plan, fd: int, recorder_fd: int, follow: str | None = None) -> NoReturn:
    """The forked child's whole life: run the plan's program, stream its profile to `fd` (the write
    end of the pipe whose read end is the recorder's `recorder_fd`), exit.

    Leaves by SystemExit, which unwinds the supervisor's (inert) frames up to
    the interpreter, so the program's atexit handlers and finalisation run as
    in a plain `python script.py`.
    """
    _forget_launcher_path()
    # What truestack loaded since the fork lives until exit, as what it loaded before (launch.py):
    # frozen out of the collector's sight, the program's full collections do not traverse it, nor
    # does the interpreter's last collection at exit, which `record` waits for. Before the program's
    # own code runs (finding a `-m` module imports its package), so none of the program's is frozen.
    gc.freeze()
    target = plan.target
    try:
        if target.kind == "module":
            plan.target = resolve_target(None, target.name, target.args)
        out = PipeOut(fd, os.getppid(), recorder_fd)
        try:
            sink = _follow_children(out, follow)
            status = run_in_process(plan, sink)
        finally:
            out.close()
    except UsageError as exc:
        sys.stderr.write(f"truestack: error: {exc}\n")
        sys.exit(2)
    sys.exit(status)


def _follow_children(out: PipeOut, follow: str | None) -> StreamSink:
    """The sink for the program's stream; with --subprocesses (`follow`: the recorder's config),
    its forks are followed (new interpreters follow themselves, `follow.py`), else its Python
    children are only counted, for the summary's note. Either way a fork of the program never
    writes to the program's stream."""
    children = None
    if follow is None:
        children = ChildWatch()
        children.install()
    sink = StreamSink(out, children)  # type: ignore[arg-type]  # write/flush is all it uses

    def forget() -> None:  # in a fork: the pipe is the program's, and the recorder waits for its end
        sink.forget()
        with contextlib.suppress(OSError):
            out.close()

    if follow is None:
        os.register_at_fork(after_in_child=forget)
    else:
        from .follow import follow_forks
        from .wire import FollowConfig

        follow_forks(FollowConfig.decode(follow), forget)
    return sink


def _forget_launcher_path() -> None:
    """Drop the directory Python put first on sys.path for `truestack` / `python -m truestack`
    (none under -P or -I), as `python script.py` would not have it."""
    if not (getattr(sys.flags, "safe_path", False) or sys.flags.isolated) and sys.path:
        del sys.path[0]
