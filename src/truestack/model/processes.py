"""The processes of a profile recorded with `record --subprocesses`.

Every process that was followed is a `ProcessInfo` in `meta.processes`:
its pid, its parent, its command line, how it started (the program itself,
a fork, a new interpreter), which of the profile's threads are its own, and
whether its stream ended cleanly. A profile without processes (the default)
is one process and every output is as it always was.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping

from ..records import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

COMMAND_CHARS = 100  # a process's command line in labels is cut to this many characters
HOWS = ("main", "fork", "exec")


class ProcessInfo(Record):
    """One followed process of the recorded program's tree."""

    __slots__ = ("command", "complete", "how", "parent", "pid", "start_cpu_ns", "threads")

    def __init__(
        self,
        pid: int,
        command: list[str],
        parent: int = 0,
        how: str = "main",
        complete: bool = True,
        threads: list[int] | None = None,
        start_cpu_ns: int = 0,
    ) -> None:
        self.pid = pid
        self.command = command  # its argv as the kernel started it (a fork: its parent's)
        self.parent = parent  # the pid of the process that started it
        self.how = how  # "main": the recorded program; "fork"; "exec": a new interpreter
        self.complete = complete  # its stream ended cleanly (False: killed, crashed or os._exit)
        self.threads: list[int] = [] if threads is None else threads  # keys of Profile.threads
        self.start_cpu_ns = start_cpu_ns  # CPU the process had used when sampling started in it (not sampled)

    @property
    def label(self) -> str:
        """`process <pid> <cmdline>`: the root frame and track name of its samples."""
        return f"process {self.pid} {command_text(self.command)}".rstrip()

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProcessInfo:
        """The inverse of as_dict(); ValueError when a field has the wrong type."""
        if not isinstance(data, Mapping):
            raise ValueError("meta.processes entry is not an object")
        command, threads = data.get("command", []), data.get("threads", [])
        if not isinstance(command, list) or not isinstance(threads, list):
            raise ValueError("meta.processes entry has a malformed command or thread list")
        try:
            return cls(
                pid=int(data["pid"]),
                command=[str(c) for c in command],
                parent=int(data.get("parent", 0)),
                how=str(data.get("how", "main")),
                complete=bool(data.get("complete", True)),
                threads=[int(t) for t in threads],
                start_cpu_ns=int(data.get("start_cpu_ns", 0)),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"meta.processes entry is malformed ({exc})") from None


def command_text(argv: Iterable[str]) -> str:
    """A command line for a label: the program's base name, shell-quoted arguments, cut to COMMAND_CHARS."""
    args = list(argv)
    if args:
        args[0] = args[0].rsplit("/", 1)[-1]
    text = " ".join(shlex.quote(a) if a else "''" for a in args).replace("\n", " ")
    return text if len(text) <= COMMAND_CHARS else text[: COMMAND_CHARS - 1] + "…"


def processes_from_list(value: Any) -> list[ProcessInfo]:
    """meta.processes from its saved form (a list of objects)."""
    if not isinstance(value, list):
        raise ValueError("meta.processes is not a list")
    return [ProcessInfo.from_dict(entry) for entry in value]


def process_of_thread(processes: Iterable[ProcessInfo]) -> dict[int, ProcessInfo]:
    """thread key -> the process it belongs to."""
    return {tid: info for info in processes for tid in info.threads}
