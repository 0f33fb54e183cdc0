"""The program's end of the recorder's pipe, kept apart from the program's own files.

A program may close every descriptor it did not open (a daemon's
`os.closerange(3, ...)`) and then open files of its own, which get the lowest
free numbers: the pipe's among them. Written to blindly, the profile stream
would then be lost, or worse, go into the program's file. So:

- the write end moves to a high number at start (programs are handed the lowest
  free one, so a high one is reused last);
- every write, and the close, first checks that the number still names the
  pipe (device and inode, from fstat): a number the program now uses for its
  own file is never written to or closed;
- the check and the write run with the GIL held when the native extension is
  there (`_native.stream_write`): from Python each of them gives the GIL up,
  and a program thread waiting for it then takes it, so the collector had to
  wait for it twice more per drain. The write end is non-blocking for that: what
  does not fit in the pipe now is written from Python, waiting for room with
  the GIL released;
- a pipe found closed is opened again through the recorder's read end,
  `/proc/<recorder>/fd/<n>` (Linux opens the pipe itself, here for writing),
  checked the same way. Failing that, writes raise OSError, which makes the
  stream writer go quiet as when the recorder is gone: the recorder then says
  the end of the run was not received.
"""

from __future__ import annotations

import fcntl
import os
import resource

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Callable

_held_write: Callable[[int, bytes, int, int], int] | None
try:
    from .._native import stream_write as _held_write
except ImportError:  # the pure-Python engine's install: the writes give the GIL up
    _held_write = None

_HIGH_FD = 512  # the moved write end's number, at least (half the soft limit when that is lower)


class PipeOut:
    """The binary file the stream writer writes to (write/flush/close), guarded as above."""

    def __init__(self, fd: int, recorder_pid: int, recorder_fd: int) -> None:
        st = os.fstat(fd)
        self._identity = (st.st_dev, st.st_ino)
        self._fd = _prepared(fd)
        self._reopen_path = f"/proc/{recorder_pid}/fd/{recorder_fd}"
        self.reopened = 0  # times the program closed it and it was opened again

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        if _held_write is not None and self._fd >= 0:
            done = _held_write(self._fd, data, *self._identity)  # -1: the pipe is not at its number
            if done == len(data):
                return done
            view = view[max(done, 0) :]
        # The pipe is full for now (the recorder is behind), or the program closed its number.
        fd = self._checked_fd()
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                _wait_writable(fd)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0 and self._is_pipe(fd):
            os.close(fd)

    def _is_pipe(self, fd: int) -> bool:
        try:
            st = os.fstat(fd)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._identity

    def _checked_fd(self) -> int:
        if self._fd >= 0 and self._is_pipe(self._fd):
            return self._fd
        self._fd = -1  # closed by the program, perhaps reused for one of its files: never touched again
        fd = os.open(self._reopen_path, os.O_WRONLY | os.O_CLOEXEC)  # OSError: the stream goes quiet
        if not self._is_pipe(fd):  # not the recorder's pipe (a recorder that is gone, its pid reused)
            os.close(fd)
            raise BrokenPipeError("the recorder's pipe is gone")
        self._fd = _prepared(fd)
        self.reopened += 1
        return self._fd


def _prepared(fd: int) -> int:
    """`fd` moved high, and non-blocking (see the module's docstring)."""
    fd = _moved_high(fd)
    os.set_blocking(fd, False)
    return fd


def _wait_writable(fd: int) -> None:
    import select  # only when the recorder falls behind (poll: no FD_SETSIZE limit on the number)

    waiter = select.poll()
    waiter.register(fd, select.POLLOUT)
    waiter.poll()


def _moved_high(fd: int) -> int:
    """`fd` moved to a high number (close-on-exec), or left where it is if that fails."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest = min(_HIGH_FD, soft // 2) if soft != resource.RLIM_INFINITY else _HIGH_FD
    if fd >= lowest:
        return fd
    try:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, lowest)
    except OSError:
        return fd
    os.close(fd)
    return moved
