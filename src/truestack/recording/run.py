"""Running a program under a profiling session and writing its profile.

`record` (and later `attach` and subprocess children) describe a run as a
`Plan` (`plan.py`); `run_in_process` runs it in the program's process (the child the
supervisor started) and hands the profile to a `ProfileSink`:

- `duration`: sampling stops after that many seconds, the profile and
  summary are written at once, then the program is stopped the way py-spy
  stops the command it launched — here with SIGINT to the main thread, so
  `finally` blocks and atexit handlers still run. Its other non-daemon
  threads are not waited for (the process exits once the main thread and
  atexit handlers are done), so a program whose threads never end still
  ends. Exit status 124 when that is how the program ended (as `timeout`
  says a command ran out of time); the program's own status when it ended
  before the duration.
- Ctrl-C, SIGTERM (when the program has no handler of its own) and an
  uncaught exception end the run early: the profile is still written, with
  `meta.interrupted` and a marker saying why. Exit status: 130 for Ctrl-C,
  143 for SIGTERM, 1 for an exception.
- If the output cannot be written (disk full, ...), the message says what
  was lost and a copy of the whole profile is saved as `.tsp` in the temp
  directory, to convert later with `truestack report` (`recording.output`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading

from ..api import mark
from ..engines import EngineUnavailable
from ..errors import UsageError
from ..light_typing import Protocol
from ..model import Profile
from ..session import ProfileSession
from ..target import run_target
from .exec_guard import guard_exec
from .plan import Plan
from .stacks import make_frame_stripper

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import NoReturn


class ProfileSink(Protocol):
    """Where a run's profile goes: told when the session exists, handed the profile at the end."""

    def started(self, session: ProfileSession) -> None: ...

    def finished(self, profile: Profile) -> bool:
        """Take the finished profile; False if it could not be kept."""
        ...


DURATION_STATUS = 124  # the program was stopped because --duration ran out


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is so the profile can still be written."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated()


def _default_sigterm_in_forked_child() -> None:
    """A fork of the program (a multiprocessing worker) dies of SIGTERM as it would without truestack."""
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


os.register_at_fork(after_in_child=_default_sigterm_in_forked_child)


class Recording:
    """One run: the session and its end (once, from whichever thread gets there first)."""

    def __init__(self, plan: Plan, sink: ProfileSink) -> None:
        self.plan = plan
        self._sink = sink
        command = [plan.target.name] if plan.target.kind == "script" else ["-m", plan.target.name]
        self.session = ProfileSession(
            mode=plan.mode,
            rate=plan.rate_hz,
            engine=plan.engine,
            max_depth=plan.max_depth,
            native=plan.native,
            command=[*command, *plan.target.args],
            stack_filter=make_frame_stripper(),
            async_tasks=plan.async_tasks,
        )
        self.session.profile.meta.include_idle = plan.include_idle
        self._lock = threading.Lock()
        self._finished = False
        self.delivered = True
        self.target_returned = False
        self.duration_hit = False
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        try:
            self.session.start()
        except EngineUnavailable as exc:
            raise UsageError(str(exc)) from None
        for note in self.session.sampler.fallback_notes:  # said before the program runs, not only at the end
            sys.stderr.write(f"truestack: WARNING: {note}; run `truestack check` for details\n")
        self._sink.started(self.session)
        if self.plan.duration:
            self._timer = threading.Timer(self.plan.duration, self._duration_up)
            self._timer.name = "truestack-duration"
            self._timer.daemon = True
            self._timer.start()

    def _duration_up(self) -> None:
        with self._lock:
            if self.target_returned:
                return
            self.duration_hit = True
        mark(f"--duration {self.plan.duration:g} s reached")
        self.finish()
        with self._lock:
            if not self.target_returned:
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # type: ignore[arg-type]

    def mark_returned(self) -> None:
        with self._lock:
            self.target_returned = True
        if self._timer is not None:
            self._timer.cancel()

    def finish(self, interrupted: str | None = None) -> None:
        with self._lock:
            if self._finished:
                return
            self._finished = True
            if interrupted:
                self.session.profile.note_interrupted(interrupted)
            self.delivered = self._sink.finished(self.session.stop())


def run_in_process(plan: Plan, sink: ProfileSink) -> int:
    """Run the plan's program in this process under sampling; hand the profile to `sink`.

    Returns the program's exit status (see the module docstring); 1 when
    the profile could not be delivered and the program itself succeeded.
    """
    recording = Recording(plan, sink)
    sigterm_installed = False
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
        sigterm_installed = True
    if plan.duration and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started in the background (SIGINT ignored): keep Ctrl-C ignored but let --duration stop the program.
        def _duration_sigint(signum: int, frame: object) -> None:
            if recording.duration_hit:
                raise KeyboardInterrupt

        signal.signal(signal.SIGINT, _duration_sigint)
    recording.start()
    restore_exec = guard_exec(recording.finish)
    try:
        status, exc = _run_program(recording)
    finally:
        restore_exec()
    if sigterm_installed and signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if recording.duration_hit and isinstance(exc, KeyboardInterrupt):
        status, exc = DURATION_STATUS, None  # we stopped it, as --duration asked
    reason = _interruption(exc)
    if isinstance(exc, _Terminated):
        status = 143
    for _attempt in range(2):  # a --duration SIGINT may land here instead of in the program
        try:
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # don't lose the profile to a 2nd Ctrl-C
            try:
                recording.finish(reason)
            finally:
                signal.signal(signal.SIGINT, previous)
            break
        except KeyboardInterrupt:
            if not recording.duration_hit:
                raise
    if not recording.delivered:
        status = status or 1
    if recording.duration_hit and _other_threads_alive():
        _exit_without_waiting_for_threads(status)
    return status


def _other_threads_alive() -> bool:
    main = threading.main_thread()
    return any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate())


def _exit_without_waiting_for_threads(status: int) -> NoReturn:
    """--duration stopped the program: run its atexit handlers, then end the process
    without the interpreter's wait for non-daemon threads (which may never end)."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def _run_program(recording: Recording) -> tuple[int, BaseException | None]:
    """Run the target, then wait for its non-daemon threads as the interpreter would."""
    try:
        try:
            status, exc = run_target(recording.plan.target)
            # The duration timer runs on while they do: it may stop them too.
            main = threading.main_thread()
            for thread in threading.enumerate():
                if recording.duration_hit:
                    break  # stopped by --duration: not waited for
                if thread is not main and not thread.daemon and thread.is_alive():
                    thread.join()
        finally:
            recording.mark_returned()
    except KeyboardInterrupt as interrupt:
        return 130, interrupt
    return status, exc


def _interruption(exc: BaseException | None) -> str | None:
    if exc is None:
        return None
    if isinstance(exc, _Terminated):
        return "SIGTERM"
    if isinstance(exc, KeyboardInterrupt):
        return "KeyboardInterrupt (Ctrl-C)"
    text = str(exc)
    if len(text) > 200:
        text = text[:197] + "..."
    return f"the program raised {type(exc).__name__}" + (f": {text}" if text else "")
