"""The recorder's side of `record --subprocesses`: the streams of the program's child processes.

`ProcessTree` listens on a unix socket in the private directory
(`bootstrap.py`); every followed process connects, says who it is (pid from
the kernel's SO_PEERCRED, parent and command line from its hello) and streams
its profile (`model/stream.py`), read here as it arrives, alongside the
program's own pipe (`supervisor.py`). A stream cut short (the process was
killed or crashed) keeps every record that arrived whole.

When the program's process has exited, `collect` waits for the streams
still open: a child still running after `GRACE_S` is stopped like a user
would stop it, SIGINT, then SIGTERM, then SIGKILL, each given
`STOP_WAIT_S` to end its stream (signals go through a pidfd, so a reused
pid is never signalled). Then the private directory is removed.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import struct
import time

from ..model import Profile
from ..model.merge import merge_processes
from ..model.processes import ProcessInfo
from ..model.stream import ProfileStreamReader, StreamError
from .bootstrap import Bootstrap
from .wire import decode_hello

GRACE_S = 0.5  # after the program exits, its children get this long to end on their own
STOP_WAIT_S = 1.0  # then each stop signal gets this long
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
_PEERCRED = struct.Struct("3i")  # pid, uid, gid


class _Connection:
    """One followed process's connection: its hello, then its profile stream."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pid = _peer_pid(sock)
        self.pidfd: int | None = None
        if self.pid:
            with contextlib.suppress(OSError):  # gone already: its stream is all there is
                self.pidfd = os.pidfd_open(self.pid)
        self.hello: dict[str, object] | None = None
        self.buffer = bytearray()
        self.reader = ProfileStreamReader()
        self.damaged = False
        self.closed = False

    def read_once(self) -> None:
        try:
            data = self.sock.recv(1 << 20)
        except OSError:
            data = b""
        if not data:
            self.close()
            return
        if self.damaged:
            return
        try:
            if self.hello is None:
                self.buffer += data
                self.hello = decode_hello(self.buffer)
                if self.hello is None:
                    return
                data, self.buffer = bytes(self.buffer), bytearray()
            self.reader.feed(data)
        except (StreamError, ValueError):
            self.damaged = True  # keep what arrived before the damage

    def signal(self, signo: int) -> None:
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signo)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.sock.close()
            if self.pidfd is not None:
                os.close(self.pidfd)

    def info(self) -> ProcessInfo:
        hello = self.hello or {}
        command = hello.get("command")
        return ProcessInfo(
            pid=self.pid or _int(hello.get("pid")),
            command=[str(c) for c in command] if isinstance(command, list) else [],
            parent=_int(hello.get("parent")),
            how=str(hello.get("how") or "exec"),
            complete=self.reader.ended and not self.damaged,
            start_cpu_ns=_int(hello.get("start_cpu_ns")),
        )


def readable(fds: list[int], timeout_s: float) -> list[int]:
    """The fds among `fds` with data (or an end) to read within `timeout_s`: poll(2), which,
    unlike select(2), takes fd numbers past 1023 (a program with many children at once)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return [fd for fd, _events in poller.poll(timeout_s * 1000)]


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _peer_pid(sock: socket.socket) -> int:
    try:
        pid, _uid, _gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    except OSError:
        return 0
    return int(pid)


class ProcessTree:
    """Accepts and reads the followed processes' streams; merges them with the program's at the end."""

    def __init__(
        self, mode: str, rate_hz: float, engine: str, max_depth: int, async_tasks: bool = False, native: str = "off"
    ) -> None:
        self.bootstrap = Bootstrap(mode, rate_hz, engine, max_depth, async_tasks, native)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.listener.bind(self.bootstrap.socket_path)
            self.listener.listen(128)
        except OSError:
            self.remove()
            raise
        self.listener.setblocking(False)
        self.connections: list[_Connection] = []
        self.notes: list[str] = []

    @property
    def config_text(self) -> str:
        return self.bootstrap.config.encode()

    def export_environment(self) -> None:
        self.bootstrap.export_environment()

    def close_in_program(self) -> None:
        """In the program's (forked) process: drop the recorder's listening socket, keep the files."""
        self.listener.close()

    def fds(self) -> list[int]:
        """What the supervisor waits on for this tree."""
        return [self.listener.fileno(), *(c.sock.fileno() for c in self.connections if not c.closed)]

    def handle(self, ready: list[int]) -> None:
        """Accept and read what was found ready among `fds()`."""
        if self.listener.fileno() in ready:
            self._accept()
        for conn in self.connections:
            if not conn.closed and conn.sock.fileno() in ready:
                conn.read_once()

    def _accept(self) -> None:
        while True:
            try:
                sock, _addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setblocking(True)
            self.connections.append(_Connection(sock))

    def collect(self) -> None:
        """The program has exited: read every stream to its end, stopping children that run on."""
        deadline = time.monotonic() + GRACE_S
        stops = list(_STOP_SIGNALS)
        while True:
            self._wait_until(deadline)
            open_ = [c for c in self.connections if not c.closed]
            if not open_ or not stops:
                break
            signo = stops.pop(0)
            for conn in open_:
                conn.signal(signo)
                self.notes.append(
                    f"process {conn.pid} was still running when the program ended: stopped with "
                    f"{signal.Signals(signo).name}"
                )
            deadline = time.monotonic() + STOP_WAIT_S
        for conn in self.connections:
            conn.close()  # its stream is what arrived; the rest went with it

    def _wait_until(self, deadline: float) -> None:
        while any(not c.closed for c in self.connections):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.handle(readable(self.fds(), min(left, 0.05)))
            self._close_exited()

    def _close_exited(self) -> None:
        """A process that exited while something it forked without telling Python (no at-fork
        hook) holds its connection: take what it sent and close it."""
        for conn in self.connections:
            if conn.closed or conn.pidfd is None or not readable([conn.pidfd], 0):
                continue
            while not conn.closed and readable([conn.sock.fileno()], 0):
                conn.read_once()
            conn.close()

    def live_profiles(self) -> list[tuple[int, Profile]]:
        """(pid, profile so far) of each followed process that has sent samples (`top --subprocesses`)."""
        return [(c.pid, c.reader.profile) for c in self.connections if c.reader.records]

    def merged(self, program: Profile, program_info: ProcessInfo) -> Profile:
        """The program's profile with every child's that sent samples, one process group each."""
        parts = [(program_info, program)]
        children = [(c.info(), c.reader.profile) for c in self.connections if c.reader.records]
        # A fork that exec'd Python at once (subprocess's preexec_fn runs at-fork hooks) is that new
        # interpreter's process: its empty fork-time stream is not a process of its own.
        execs = {info.pid for info, _ in children if info.how == "exec"}
        parts.extend(
            (info, part)
            for info, part in children
            if not (info.how == "fork" and info.pid in execs and part.sample_count == 0)
        )
        profile = merge_processes(parts)
        stats = profile.meta.sampler_stats
        if stats is not None:
            stats.notes.extend(n for n in self.notes if n not in stats.notes)
        return profile

    def remove(self) -> None:
        """Close everything and remove the private directory."""
        self.listener.close()
        for conn in self.connections:
            conn.close()
        self.bootstrap.remove()
