"""Can `truestack attach` get into this process, and with which truestack.

- `check_ptrace`: the kernel lets us ptrace it (Yama's `ptrace_scope`, its
  owner), with a message that says what to run when it does not.
- `find_python`: it runs CPython 3.10–3.13 (`process.locate`, as `dump` finds it).
- `truestack_path`: the directory the target must import truestack from: this
  install when the target runs our Python version (another venv of it
  included: the extension is built per version, not per venv), else a
  truestack installed for the target's interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from .process import RemoteError, VersionMismatch, check_pid, interpreter_candidates, locate, permission_message

YAMA = "/proc/sys/kernel/yama/ptrace_scope"
_PROBE = (
    "import os, sys, truestack, truestack._native; "
    "print('%d.%d' % sys.version_info[:2]); print(os.path.dirname(os.path.dirname(truestack.__file__)))"
)


@dataclass(frozen=True)
class TargetPython:
    pid: int
    version: tuple[int, int]
    exe: str
    candidates: list[str]  # interpreters that can stand for it (its argv[0] first, then its executable)


def _yama_scope() -> int | None:
    try:
        with open(YAMA) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def _is_descendant(pid: int) -> bool:
    me, current = os.getpid(), pid
    for _ in range(64):
        try:
            with open(f"/proc/{current}/status") as fh:
                ppid = next(int(line.split()[1]) for line in fh if line.startswith("PPid:"))
        except (OSError, StopIteration, ValueError):
            return False
        if ppid == me:
            return True
        if ppid <= 1:
            return False
        current = ppid
    return False


def check_ptrace(pid: int) -> None:
    """RemoteError when the kernel would refuse to let this process ptrace `pid`."""
    check_pid(pid)
    try:  # what `dump` reads first; the kernel checks ptrace access as they are read
        os.readlink(f"/proc/{pid}/exe")
        with open(f"/proc/{pid}/maps") as fh:
            fh.read()
    except PermissionError:
        raise RemoteError(permission_message(pid, "attach")) from None
    except FileNotFoundError:
        raise RemoteError(f"no such process: {pid}") from None
    scope = _yama_scope()
    privileged = os.geteuid() == 0  # root holds CAP_SYS_PTRACE unless a container dropped it (then ptrace says so)
    if scope == 3 or (scope == 2 and not privileged) or (scope == 1 and not privileged and not _is_descendant(pid)):
        raise RemoteError(
            f"kernel.yama.ptrace_scope is {scope}: attaching to process {pid} is not allowed"
            + (" until reboot (scope 3 forbids ptrace)" if scope == 3 else "")
            + f"; run `sudo truestack attach {pid}`, or `sudo sysctl kernel.yama.ptrace_scope=0`"
        )


def find_python(pid: int) -> TargetPython:
    try:
        found = locate(pid)
    except VersionMismatch as exc:
        return TargetPython(pid, exc.version, os.readlink(f"/proc/{pid}/exe"), exc.candidates)
    return TargetPython(pid, found.version, found.exe, interpreter_candidates(pid, found.exe))


def own_install() -> str:
    """The directory this truestack package is in (site-packages, or src/ for an editable install)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def truestack_path(target: TargetPython) -> str:
    """Where the target imports truestack from, or RemoteError naming its interpreter and the install to run."""
    wanted = f"{target.version[0]}.{target.version[1]}"
    if target.version == sys.version_info[:2]:
        try:
            from .. import _native  # noqa: F401
        except ImportError:
            pass
        else:
            return own_install()
    for exe in target.candidates:
        try:
            probe = subprocess.run(
                [exe, "-c", _PROBE], capture_output=True, text=True, timeout=30,
                env={**os.environ, "PYTHONSAFEPATH": "1"}, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            continue
        lines = probe.stdout.split("\n")
        if probe.returncode == 0 and len(lines) >= 2 and lines[0] == wanted:
            return lines[1]
    exe = target.candidates[0] if target.candidates else target.exe
    raise RemoteError(
        f"process {target.pid} runs Python {wanted} ({exe}), which has no truestack with its compiled sampler: "
        f"install it there (`{exe} -m pip install truestack`)"
    )
