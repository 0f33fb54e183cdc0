"""Notices the Python processes a recorded program starts: without
`--subprocesses`, `record` does not follow them, and the user should hear
that their time is not in the profile rather than wonder where it went."""

from __future__ import annotations

import os
import re
import sys
from _thread import get_ident

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

_PYTHON = re.compile(r"python[\d.]*$")


def _is_python(path: Any) -> bool:
    try:
        name = os.path.basename(os.fsdecode(path))
    except TypeError:
        return False
    return bool(_PYTHON.match(name)) or os.fsdecode(path) == sys.executable


class ChildWatch:
    """An audit hook on process creation (it cannot be removed). The native extension's C hook
    calls it for those events only; without the extension it is a Python audit hook, called for
    every audited event of the program (`id()` is one)."""

    def __init__(self) -> None:
        self.started: dict[str, int] = {}  # how -> count
        self._popen_threads: set[int] = set()  # a Popen here is about to spawn or exec: one child, not two

    def install(self) -> None:
        try:
            from .._native import watch_process_events
        except ImportError:
            sys.addaudithook(self._hook)
        else:
            watch_process_events(self._hook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "os.fork":  # multiprocessing's default on Linux, or os.fork() itself
            how = "fork"
        elif event == "subprocess.Popen":
            executable, argv = args[0], args[1]
            first = argv[0] if isinstance(argv, (list, tuple)) and argv else argv
            if not (_is_python(executable) if executable else _is_python(first)):
                return
            self._popen_threads.add(get_ident())  # 3.13's Popen then raises os.posix_spawn for the same child
            how = "subprocess"
        elif event in ("os.exec", "os.posix_spawn", "os.spawn"):
            if get_ident() in self._popen_threads:
                self._popen_threads.discard(get_ident())
                return
            if not _is_python(args[1] if event == "os.spawn" else args[0]):
                return
            how = event.split(".")[1]
        else:
            return
        self.started[how] = self.started.get(how, 0) + 1

    def note(self) -> str | None:
        if not self.started:
            return None
        total = sum(self.started.values())
        how = ", ".join(f"{k} {v}" for k, v in sorted(self.started.items()))
        return (
            f"the program started {total} Python child process{'es' if total > 1 else ''} ({how}): "
            "record follows children only with --subprocesses, so their time is not in this profile"
        )
