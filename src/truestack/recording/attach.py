"""`truestack attach PID`'s side: get the sampler into a running process, read its stream, write the profile.

1. The target is checked as `dump` checks it (there, Python, 3.10–3.13) and
   for ptrace (`remote/attachable.py`); the truestack it will import is this
   one when it runs our Python version, else one installed for its interpreter.
2. A private directory (0700, owned by the target's user) holds a unix socket.
3. One line of Python is injected (`remote/inject.py`): it imports
   `recording.attached` from that truestack (taking the path entry off
   `sys.path` again) and starts it; it connects back, says yes or why not,
   then streams its profile (`model/stream.py`, as `record`'s child does).
4. Here the stream is read until `--duration` or Ctrl-C/SIGTERM (then the
   target is told to stop and its stream end awaited, at most
   `_STOP_GRACE_S`), or until the target exits (its stream ends at its atexit:
   the profile covers it up to the exit). The profile is written with
   `record`'s outputs (`supervisor.write_outputs`).

If this process is killed, the target reads the end of its connection and
stops sampling at once. The exit status is 0 once a profile was written,
1 when attaching failed (one line saying why) or the output could not be
written.
"""

from __future__ import annotations

import base64
import contextlib
import os
import select
import signal
import socket
import sys
import tempfile
import time

from ..errors import TruestackError
from ..model import Profile
from ..model.stream import ProfileStreamReader, StreamError
from .attached import HELLO_MAGIC, STOP, AttachConfig
from .plan import Plan

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..remote.inject import Injector
    from .live import LiveView

_CONNECT_TIMEOUT_S = 10.0  # injection returned: the target's thread connects within this
# After the stop, the profile's end must come within this. It can take seconds: the target's thread
# that ends it waits for the GIL, which a program releasing it often can keep from it (see the agent).
_STOP_GRACE_S = 10.0
_THREAD_END_S = 10.0
_POLL_S = 0.05
_MAX_HELLO = 1 << 16
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

# Runs in the target (compiled there from base64: one ASCII line every injector carries). Its own globals,
# not __main__'s; an error goes back over the socket, never to the program's stderr.
_BOOTSTRAP = """\
import sys
_path, _config, _socket = {path!r}, {config!r}, {socket!r}
sys.path.insert(0, _path)
try:
    try:
        import truestack.recording.attached as _attached
    finally:
        try:
            sys.path.remove(_path)
        except ValueError:
            pass
    _attached.start(_config)
except BaseException as _exc:
    import json, socket
    try:
        with socket.socket(socket.AF_UNIX) as _s:
            _s.connect(_socket)
            _text = "cannot load truestack from %s: %s: %s" % (_path, type(_exc).__name__, _exc)
            _s.sendall({magic!r} + json.dumps({{"error": _text}}).encode() + b"\\n")
    except OSError:
        pass
"""


class AttachError(TruestackError):
    """Attaching failed; the message is one line."""


def injected_line(path: str, config: AttachConfig) -> str:
    source = _BOOTSTRAP.format(path=path, config=config.encode(), socket=config.socket_path, magic=HELLO_MAGIC)
    encoded = base64.b64encode(source.encode()).decode("ascii")
    return f"exec(__import__('base64').b64decode('{encoded}'), {{}})"


def prepare(pid: int) -> tuple[str, tuple[int, int]]:
    """The truestack path the target imports, and its Python version; AttachError saying why not."""
    from ..remote.attachable import check_ptrace, find_python, truestack_path
    from ..remote.process import RemoteError

    try:
        check_ptrace(pid)
        target = find_python(pid)
        return truestack_path(target), target.version
    except RemoteError as exc:
        raise AttachError(str(exc)) from None


def run_attach(plan: Plan, pid: int, live: LiveView | None = None) -> int:
    """Attach to `pid`, record until the plan's duration, Ctrl-C or the target's exit; write the profile."""
    from ..remote.inject import InjectionError, choose
    from .plan import check_native

    check_native(plan.native, plan.engine)  # a one-line UsageError before the process is touched
    # Taken as soon as the command runs: Ctrl-C must not cut a ptrace injection short (the process
    # would be left stopped or half-changed); asked before sampling starts, the recording stops at once.
    asked: list[int] = []
    watched = [s for s in _STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]  # nohup'd: stays so
    previous = {s: signal.signal(s, lambda signo, frame: asked.append(signo)) for s in watched}
    try:
        try:
            path, version = prepare(pid)
            injector = choose(version)
        except (AttachError, InjectionError) as exc:
            return _fail(str(exc))
        if asked:
            return _fail("interrupted before attaching")
        directory = tempfile.mkdtemp(prefix="truestack-attach-")
        try:
            return _attach(plan, pid, path, injector, directory, live, asked)
        except (AttachError, InjectionError) as exc:
            return _fail(str(exc))
        finally:
            with contextlib.suppress(OSError):
                for name in os.listdir(directory):
                    os.unlink(os.path.join(directory, name))
                os.rmdir(directory)
    finally:
        for signo, handler in previous.items():
            signal.signal(signo, handler)


def _fail(message: str) -> int:
    sys.stderr.write(f"truestack: error: {message}\n")
    return 1


def _attach(
    plan: Plan, pid: int, path: str, injector: Injector, directory: str, live: LiveView | None, asked: list[int]
) -> int:
    from .supervisor import write_outputs

    socket_path = os.path.join(directory, "attach.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with listener:
        listener.bind(socket_path)
        listener.listen(1)
        _give_to_target_user(pid, directory, socket_path)
        config = AttachConfig(
            socket_path,
            plan.mode,
            plan.rate_hz,
            plan.engine,
            plan.max_depth,
            plan.include_idle,
            plan.async_tasks,
            plan.native,
        )
        injector.run(pid, injected_line(path, config))
        conn = _accept(listener, pid)
        try:
            command, server_tid, first = _read_hello(conn, pid, listener)
        except BaseException:
            conn.close()
            raise
    with conn:
        profile = _Session(plan, pid, conn, live, asked).run(first)
    _wait_for_thread_end(pid, server_tid)
    if not profile.meta.command:
        profile.meta.command = command
    return 1 if write_outputs(plan, profile) else 0


def _give_to_target_user(pid: int, directory: str, socket_path: str) -> None:
    """Root attaching to another user's process: that user must be able to reach the socket."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        raise AttachError(f"no such process: {pid} (it ended)") from None
    if os.geteuid() == 0 and uid != 0:
        os.chown(directory, uid, -1)
        os.chown(socket_path, uid, -1)


def _accept(listener: socket.socket, pid: int) -> socket.socket:
    deadline = time.monotonic() + _CONNECT_TIMEOUT_S
    while True:
        ready, _, _ = select.select([listener], [], [], 0.1)
        if ready:
            conn, _ = listener.accept()
            return conn
        if _ended(pid):
            raise AttachError(f"process {pid} ended before sampling started")
        if time.monotonic() > deadline:
            raise AttachError(
                f"process {pid} did not answer within {_CONNECT_TIMEOUT_S:g} s of the injection (is it stuck "
                "holding the GIL, or was its Python started without threads?)"
            )


def _ended(pid: int) -> bool:
    """Gone, or a zombie its parent has not reaped yet (a target that crashed still has its /proc entry:
    the attacher waited the whole 10 s for it and blamed the GIL)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] in (b"Z", b"X")


def _wait_for_thread_end(pid: int, tid: int) -> None:
    """Return once the target's thread serving us has ended (at most _THREAD_END_S): when `attach`
    returns, nothing of truestack runs in the target. It ends soon after the stream, once it has the
    GIL back, which a program releasing it often can keep from it for a while."""
    deadline = time.monotonic() + _THREAD_END_S
    while tid and os.path.exists(f"/proc/{pid}/task/{tid}") and time.monotonic() < deadline:
        time.sleep(0.005)


def _read_hello(conn: socket.socket, pid: int, listener: socket.socket) -> tuple[list[str], int, bytes]:
    """The target's command line, the id of its thread serving us, and the stream bytes that came
    with its hello; AttachError if it said no."""
    import json

    buffer = b""
    conn.settimeout(_CONNECT_TIMEOUT_S)
    try:
        while b"\n" not in buffer:
            data = conn.recv(4096)
            if not data or len(buffer) > _MAX_HELLO:
                said = _error_said_on_another_connection(listener, pid)
                raise AttachError(said or f"process {pid} closed the connection before sampling started")
            buffer += data
    except TimeoutError:
        raise AttachError(f"process {pid} did not start sampling within {_CONNECT_TIMEOUT_S:g} s") from None
    finally:
        conn.settimeout(None)
    line, rest = buffer.split(b"\n", 1)
    if not line.startswith(HELLO_MAGIC):
        raise AttachError(f"process {pid} answered something that is not truestack's")
    hello = json.loads(line[len(HELLO_MAGIC) :])
    if "error" in hello:
        raise AttachError(f"cannot attach to process {pid}: {hello['error']}")
    return [str(word) for word in hello.get("command", [])], int(hello.get("server_tid", 0)), rest


def _error_said_on_another_connection(listener: socket.socket, pid: int) -> str | None:
    """What the injected line said on a fresh connection when `attached.start` raised after its own
    connection was made (_BOOTSTRAP): without it the attacher knows only that the first one closed."""
    import json

    ready, _, _ = select.select([listener], [], [], 2.0)
    if not ready:
        return None
    other, _ = listener.accept()
    with other:
        other.settimeout(2.0)
        try:
            line = other.recv(_MAX_HELLO).split(b"\n", 1)[0]
        except OSError:
            return None
    if not line.startswith(HELLO_MAGIC):
        return None
    try:
        error = json.loads(line[len(HELLO_MAGIC) :]).get("error")
    except ValueError:
        return None
    return f"cannot attach to process {pid}: {error}" if error else None


class _Session:
    """Reads the attached process's stream; stops it on --duration, Ctrl-C, SIGTERM or the live view's quit."""

    def __init__(self, plan: Plan, pid: int, conn: socket.socket, live: LiveView | None, asked: list[int]) -> None:
        self.plan, self.pid, self.conn, self.live = plan, pid, conn, live
        self.asked = asked  # SIGINT/SIGTERM taken (run_attach's handlers)
        self.reader = ProfileStreamReader()
        self.damaged: str | None = None
        self.stop_sent_at: float | None = None
        self.closed = False  # by the other end, before its stream ended

    def run(self, first: bytes) -> Profile:
        self._feed(first)
        started = time.monotonic()
        if self.live is not None:
            self.live.open(self.reader.profile, self.pid, started)
        try:
            self._loop(started)
        finally:
            if self.live is not None:
                self.live.close(time.monotonic())
                self.live.finish()
        profile = self.reader.profile
        if not self.reader.ended:
            gone = not os.path.exists(f"/proc/{self.pid}")
            lost = "its last drain interval (50-200 ms) may be missing"
            if self.damaged:
                lost = "the end of its stream was damaged"
            if gone:
                profile.note_interrupted(f"process {self.pid} ended while attached without finishing ({lost})")
            else:
                how = "it closed the connection" if self.closed else f"no end within {_STOP_GRACE_S:g} s of the stop"
                profile.note_interrupted(f"process {self.pid} did not finish its profile when asked ({how}; {lost})")
        return profile

    def _loop(self, started: float) -> None:
        fds: list[int] = [self.conn.fileno()]
        key_fd = self.live.fileno() if self.live is not None else None
        if key_fd is not None:
            fds.append(key_fd)
        while True:
            try:
                ready, _, _ = select.select(fds, [], [], _POLL_S)
            except InterruptedError:
                ready = []
            now = time.monotonic()
            if self.conn.fileno() in ready:
                data = self.conn.recv(1 << 20)
                if not data:
                    self.closed = True
                    return
                self._feed(data)
                if self.reader.ended:
                    return
            if self.stop_sent_at is None:
                timed_out = bool(self.plan.duration) and now - started >= (self.plan.duration or 0.0)
                if self.asked or timed_out or (self.live is not None and self._step_live(now)):
                    self._stop(now)
            elif now - self.stop_sent_at > _STOP_GRACE_S:
                return

    def _step_live(self, now: float) -> bool:
        assert self.live is not None
        try:
            return self.live.step(now)
        except Exception as exc:  # a bug in the view must not cost the profile
            self.live.close(now)
            sys.stderr.write(f"truestack: error: the live view failed ({type(exc).__name__}: {exc}); detaching\n")
            return True

    def _stop(self, now: float) -> None:
        self.stop_sent_at = now
        with contextlib.suppress(OSError):
            self.conn.sendall(STOP)

    def _feed(self, data: bytes) -> None:
        if self.damaged is None and data:
            try:
                self.reader.feed(data)
            except StreamError as exc:
                self.damaged = str(exc)
