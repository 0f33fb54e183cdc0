"""Running a line of Python inside another process, for `truestack attach`.

One class per route, each with `run(pid, code)`: the code runs once in the
target, in a thread of its own that takes the GIL, and `run` returns once it is
started (or raises InjectionError with a one-line message). `choose()` picks
the route:

- `GdbInjector` (the default): gdb runs `gdb_safepoint.py`, which reads every
  thread's backtrace and calls `dlopen` on truestack's agent
  (`_csrc/attach_agent.c`, the code patched into a copy of it) only in a
  thread that is not inside malloc, the dynamic loader, thread creation or
  fork, looking again 10 ms later while none is. The agent's constructor
  starts the thread. ~0.5-1 s, most of it gdb reading symbols.
- `PtraceInjector`, when gdb is not installed or cannot call here (gdb 13
  on a CPU with AMX: `gdb_calls.py`), or when forced: truestack's own ptrace call
  (`ptrace_call.py`), made only in a thread stopped outside the C library
  and the loader (or blocked in a system call that holds no lock), which
  puts back every register afterwards, vector ones included. ~0.1 s.
- `PyinjectorInjector`, only when forced: `pyinjector` (ptrace makes the
  thread it stops call dlopen) cannot choose where that thread is stopped.
  Stopped inside malloc, the thread deadlocks on its own arena lock and the
  target hangs for good: measured on about one attach in five to a program
  allocating in a tight loop. A signal that stops the thread during that
  dlopen makes pyinjector give up halfway, with the same result, so it is not
  tried on a process that receives SIGPROF (`signal_sources.py`). It also
  puts back only the general-purpose registers: the vector registers of the
  code it stopped came back changed in 8 attaches of 10 to a C loop holding
  them, and 5 of 145 targets looping in `zlib.compress` crashed.
- `RemoteExecInjector`: Python 3.14's `sys.remote_exec` (PEP 768), when
  both this interpreter and the target are 3.14+ (truestack's sampler does not
  support 3.14 yet: the route is here so it slots in unchanged). It runs the
  code at the target's next safe point by design.

Why not `hypno` (pyinjector's Python runner) or gdb's `call PyGILState_Ensure()`:
both take the GIL in the thread ptrace stopped, which deadlocks when that
thread was inside the GIL's own locking (see attach_agent.c).

`TRUESTACK_INJECTOR=ptrace|pyinjector|gdb|remote_exec` forces one (tests use it).
"""

from __future__ import annotations

import errno
import glob
import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Protocol

from ..errors import TruestackError
from . import ptrace_call
from .gdb_calls import calls_break_the_target
from .signal_sources import OTHER_SAMPLER, sigprof_sender

INJECTOR_ENV = "TRUESTACK_INJECTOR"
_GDB_TIMEOUT_S = 60.0
_AGENT_MARKER = b"\0--- truestack attach agent code ---"
_AGENT_CODE_MAX = 16384  # TS_AGENT_CODE_MAX in attach_agent.c


class InjectionError(TruestackError):
    """The code could not be run in the target; the message is one line."""


class Injector(Protocol):
    name: str

    def run(self, pid: int, code: str) -> None: ...


def _stripped_hint(pid: int, detail: str) -> str:
    return (
        f"cannot inject into process {pid} ({detail}): its interpreter may be statically linked or stripped of "
        "the symbols injection needs (dlopen, PyGILState_Ensure, PyRun_SimpleString)"
    )


def _agent_library() -> str:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = sorted(glob.glob(os.path.join(here, "_attach_agent*.so")))
    if not found:
        raise InjectionError("truestack's attach agent (_attach_agent*.so) was not built; reinstall truestack")
    return found[0]


def patched_agent(code: str, directory: str) -> str:
    """A copy of the agent in `directory` (readable by the target) that runs `code`."""
    with open(_agent_library(), "rb") as fh:
        data = bytearray(fh.read())
    at = data.find(_AGENT_MARKER)
    payload = code.encode() + b"\0"
    if at < 0:
        raise InjectionError("truestack's attach agent is damaged (no code marker); reinstall truestack")
    if len(payload) > _AGENT_CODE_MAX:
        raise ValueError(f"injected code too long ({len(payload)} bytes)")
    data[at : at + len(payload)] = payload
    fd, path = tempfile.mkstemp(prefix="agent-", suffix=".so", dir=directory)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, 0o644)
    return path


class PyinjectorInjector:
    name = "pyinjector"

    @staticmethod
    def available() -> bool:
        try:
            importlib.import_module("pyinjector")
        except Exception:  # not installed, or its compiled part does not load here
            return False
        return True

    def run(self, pid: int, code: str) -> None:
        sender = sigprof_sender(pid)  # a signal during pyinjector's remote dlopen leaves the target deadlocked
        if sender is not None:
            raise InjectionError(f"cannot attach to process {pid}: {sender}")
        pyinjector = importlib.import_module("pyinjector")
        with tempfile.TemporaryDirectory(prefix="truestack-agent-") as directory:
            os.chmod(directory, 0o755)  # the target may run as another user
            try:
                pyinjector.inject(pid, patched_agent(code, directory))  # kept loaded: its thread may still run
            except Exception as exc:  # pyinjector's InjectorError and the OSErrors of its ptrace calls
                raise _injector_error(pid, exc) from None


def _injector_error(pid: int, exc: Exception) -> InjectionError:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if f"stopped by signal {int(signal.SIGPROF)}" in text:  # ptrace stops the target at each signal
        return InjectionError(f"cannot attach to process {pid}: {OTHER_SAMPLER}")
    if "ermission" in text or "EPERM" in text or "not permitted" in text:
        return InjectionError(f"ptrace of process {pid} refused ({text})")
    return InjectionError(_stripped_hint(pid, f"{type(exc).__name__}: {text}"))


class PtraceInjector:
    name = "ptrace"

    @staticmethod
    def available() -> bool:
        return ptrace_call.available()

    def run(self, pid: int, code: str) -> None:
        with tempfile.TemporaryDirectory(prefix="truestack-agent-") as directory:
            os.chmod(directory, 0o755)  # the target may run as another user
            try:
                ptrace_call.load_library(pid, patched_agent(code, directory))  # kept loaded, as pyinjector's
            except ptrace_call.PtraceCallError as exc:
                raise InjectionError(f"cannot inject into process {pid}: {exc}") from None
            except OSError as exc:  # a ptrace call refused
                if exc.errno in (errno.EPERM, errno.EACCES):
                    raise InjectionError(f"ptrace of process {pid} refused ({exc.strerror})") from None
                raise InjectionError(f"cannot inject into process {pid}: ptrace: {exc.strerror}") from None


class GdbInjector:
    name = "gdb"

    def __init__(self, calls_checked: bool = False) -> None:
        self.calls_checked = calls_checked  # choose() has seen gdb's test call come back right

    @staticmethod
    def available() -> bool:
        return shutil.which("gdb") is not None

    def run(self, pid: int, code: str) -> None:
        broken = None if self.calls_checked else calls_break_the_target()
        if broken is not None:  # checked on a process of ours: never try it on the user's
            raise InjectionError(
                f"not attaching to process {pid}: this gdb cannot call a function in another process on this "
                f"CPU without breaking it (a test call said: {broken}; gdb 13 and older do not know the AMX "
                "register state): install gdb 14 or newer, or set TRUESTACK_INJECTOR=ptrace (truestack's own "
                "ptrace call)"
            )
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gdb_safepoint.py")
        with tempfile.TemporaryDirectory(prefix="truestack-agent-") as directory:
            os.chmod(directory, 0o755)
            env = dict(os.environ, TRUESTACK_GDB_PID=str(pid), TRUESTACK_GDB_AGENT=patched_agent(code, directory))
            try:
                done = subprocess.run(
                    ["gdb", "-nx", "-batch", "-x", script], env=env,
                    capture_output=True, text=True, timeout=_GDB_TIMEOUT_S, stdin=subprocess.DEVNULL,
                )  # fmt: skip
            except subprocess.TimeoutExpired:  # gdb is killed: the kernel detaches it, the target runs on
                raise InjectionError(f"gdb did not finish injecting into process {pid} within 60 s") from None
        out = done.stdout + done.stderr
        said = next((line.split(" ", 2)[1:] for line in out.splitlines() if line.startswith("TRUESTACK-INJECT ")), None)
        if said is None:
            last = next((line for line in reversed(out.splitlines()) if line.strip()), "no output")
            raise InjectionError(_stripped_hint(pid, f"gdb: {last.strip()}"))
        kind, detail = said[0], said[1] if len(said) > 1 else ""
        if kind == "refused":
            raise InjectionError(f"ptrace of process {pid} refused (gdb: {detail})")
        if kind == "unsafe":
            raise InjectionError(f"cannot inject into process {pid} safely: {detail}")
        if kind != "ok":
            raise InjectionError(_stripped_hint(pid, f"gdb: {detail}"))


class RemoteExecInjector:
    name = "remote_exec"

    @staticmethod
    def available() -> bool:
        return hasattr(sys, "remote_exec")

    def run(self, pid: int, code: str) -> None:
        # PEP 768: the target runs the file at its next eval-breaker check; it must outlive that.
        fd, path = tempfile.mkstemp(suffix=".py", prefix="truestack-attach-")
        with os.fdopen(fd, "w") as fh:
            fh.write(code + "\n")
        os.chmod(path, 0o644)
        try:
            sys.remote_exec(pid, path)  # type: ignore[attr-defined,unused-ignore]
        except (OSError, RuntimeError) as exc:
            os.unlink(path)
            raise InjectionError(f"sys.remote_exec into process {pid} failed: {exc}") from None


ROUTES: dict[str, type[PyinjectorInjector] | type[PtraceInjector] | type[GdbInjector] | type[RemoteExecInjector]] = {
    "pyinjector": PyinjectorInjector,
    "ptrace": PtraceInjector,
    "gdb": GdbInjector,
    "remote_exec": RemoteExecInjector,
}


def choose(target_version: tuple[int, int]) -> Injector:
    """The route to use, or InjectionError naming what to install."""
    forced = os.environ.get(INJECTOR_ENV)
    if forced:
        route = ROUTES.get(forced)
        if route is None:
            raise InjectionError(f"{INJECTOR_ENV}={forced!r}: choose one of {', '.join(ROUTES)}")
        if not route.available():
            raise InjectionError(f"{INJECTOR_ENV}={forced}: that route is not available on this machine")
        return route()
    if target_version >= (3, 14) and RemoteExecInjector.available():
        return RemoteExecInjector()
    if GdbInjector.available():
        if calls_break_the_target() is None:
            return GdbInjector(calls_checked=True)
        if not PtraceInjector.available():
            return GdbInjector()  # which says why it cannot, and what to install
    if PtraceInjector.available():  # no gdb, or one that cannot call on this CPU (gdb 13 with AMX)
        return PtraceInjector()
    raise InjectionError("attaching needs gdb (`apt-get install gdb`) on this machine (not x86-64 Linux)")
