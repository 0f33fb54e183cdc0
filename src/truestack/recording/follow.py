"""Sampling in every process of the recorded program's tree (`record --subprocesses`).

Runs in the followed processes, never in the recorder:

- A new interpreter (`multiprocessing` spawn and forkserver, `subprocess` of
  `sys.executable`, children of children) finds the recorder's config in its
  environment (`wire.ENV_VAR`) and this module's `follow_from_environment` is
  called by the `sitecustomize` the recorder put first on `PYTHONPATH`
  (`bootstrap.py`): it starts a session (same mode, rate, engine and depth as
  the program's) before the child's own code runs, and streams it to the
  recorder's socket.
- A fork (`multiprocessing` fork, forkserver's workers, `os.fork`) inherits
  a stopped sampler (`engines/native.py`) and its parent's stream: the
  at-fork hook here forgets the parent's stream without touching it and
  starts a new session with its own connection.
- The stream ends cleanly at the interpreter's exit (atexit) and at
  `os._exit` (wrapped, as coverage.py's `patch = _exit` does: multiprocessing's
  fork workers leave that way). A process killed by a signal loses at most
  its last drain interval (50 ms here, whatever the rate: `FOLLOWED_DRAIN_S`); the recorder
  keeps every record that arrived whole.

Nothing here writes to the process's stdout or stderr or changes its exit
status: a process that cannot be followed (no socket, no engine) simply runs
unprofiled.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import NoReturn

from ..own_files import is_own_file
from ..samples import Frame
from ..session import StackFilter
from .sink import socket_session
from .stacks import make_frame_stripper
from .wire import ENV_VAR, FollowConfig, encode_hello

# A followed process streams every 50 ms, whatever the rate: multiprocessing's Pool ends its workers
# with SIGTERM, so a child's last drain interval is lost routinely, not only when it crashes.
FOLLOWED_DRAIN_S = 0.05
_config: FollowConfig | None = None
_filter: StackFilter | None = None  # made before the program runs, while the launcher is `__main__`
_program_process = False  # the recorded program's own process (and its forks): argv is the program's
_current: _Followed | None = None
_parent_streams: list[Callable[[], None]] = []  # what a forked child must forget: its parent's streams
_hooks_installed = False


class _Followed:
    """This process's session, streaming to the recorder over its own connection."""

    def __init__(self, config: FollowConfig, how: str, stack_filter: StackFilter) -> None:
        start_cpu_ns = time.process_time_ns()  # a fork starts at 0; a new interpreter has started up
        # The recorder's argv is not the program's: its forks show the program's command line.
        command = [sys.executable, *sys.argv] if _program_process else list(sys.orig_argv)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # close-on-exec, as Python makes them
        try:
            self._sock.connect(config.socket_path)
            self._sock.sendall(encode_hello(os.getpid(), os.getppid(), command, how, start_cpu_ns))
            self._start(config, command, stack_filter)
        except BaseException:
            self._sock.close()
            raise

    def _start(self, config: FollowConfig, command: list[str], stack_filter: StackFilter) -> None:
        self.session, self._sink = socket_session(config, self._sock, command, stack_filter, FOLLOWED_DRAIN_S)
        self._done = False
        self.session.start()
        self._sink.started(self.session)

    def finish(self) -> None:
        """End the stream cleanly (at the interpreter's exit)."""
        if self._done:
            return
        self._done = True
        self._sink.finished(self.session.stop())
        self._sock.close()

    def forget(self) -> None:
        """In a forked child: this is the parent's connection. Close this process's copy of it
        (the parent's stays open: no shutdown) and never write to it."""
        self._done = True
        self._sink.forget()
        self._sock.close()


def _child_filter() -> StackFilter:
    """The launcher cut off (a fork of the program has its frames), and truestack's own work
    (starting the sampler in sitecustomize) left out."""
    strip = make_frame_stripper()

    def keep(frames: tuple[Frame, ...]) -> tuple[Frame, ...] | None:
        kept = strip(frames)
        if kept is None or any(is_own_file(f.file) for f in kept):
            return None
        return kept

    return keep


def follow_from_environment() -> None:
    """A new interpreter's start (called by the bootstrap sitecustomize): follow it if the recorder asked."""
    global _config, _current, _filter
    text = os.environ.get(ENV_VAR)
    if not text or _current is not None:
        return
    try:
        config = FollowConfig.decode(text)
        stack_filter = _child_filter()
        _current = _Followed(config, "exec", stack_filter)
    except Exception:  # no recorder to stream to, no engine: the process runs unprofiled, as asked of it
        return
    _config, _filter = config, stack_filter
    _parent_streams.append(_current.forget)
    _install_hooks()


def follow_forks(config: FollowConfig, parent_stream: Callable[[], None]) -> None:
    """In the recorded program's process: follow its forks. `parent_stream` forgets this process's own
    stream (to the recorder's pipe) in a forked child."""
    global _config, _filter, _program_process
    _config, _filter, _program_process = config, _child_filter(), True
    _parent_streams.append(parent_stream)
    _install_hooks()


def _install_hooks() -> None:
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    # Hooks run in the order they were registered: the native engine's (the parent's sampler
    # stops in the child) must come before ours starts a new one.
    with contextlib.suppress(ImportError):
        from ..engines import native  # noqa: F401
    os.register_at_fork(after_in_child=_after_fork_in_child)
    atexit.register(_finish_at_exit)  # after the program's own handlers (atexit runs last-in first-out)
    os._exit = _exit_after_finishing  # as coverage.py's `patch = _exit` does


def _after_fork_in_child() -> None:
    global _current
    for forget in _parent_streams:
        forget()
    _parent_streams.clear()
    _current = None
    if _config is None or _filter is None:
        return
    try:
        _current = _Followed(_config, "fork", _filter)
    except Exception:  # the recorder is gone, or sampling cannot start: run unprofiled
        return
    _parent_streams.append(_current.forget)


def _finish_at_exit() -> None:
    if _current is not None:
        with contextlib.suppress(Exception):  # the recorder went away: nothing to tell the program
            _current.finish()


_os_exit = os._exit


def _exit_after_finishing(status: int) -> NoReturn:
    """`os._exit` in a followed process: end its stream first (multiprocessing's fork workers
    leave by os._exit, without atexit), then exit exactly as asked."""
    _finish_at_exit()
    _os_exit(status)
