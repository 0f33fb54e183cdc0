"""The target's side of `truestack attach PID`: runs inside the attached process.

The attacher injects one line (`remote/inject.py`) that puts truestack on
`sys.path` just long enough to import this module, then calls `start` with
the config. `start` only starts a thread, `truestack-attach` (never sampled,
like every `truestack-*` thread), as the injector's thread may be anywhere in
the program. That thread:

1. connects to the attacher's socket and sends one hello line: the pid and
   command line, or the reason it will not sample (a truestack session
   already runs here);
2. starts a session (the native sampler, as `record` gives the program) and
   streams its profile over the connection (`sink.StreamSink`, the format the
   supervisor reads);
3. waits for the attacher to say stop or to go away (a read that returns:
   the attacher killed is seen at once), or for the process to exit (atexit:
   the profile covers the run up to its exit);
4. stops the session and ends the stream. The sampler is then stopped the way
   `record` leaves it at exit: no timer armed, its control thread joined, no
   `truestack-*` thread left, and `threading.Thread` unwrapped. The SIGPROF
   and SIGSEGV handlers stay installed but inert (they chain to whatever was
   there before), as does the code-object hook: a later attach reuses them.

Nothing here writes to the program's stdout or stderr, touches its signal
handlers (Python's), or changes how it exits.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import sys
import threading
import time

from ..records import Record
from ..session import active_sessions
from .sink import socket_session

HELLO_MAGIC = b"TSATTACH1 "
STOP = b"stop\n"
THREAD_NAME = "truestack-attach"

_lock = threading.Lock()
_current: _Attached | None = None


class AttachConfig(Record):
    """Where the attached process streams, and how it samples."""

    __slots__ = ("async_tasks", "engine", "include_idle", "max_depth", "mode", "native", "rate_hz", "socket_path")

    def __init__(
        self,
        socket_path: str,
        mode: str,
        rate_hz: float,
        engine: str,
        max_depth: int,
        include_idle: bool,
        async_tasks: bool = False,
        native: str = "off",
    ) -> None:
        self.socket_path = socket_path
        self.mode = mode
        self.rate_hz = rate_hz
        self.engine = engine
        self.max_depth = max_depth
        self.include_idle = include_idle
        self.async_tasks = async_tasks  # --async
        self.native = native  # --native / --native-all

    def encode(self) -> str:
        return json.dumps({name: getattr(self, name) for name in self.__slots__}, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> AttachConfig:
        data = json.loads(text)
        return cls(
            str(data["socket_path"]),
            str(data["mode"]),
            float(data["rate_hz"]),
            str(data["engine"]),
            int(data["max_depth"]),
            bool(data["include_idle"]),
            bool(data.get("async_tasks", False)),
            str(data.get("native", "off")),
        )


def encode_hello(fields: dict[str, object]) -> bytes:
    return HELLO_MAGIC + json.dumps(fields, separators=(",", ":")).encode() + b"\n"


class _Attached:
    def __init__(self, config: AttachConfig, sock: socket.socket) -> None:
        self.session, self._sink = socket_session(config, sock, list(sys.orig_argv))
        self.session.profile.meta.include_idle = config.include_idle
        self._sock = sock
        self._done = False
        self._finish_lock = threading.Lock()
        self.session.start()

    def stream(self, sock: socket.socket) -> None:
        """Say yes to the attacher, then send the profile as it grows."""
        try:
            sock.sendall(encode_hello({"pid": os.getpid(), "command": self.session.profile.meta.command}))
            self._sink.started(self.session)
        except BaseException:
            self.finish()
            raise

    def finish(self, why: str | None = None) -> None:
        with self._finish_lock:
            if self._done:
                return
            self._done = True
            if why:
                self.session.profile.note_interrupted(why)
            profile = self.session.stop()
            with contextlib.suppress(Exception):  # the attacher went away: nothing to tell the program
                self._sink.finished(profile)

    def forget(self) -> None:
        """In a forked child: the stream is the parent's. Close this process's copy of the
        connection (no shutdown: the parent's stays open) and never write to it."""
        self._done = True
        self._sink.forget()
        with contextlib.suppress(OSError):
            self._sock.close()


def _busy() -> str | None:
    if _current is not None:
        return "another truestack attach is already recording it"
    if active_sessions():
        return "a truestack recording is already running in it"
    engines = sys.modules.get("truestack.engines.native")
    if engines is not None and getattr(engines, "_active", None) is not None:
        return "a truestack sampler is already running in it"
    return None


def start(config_text: str) -> None:
    """Called by the injected line, with the GIL, in whatever thread the injector used: returns at once."""
    config = AttachConfig.decode(config_text)
    threading.Thread(target=_serve, args=(config,), name=THREAD_NAME, daemon=True).start()


def _serve(config: AttachConfig) -> None:
    global _current
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with sock:
        try:
            sock.connect(config.socket_path)
        except OSError:
            return  # the attacher is gone already
        with _lock:
            problem = _busy()
            if problem is None:
                try:
                    _current = _Attached(config, sock)
                except Exception as exc:  # no engine, or it cannot start: the attacher says why
                    problem = f"sampling cannot start: {exc}"
        if problem is not None:
            with contextlib.suppress(OSError):
                sock.sendall(encode_hello({"pid": os.getpid(), "error": problem}))
            return
        attached = _current
        assert attached is not None
        atexit.register(_finish_at_exit)
        try:
            with contextlib.suppress(OSError):  # the attacher went away: stop again at once
                attached.stream(sock)
                _wait_for_stop(sock)
            attached.finish()
        finally:
            atexit.unregister(_finish_at_exit)
            with _lock:
                _current = None


def _wait_for_stop(sock: socket.socket) -> None:
    """Until the attacher says stop, closes, or dies (each ends the read)."""
    while True:
        try:
            data = sock.recv(64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data or STOP in data:
            return
        time.sleep(0)  # anything else is not ours to answer: keep waiting


def _forget_in_forked_child() -> None:
    """A fork of the attached process neither samples for the attacher nor ends its stream at its exit."""
    global _current, _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    attached, _current = _current, None
    if attached is not None:
        attached.forget()
        atexit.unregister(_finish_at_exit)


os.register_at_fork(after_in_child=_forget_in_forked_child)


def _finish_at_exit() -> None:
    attached = _current
    if attached is not None:
        attached.finish("the process exited while truestack was attached")
