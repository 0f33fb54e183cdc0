"""What `record` was asked to do: the program, how to sample it, where the profile goes.

Built and checked by the CLI before the program's process is forked, so it
imports nothing heavy (no dataclasses: its import alone is a measurable
part of `record`'s start-up).
"""

from __future__ import annotations

from ..records import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at run time
if TYPE_CHECKING:
    from ..target import Target


def check_native(native: str, engine: str) -> None:
    """UsageError (one line) when --native cannot work here; nothing is imported when it is off."""
    if native == "off":
        return
    from ..engines import native_problem
    from ..errors import UsageError

    problem = native_problem(native, engine)
    if problem is not None:
        raise UsageError(problem)


class Plan(Record):
    __slots__ = (
        "async_tasks",
        "duration",
        "engine",
        "fmt",
        "function_level",
        "include_idle",
        "max_depth",
        "mode",
        "native",
        "output",
        "quiet",
        "rate_hz",
        "subprocesses",
        "target",
        "top",
    )

    def __init__(
        self,
        target: Target,
        fmt: str,
        output: str,
        mode: str,
        rate_hz: float,
        engine: str,
        max_depth: int,
        duration: float | None,
        function_level: bool,
        include_idle: bool,
        quiet: bool,
        top: int,
        subprocesses: bool = False,
        async_tasks: bool = False,
        native: str = "off",
    ) -> None:
        self.target = target
        self.fmt = fmt  # an exporters.FORMATS name
        self.output = output  # absolute path
        self.mode = mode
        self.rate_hz = rate_hz
        self.engine = engine
        self.max_depth = max_depth
        self.duration = duration  # seconds, or None: until the program ends
        self.function_level = function_level
        self.include_idle = include_idle
        self.quiet = quiet
        self.top = top  # rows of the summary's method table
        self.native = native  # settings.NATIVE_CHOICES: C frames in the stacks (--native, --native-all)
        self.subprocesses = subprocesses  # follow the program's Python child processes (recording/follow.py)
        self.async_tasks = async_tasks  # --async: per-task samples (truestack/tasks)
