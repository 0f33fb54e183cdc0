"""The target's side of `truestack attach PID`: runs inside the attached process.

The attacher injects one line (`remote/inject.py`) that puts truestack on
`sys.path` just long enough to import this module, then calls `start` with
the config, normally in the main thread (the agent's pending call: see
`_csrc/attach_agent.c` for why). `start`:

1. connects to the attacher's socket;
2. starts a session (the native sampler, as `record` gives the program);
3. starts the thread `truestack-attach` (never sampled, like every
   `truestack-*` thread) and sends one hello line: the pid, the command line
   and that thread's id, or the reason it will not sample (a truestack session
   already runs here); then streams the profile over the connection
   (`sink.StreamSink`, the format the supervisor reads).

`truestack-attach` waits for the attacher to say stop or to go away (a read
that returns: the attacher killed is seen at once), without the GIL; the
process may exit first (atexit: the profile covers the run up to its exit).
Then the main thread, at its next eval-breaker check, stops the session and
ends the stream (or this thread does, when the main thread is blocked in C),
and the thread ends; the attacher waits for that before
it returns. The sampler is then stopped the way `record` leaves it at exit: no
timer armed, its control thread joined, no `truestack-*` thread left, and
`threading.Thread` unwrapped. The SIGPROF and SIGSEGV handlers stay installed
but inert (they chain to whatever was there before), as does the code-object
hook: a later attach reuses them.

Nothing here writes to the program's stdout or stderr, touches its signal
handlers (Python's), or changes how it exits.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from types import ModuleType

from ..records import Record
from ..samples import Frame
from ..session import active_sessions
from .sink import socket_session

HELLO_MAGIC = b"TSATTACH1 "
STOP = b"stop\n"
THREAD_NAME = "truestack-attach"
_SERVER_END_S = 1.0  # the longest the main thread waits for truestack-attach to end after the stop

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


def _without_own_work(frames: tuple[Frame, ...]) -> tuple[Frame, ...] | None:
    """Samples taken while `start` or the exit's finish ran in the program's main thread, on top of
    its frames, are truestack's attaching, not the program's: left out. (truestack's hooks the
    program calls, such as `--async`'s task hook, stay in, as in `record`.)"""
    return None if any(frame.file == _THIS_FILE for frame in frames) else frames


_THIS_FILE = _without_own_work.__code__.co_filename  # as the sampler names this module's frames


def encode_hello(fields: dict[str, object]) -> bytes:
    return HELLO_MAGIC + json.dumps(fields, separators=(",", ":")).encode() + b"\n"


class _Attached:
    def __init__(self, config: AttachConfig, sock: socket.socket) -> None:
        self.session, self._sink = socket_session(config, sock, list(sys.orig_argv), _without_own_work)
        self.session.profile.meta.include_idle = config.include_idle
        self.sock = sock
        self._done = False
        self._finish_lock = threading.Lock()

    def start(self) -> None:
        self.session.start()

    def stream(self, server_tid: int) -> None:
        """Say yes to the attacher, then send the profile as it grows. `server_tid`: the thread that
        waits for the attacher's stop (the attacher waits for it to end before it returns)."""
        hello = {"pid": os.getpid(), "command": self.session.profile.meta.command, "server_tid": server_tid}
        try:
            self.sock.sendall(encode_hello(hello))
            self._sink.started(self.session)
        except BaseException:
            self.finish()
            raise

    def finish(self, why: str | None = None, wait: bool = True) -> bool:
        """Stop sampling and end the stream, once. With `wait` False, return False at once when a
        finish is under way: perhaps in this very thread (the main thread runs the stop's pending
        call at an eval-breaker check, which can come inside the exit's finish), and it completes."""
        if not self._finish_lock.acquire(blocking=wait):
            return False
        try:
            if self._done:
                return True
            self._done = True
            if why:
                self.session.profile.note_interrupted(why)
            profile = self.session.stop()
            with contextlib.suppress(Exception):  # the attacher went away: nothing to tell the program
                self._sink.finished(profile)
        finally:
            self._finish_lock.release()
        return True

    def forget(self) -> None:
        """In a forked child: the stream is the parent's. Close this process's copy of the
        connection (no shutdown: the parent's stays open) and never write to it."""
        self._done = True
        self._sink.forget()
        with contextlib.suppress(OSError):
            self.sock.close()


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
    """Called by the injected line, with the GIL: by the main thread at an eval-breaker check (the
    agent's pending call), or by the agent's own thread when the main thread is blocked in C.

    In the main thread everything up to the hello happens here, before returning: a busy program's
    main thread holds the GIL, and a thread of ours would wait for it at every release of it (each
    import's file reads, each socket call), seconds in all when the program releases it often. Only
    the wait for the attacher's stop is left to `truestack-attach`."""
    config = AttachConfig.decode(config_text)
    if threading.get_ident() != threading.main_thread().ident:
        threading.Thread(target=_open_and_serve, args=(config,), name=THREAD_NAME, daemon=True).start()
        return
    # The threads started here (the collector, truestack-attach) take none of the program's signals.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        _open(config, _start_serving)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _start_serving(attached: _Attached) -> int:
    thread = threading.Thread(target=_serve, args=(attached,), name=THREAD_NAME, daemon=True)
    thread.start()
    return thread.native_id or 0


def _open_and_serve(config: AttachConfig) -> None:
    attached = _open(config, lambda _: threading.get_native_id())
    if attached is not None:
        _serve(attached)


def _open(config: AttachConfig, start_serving: Callable[[_Attached], int]) -> _Attached | None:
    """Connect, start sampling and say hello, naming the thread that serves the attacher (started by
    `start_serving`, which returns its native id); None when the attacher is gone or was told no."""
    global _current
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(config.socket_path)
    except OSError:
        sock.close()
        return None  # the attacher is gone already
    with _lock:
        problem = _busy()
        if problem is None:
            try:
                # Published before sampling starts: a fork the program makes once it sees the sampler
                # running (this may run in the agent's own thread) must find it to forget.
                _current = _Attached(config, sock)
                _current.start()
            except Exception as exc:  # no engine, or it cannot start: the attacher says why
                _current = None
                problem = f"sampling cannot start: {exc}"
    if problem is not None:
        with contextlib.suppress(OSError):
            sock.sendall(encode_hello({"pid": os.getpid(), "error": problem}))
        sock.close()
        return None
    attached = _current
    assert attached is not None
    atexit.register(_finish_at_exit)
    try:
        attached.stream(start_serving(attached))
    except OSError:  # the attacher went away: stop again at once
        _end(attached)
        return None
    return attached


def _serve(attached: _Attached) -> None:
    native = _native_module()
    if native is None:
        _wait_for_stop(attached.sock)
    else:
        # The main thread ends the session at its next eval-breaker check: this thread may wait
        # seconds for the GIL in a busy program (see _csrc/main_call.c), past the attacher's wait.
        server = threading.current_thread()
        native.call_in_main_after(attached.sock.fileno(), STOP, lambda: _end_in_main_thread(attached, server))
    _end(attached)  # after the main thread's (which it waits for), or instead of it: the main thread is in C


def _end_in_main_thread(attached: _Attached, server: threading.Thread) -> None:
    """The stop's pending call. It never waits for a finish under way, which may be its own caller.

    Then it waits for `server` to end, the GIL released: that thread waits for the GIL to return and
    end, and a main thread releasing it often takes it back first each time (see _csrc/main_call.c):
    the attacher, which waits for that end, waited 2-10 s after a 1 s attach to such a loop."""
    if attached.finish(wait=False):
        _end(attached)
        server.join(_SERVER_END_S)


def _native_module() -> ModuleType | None:
    try:
        from .. import _native
    except ImportError:  # no compiled extension here: the pure-Python engine samples
        return None
    return _native


def _end(attached: _Attached) -> None:
    global _current
    try:
        attached.finish()
    finally:
        atexit.unregister(_finish_at_exit)
        with _lock:
            if _current is attached:
                _current = None
        attached.sock.close()


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
