"""Making one thread of another process call `dlopen(path)` through ptrace, and leaving it as it was.

The `ptrace` route of `remote/inject.py` (x86-64 Linux). What it does that
pyinjector does not:

- It saves and restores the thread's whole register state: the
  general-purpose registers and the extended state (x87, SSE, AVX, AVX-512,
  AMX: `PTRACE_GETREGSET NT_X86_XSTATE`). pyinjector restores only the
  general-purpose ones, so the vector registers a thread stopped anywhere
  was using come back holding what `dlopen` left in them: its targets died
  of SIGSEGV (5 of 145 attaches to a loop in `zlib.compress`; 1 in 15 to 80
  to a loop of `sum(range(...))` and `os.path.exists`, which died before it
  could answer).
- It calls only in a thread stopped at a safe point: not inside the dynamic
  loader, and not inside the C library unless blocked in a system call that
  holds none of its locks (`_SAFE_SYSCALLS`). Stopped inside malloc, a thread
  made to call `dlopen` deadlocks on its own arena lock. Every thread of the
  process is tried, each stopped and let go in turn, for up to
  `SAFE_POINT_WAIT_S`.
- A signal that comes during the call is delivered, as it would have been:
  the program's handlers are async-signal-safe by contract.

The call: the path is written below the thread's stack pointer (past the
128-byte red zone of the interrupted function), the return address is 0, so
the return stops the thread with SIGSEGV at address 0 (never delivered).
A thread stopped in a blocking system call gets `orig_rax = -1` for the
call (no restart of the interrupted call into `dlopen`'s code); its own
registers, restored, make the kernel restart that call as after any signal.

`dlopen`'s address in the target is ours moved by the difference of the two
load addresses of the same C library file (checked by device and inode).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import time

from ..errors import TruestackError

SAFE_POINT_WAIT_S = 3.0
CALL_TIMEOUT_S = 10.0
_RETRY_S = 0.005

_PTRACE_CONT, _PTRACE_GETREGS, _PTRACE_SETREGS, _PTRACE_DETACH = 7, 12, 13, 17
_PTRACE_GETREGSET, _PTRACE_SETREGSET, _PTRACE_SEIZE, _PTRACE_INTERRUPT = 0x4204, 0x4205, 0x4206, 0x4207
_PTRACE_EVENT_STOP = 128
_NT_X86_XSTATE = 0x202
_WALL = 0x40000000
_RTLD_NOW = 2
_RED_ZONE = 128
_XSTATE_MAX = 1 << 16

# read, write, close, stat, fstat, lstat, poll, select, pause, nanosleep, connect, accept, sendto, recvfrom,
# recvmsg, wait4, rt_sigtimedwait, rt_sigsuspend, futex, getdents64, clock_nanosleep, epoll_wait,
# openat, newfstatat, pselect6, ppoll, epoll_pwait, accept4, statx: the system calls a
# Python program blocks in or calls in a loop. None is made with a lock of the C library's held;
# futex is a wait for a contended lock (glibc's malloc waits so holding another only while it
# creates an arena, which is rare enough to accept).
_SAFE_SYSCALLS = frozenset(
    (0, 1, 3, 4, 5, 6, 7, 23, 34, 35, 42, 43, 44, 45, 47, 61, 128, 130, 202, 217, 230, 232, 257, 262, 270, 271,
     281, 288, 332)
)  # fmt: skip

# struct user_regs_struct (x86-64), in order.
_REG_NAMES = (
    "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx", "rsi",
    "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds", "es", "fs", "gs",
)  # fmt: skip


class _Regs(ctypes.Structure):
    _fields_ = [(name, ctypes.c_ulonglong) for name in _REG_NAMES]


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class PtraceCallError(TruestackError):
    """The call could not be made; the thread was left as it was. One line."""


class _NoRoom(Exception):
    """The thread's stack has no mapped room below its stack pointer for the call, now."""


def available() -> bool:
    return platform.system() == "Linux" and platform.machine() == "x86_64"


_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)


def _ptrace(request: int, tid: int, addr: int = 0, data: object = None) -> None:
    if isinstance(data, int):
        data = ctypes.c_void_p(data)
    if _libc.ptrace(request, tid, ctypes.c_void_p(addr), data) == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class _Maps:
    """The target's executable mappings of the C library and of the dynamic loader."""

    def __init__(self, pid: int) -> None:
        self.libc: list[tuple[int, int]] = []
        self.loader: list[tuple[int, int]] = []
        self.libc_file: tuple[int, int, str] | None = None  # (base, inode, path) of the C library
        with open(f"/proc/{pid}/maps") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) < 6:
                    continue
                path = parts[5].strip()
                name = os.path.basename(path)
                start, end = (int(x, 16) for x in parts[0].split("-"))
                is_libc = name.startswith("libc.so") or name.startswith("libc-2.")
                if is_libc and int(parts[2], 16) == 0 and self.libc_file is None:
                    self.libc_file = (start, int(parts[4]), path)
                if "x" in parts[1]:
                    if is_libc:
                        self.libc.append((start, end))
                    elif name.startswith("ld-linux") or name.startswith("ld-2."):
                        self.loader.append((start, end))

    @staticmethod
    def _inside(ranges: list[tuple[int, int]], address: int) -> bool:
        return any(start <= address < end for start, end in ranges)

    def unsafe_reason(self, regs: _Regs) -> str | None:
        if self._inside(self.loader, regs.rip):
            return "inside the dynamic loader"
        if self._inside(self.libc, regs.rip):
            in_syscall = regs.orig_rax < (1 << 63)  # -1 when it was stopped running code
            if not in_syscall or regs.orig_rax not in _SAFE_SYSCALLS:
                return "inside the C library"
        return None


def _dlopen_in(pid: int, maps: _Maps) -> int:
    own = _Maps(os.getpid())
    if maps.libc_file is None or own.libc_file is None:
        raise PtraceCallError(f"process {pid} has no C library mapped (a static interpreter?)")
    base, inode, path = maps.libc_file
    own_base, own_inode, own_path = own.libc_file
    if inode != own_inode or os.stat(own_path).st_ino != inode:
        raise PtraceCallError(f"process {pid} runs another C library ({path}) than truestack's ({own_path})")
    try:
        ours = ctypes.cast(ctypes.CDLL(own_path).dlopen, ctypes.c_void_p).value
    except AttributeError:
        ours = None
    if not ours:
        raise PtraceCallError(f"the C library {own_path} has no dlopen (glibc older than 2.34)")
    return ours - own_base + base


def _wait_stop(tid: int, deadline: float) -> int:
    """The next stop's raw wait status; PtraceCallError when the thread is gone or did not stop in time."""
    while True:
        try:
            got, status = os.waitpid(tid, os.WNOHANG | _WALL)
        except ChildProcessError:
            raise PtraceCallError(f"thread {tid} ended") from None
        if got == tid:
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                raise PtraceCallError(f"thread {tid} ended")
            return status
        if time.monotonic() > deadline:
            raise PtraceCallError(f"thread {tid} did not stop within its time")
        time.sleep(0.0005)


class _Stopped:
    """One thread seized and stopped; `release` lets it run on as it was."""

    def __init__(self, tid: int) -> None:
        self.tid = tid
        _ptrace(_PTRACE_SEIZE, tid)
        try:
            self._stop_again()  # signals that arrive first are delivered; the interrupt's stop comes after
            self.regs = _Regs()
            _ptrace(_PTRACE_GETREGS, tid, 0, ctypes.addressof(self.regs))
            self.xstate = ctypes.create_string_buffer(_XSTATE_MAX)
            self.xstate_iov = _IoVec(ctypes.addressof(self.xstate), _XSTATE_MAX)
            _ptrace(_PTRACE_GETREGSET, tid, _NT_X86_XSTATE, ctypes.addressof(self.xstate_iov))
        except BaseException:
            self.release()
            raise

    def restore(self) -> None:
        _ptrace(_PTRACE_SETREGSET, self.tid, _NT_X86_XSTATE, ctypes.addressof(self.xstate_iov))
        _ptrace(_PTRACE_SETREGS, self.tid, 0, ctypes.addressof(self.regs))

    def release(self) -> None:
        try:
            _ptrace(_PTRACE_DETACH, self.tid)
        except OSError as exc:
            if exc.errno != errno.ESRCH:
                raise

    def _stop_again(self) -> None:
        """Stop the thread where it is, so that its registers can be put back."""
        _ptrace(_PTRACE_INTERRUPT, self.tid)
        while True:
            status = _wait_stop(self.tid, time.monotonic() + CALL_TIMEOUT_S)
            if status >> 16 == _PTRACE_EVENT_STOP:
                return
            _ptrace(_PTRACE_CONT, self.tid, 0, os.WSTOPSIG(status))

    def call(self, function: int, path: bytes) -> int:
        """`function(path, RTLD_NOW)` in this thread; its return value."""
        regs = _Regs.from_buffer_copy(self.regs)
        text_at = (self.regs.rsp - _RED_ZONE - len(path) - 1) & ~15
        return_at = ((text_at - 64) & ~15) - 8  # at the call's entry, rsp + 8 is 16-byte aligned
        try:
            with open(f"/proc/{self.tid}/mem", "r+b", buffering=0) as mem:
                mem.seek(text_at)
                mem.write(path + b"\0")
                mem.seek(return_at)
                mem.write((0).to_bytes(8, "little"))
        except OSError:  # the stack's lowest page is near: the kernel does not grow a stack for this write
            raise _NoRoom from None
        regs.rsp, regs.rip, regs.rdi, regs.rsi, regs.rax = return_at, function, text_at, _RTLD_NOW, 0
        regs.orig_rax = (1 << 64) - 1
        _ptrace(_PTRACE_SETREGS, self.tid, 0, ctypes.addressof(regs))
        deadline = time.monotonic() + CALL_TIMEOUT_S
        _ptrace(_PTRACE_CONT, self.tid, 0, 0)
        while True:
            try:
                status = _wait_stop(self.tid, deadline)
            except PtraceCallError:
                self._stop_again()
                raise PtraceCallError(
                    f"dlopen did not return within {CALL_TIMEOUT_S:g} s in thread {self.tid}"
                ) from None
            signo = os.WSTOPSIG(status)
            if status >> 16:  # a group stop or another event: not ours to keep
                _ptrace(_PTRACE_CONT, self.tid, 0, 0)
                continue
            now = _Regs()
            _ptrace(_PTRACE_GETREGS, self.tid, 0, ctypes.addressof(now))
            if signo == 11 and now.rip == 0:
                return int(now.rax)
            _ptrace(_PTRACE_CONT, self.tid, 0, signo)  # the program's own signal: delivered


def load_library(pid: int, library: str) -> None:
    """dlopen(library) in a thread of `pid` stopped at a safe point; PtraceCallError saying why not."""
    if not available():
        raise PtraceCallError(f"the ptrace route runs on x86-64 Linux only, not {platform.machine()}")
    try:
        maps = _Maps(pid)
    except FileNotFoundError:
        raise PtraceCallError(f"no such process: {pid} (it ended)") from None
    dlopen = _dlopen_in(pid, maps)
    deadline = time.monotonic() + SAFE_POINT_WAIT_S
    last = "no thread"
    while True:
        for tid in _threads(pid):
            try:
                stopped = _Stopped(tid)
            except (PtraceCallError, ProcessLookupError):
                continue  # ended meanwhile
            try:
                reason = maps.unsafe_reason(stopped.regs) or _call_in(stopped, dlopen, library)
            finally:
                stopped.release()
            if reason is None:
                return
            last = f"thread {tid} was {reason}"
        if time.monotonic() > deadline:
            raise PtraceCallError(
                f"no thread of process {pid} reached a safe point within {SAFE_POINT_WAIT_S:g} s ({last})"
            )
        time.sleep(_RETRY_S)


def _call_in(stopped: _Stopped, dlopen: int, library: str) -> str | None:
    """Load `library` in the stopped thread, its registers put back after; None once loaded, else
    why this thread could not take the call now."""
    try:
        handle = stopped.call(dlopen, os.fsencode(library))
    except _NoRoom:
        return "at the lowest page of its stack"
    finally:
        stopped.restore()
    if not handle:
        raise PtraceCallError(f"dlopen of truestack's agent failed in thread {stopped.tid}")
    return None


def _threads(pid: int) -> list[int]:
    """The main thread first: the agent's thread starts there as well as anywhere, and it is the one
    that runs Python."""
    try:
        tids = [int(name) for name in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        raise PtraceCallError(f"no such process: {pid} (it ended)") from None
    return sorted(tids, key=lambda tid: tid != pid)
