"""`os.exec*` in the profiled program under `record`: the profile ends first.

An exec replaces the process image but keeps the signals pending for it. A
SIGPROF that a CPU timer queued while the kernel ran the exec (the exec's own
CPU time counts), or that the wall-mode control thread sent just before, meets
the new image with SIGPROF's default action, which ends it: `record` of a
program that execs another lost that program 3 runs in 3 at 1 kHz in cpu mode
and 1 in 3 in wall mode. So every exec of the program (each of `os.exec*` ends
in `os.execv` or `os.execve`) first ends the recording: the profile is finished
and sent, noted as covering the run up to the exec; the timers are stopped; a
SIGPROF still pending for the calling thread is taken. The new image runs
unprofiled, in the same process, whose exit status `record` returns. (Other
threads' pending signals go with the threads, which an exec ends.)

An exec that is bound to fail (what `os.execv` itself rejects, a path that is
not an executable file: `os.execvp` tries every PATH entry that way) does not
end the profile; nor does one in a forked child, which samples nothing and
holds no pending signal of ours. An exec that fails all the same (ENOEXEC,
E2BIG) leaves the rest of the program unprofiled.
"""

from __future__ import annotations

import os
import signal

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_EXECS = ("execv", "execve")


def guard_exec(finish: Callable[[str], None]) -> Callable[[], None]:
    """Make os.execv/os.execve call `finish(why)` first; returns what puts them back."""
    originals = {name: getattr(os, name) for name in _EXECS}
    owner = os.getpid()

    def guarded(name: str) -> Callable[..., Any]:
        real = originals[name]

        def exec_after_the_profile(path: Any, argv: Any, *rest: Any) -> Any:
            if os.getpid() == owner and _would_start(path, argv, *rest[:1]):
                finish(f"the program replaced itself with another (os.{name}), which ran unprofiled")
                _take_pending_sigprof()
            return real(path, argv, *rest)

        exec_after_the_profile.__name__ = exec_after_the_profile.__qualname__ = name
        exec_after_the_profile.__doc__ = real.__doc__
        return exec_after_the_profile

    for name in _EXECS:
        setattr(os, name, guarded(name))

    def restore() -> None:
        for name, real in originals.items():
            setattr(os, name, real)

    return restore


def _would_start(path: Any, argv: Any, env: Any = None) -> bool:
    """False for an exec that fails before it starts: an argument os.execv/os.execve rejects
    (an empty argv or first argument, a NUL byte, an environment name that is empty or holds
    '='), or a path that is no executable file (a descriptor, for fexecve, is taken to be one)."""
    try:
        if not isinstance(argv, (list, tuple)) or not argv or not os.fsencode(argv[0]):
            return False
        if any(b"\0" in os.fsencode(arg) for arg in argv):
            return False
        for key, value in env.items() if env is not None else ():
            name = os.fsencode(key)
            if not name or b"=" in name[1:] or b"\0" in name or b"\0" in os.fsencode(value):
                return False
        if isinstance(path, int):
            return True
        return os.access(path, os.X_OK) and not os.path.isdir(path)
    except (TypeError, ValueError, AttributeError):
        return False


def _take_pending_sigprof() -> None:
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF})
    try:
        while signal.sigtimedwait({signal.SIGPROF}, 0) is not None:
            pass
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
