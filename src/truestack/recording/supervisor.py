"""`truestack record` as a small supervisor: the program runs in a child
process that streams its profile here, so the profile is written whatever
happens to the program.

The child is a fork of this process (`launch.py`: the same interpreter,
flags, stdin, stdout, stderr, terminal, process group and environment; see
`child.py` for what it undoes before the program runs). This module and the
exporters are imported only after the fork, while the program runs. What the
user sees of the program does not change:

- Ctrl-C at the terminal reaches the child directly (same process group);
  a SIGINT, SIGTERM, SIGHUP or SIGQUIT sent to the recorder's pid by another
  process is passed on to the child. A signal the terminal sent to the
  whole group is not passed on a second time.
- The exit status is the program's; when the program died of a signal, the
  recorder writes the profile and then dies of the same signal.
- Crash, `os._exit`, SIGKILL, OOM kill: the profile holds every sample the
  child streamed (at most one collector drain interval, 50-200 ms by the rate, is lost) and
  says how the program ended.
- `--subprocesses`: the program's Python children stream here too, each
  over its own connection (`tree.py`); the profile is written once the
  program has exited and its children are collected.
- SIGINT or SIGTERM end the recording within a second: when the program has
  not finished its profile by then (it handles the signal and goes on, or
  it is stuck), the recorder writes what it has, says so, and keeps
  waiting for the program; another SIGINT or SIGTERM then kills it.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

from ..model import Profile
from ..model.processes import ProcessInfo
from ..model.stream import ProfileStreamReader, StreamError
from .launch import Child
from .plan import Plan

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .live import LiveView
    from .tree import ProcessTree

_SI_USER = 0  # siginfo si_code of a signal sent by kill() (a terminal's is SI_KERNEL)
_POLL_S = 0.05
_STOP_GRACE_S = 1.0  # SIGINT/SIGTERM: the profile is written within this, finished or not
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# How a program ends when a live view's user quits: KeyboardInterrupt (130), the SIGINT itself, or the kill.
_STOPPED_BY_QUIT = (130, -signal.SIGINT, -signal.SIGKILL)


def supervise(
    plan: Plan,
    child: Child,
    read_fd: int,
    watched: list[int],
    live: LiveView | None = None,
    tree: ProcessTree | None = None,
) -> int:
    """Read the forked program's stream, pass signals on, write its profile; return its exit status.

    `watched` are the signals `launch` blocked at the fork, to be taken here with sigtimedwait.
    `live` (`truestack top`) is shown the profile as it grows; it is closed before the profile is
    written, and on the way out whatever happens. When its user quits, the program is stopped as
    by a SIGINT sent to the recorder, then killed if it has not finished its profile within a
    second; the exit status is then 0 if it ended by that stop.
    `tree` (--subprocesses) reads the streams of the program's child processes as well.
    """
    _import_writers(plan)  # here, while the program runs, not after it
    supervisor = _Supervisor(plan, child, read_fd, watched, live, tree)
    try:
        status = supervisor.run()
    finally:
        if live is not None:
            live.close(time.monotonic())
        os.close(read_fd)
        if child.poll() is None:
            child.kill()  # only when the recorder itself failed
        if live is not None:
            live.finish()
        if tree is not None:
            tree.remove()  # nothing left behind
        signal.pthread_sigmask(signal.SIG_UNBLOCK, watched)
    if supervisor.reader.records == 0:
        return _nothing_recorded(status)
    if supervisor.quit_at is not None and status in _STOPPED_BY_QUIT:
        return 1 if supervisor.write_error or supervisor.view_error else 0
    if status < 0:
        _die_like(-status)
    return (status or 1) if supervisor.write_error else status


class _Supervisor:
    """Reads the child's stream, passes signals on, and writes the profile once: when the
    child says it is complete (so `--duration` writes before the program is stopped),
    else when the child is gone."""

    def __init__(
        self,
        plan: Plan,
        child: Child,
        read_fd: int,
        watched: list[int],
        live: LiveView | None = None,
        tree: ProcessTree | None = None,
    ) -> None:
        self.plan, self.child, self.read_fd, self.watched = plan, child, read_fd, watched
        self.live, self.tree = live, tree
        self.quit_at: float | None = None  # the live view's user quit
        self.view_error: str | None = None  # the live view failed (and the program was stopped)
        self.reader = ProfileStreamReader()
        self.damaged: str | None = None
        self.written = False
        self.write_error: str | None = None
        self.stop_asked_at: float | None = None  # first SIGINT/SIGTERM
        # Readable when the child exits: the loop wakes for that as for data.
        self.exit_fd = os.pidfd_open(child.pid)

    def run(self) -> int:
        try:
            if self.live is not None:
                self.live.open(
                    self.reader.profile,
                    self.child.pid,
                    time.monotonic(),
                    self.tree.live_profiles if self.tree is not None else None,
                )
            return self._loop()
        finally:
            os.close(self.exit_fd)

    def _loop(self) -> int:
        eof = False
        while True:
            eof = self._wait(eof)
            self._take_signals()
            self._step_live()
            if self.reader.ended and not self.written and self.tree is None:
                self._write()  # with children, the profile is written once they are collected
            elif (
                self.stop_asked_at is not None
                and not self.written
                and time.monotonic() - self.stop_asked_at > _STOP_GRACE_S
            ):
                self.reader.profile.note_interrupted(
                    f"the program did not stop within {_STOP_GRACE_S:g} s of "
                    "SIGINT/SIGTERM; the profile covers the run up to then",
                )
                self._write()
                if self.quit_at is not None:
                    self.child.kill()  # the user quit and the program did not stop: it is not waited for
            status = self.child.poll()
            if status is not None:
                self._read_available()
                break
        if self.tree is not None:
            self.tree.collect()
        if not self.written and self.reader.records:
            if not self.reader.ended:
                damaged = self.damaged is not None or self.reader.pending_bytes > 0
                _note_how_it_ended(self.reader.profile, status, damaged)
            self._write()
        return status

    def _wait(self, eof: bool) -> bool:
        """Wait up to one poll interval for data or the child's exit; read what came. True at end of stream."""
        fds = [self.exit_fd] if eof else [self.read_fd, self.exit_fd]
        key_fd = self.live.fileno() if self.live is not None else None
        if key_fd is not None:
            fds.append(key_fd)
        if self.tree is not None:
            from .tree import readable  # loaded with the tree (launch.py): no import cost without it

            fds.extend(self.tree.fds())
            ready = readable(fds, _POLL_S)
            self.tree.handle(ready)
        else:
            ready, _, _ = select.select(fds, [], [], _POLL_S)
        if not eof and self.read_fd in ready:
            return self._read_once()
        if eof:  # no writer, yet the child lives: one that closed the pipe opens it again (pipe_out.py)
            self._read_available()
        return eof

    def _read_available(self) -> None:
        """Take what is in the pipe now, without waiting for more: when the child exited, for an end of
        stream that a forked grandchild holding the pipe could delay; after an end of stream, for the
        data of a writer that opened the pipe again, one poll interval at a time (the pipe reads
        as ready at its end, so it cannot be waited on)."""
        while select.select([self.read_fd], [], [], 0)[0]:
            if self._read_once():
                return

    def _read_once(self) -> bool:
        data = os.read(self.read_fd, 1 << 20)
        if not data:
            return True
        if self.damaged is None:
            try:
                self.reader.feed(data)
            except StreamError as exc:
                self.damaged = str(exc)  # keep what arrived before the damage
        return False

    def _step_live(self) -> None:
        if self.live is None:
            return
        now = time.monotonic()
        if self.reader.ended:
            self.live.close(now)  # sampling is over: the terminal is given back before the summary
            return
        try:
            quit = self.live.step(now)
        except Exception as exc:  # a bug in the view must not cost the profile: stop as on quit, write it
            self.live.close(now)
            self.view_error = f"{type(exc).__name__}: {exc}"
            sys.stderr.write(f"truestack: error: the live view failed ({self.view_error}); stopping the program\n")
            quit = True
        if quit and self.quit_at is None:
            self.quit_at = now
            if self.stop_asked_at is None:
                self.stop_asked_at = now
            self.child.send_signal(signal.SIGINT)

    def _write(self) -> None:
        if self.live is not None:
            self.live.close(time.monotonic())
        meta = self.reader.profile.meta
        if self.quit_at is not None and (meta.interrupted or "").startswith("KeyboardInterrupt"):
            why = "its live view failed" if self.view_error else "q"
            meta.interrupted = f"stopped from truestack top ({why}: SIGINT to the program)"
        self.written = True
        profile = self.reader.profile
        if self.tree is not None:
            command = [os.path.basename(sys.executable), *profile.meta.command]
            program = ProcessInfo(self.child.pid, command, os.getpid(), "main", self.reader.ended)
            profile = self.tree.merged(profile, program)
        self.write_error = write_outputs(self.plan, profile)

    def _take_signals(self) -> None:
        """Pass signals sent to the recorder on to the program; a terminal already sent them to it."""
        while self.watched:
            info = signal.sigtimedwait(self.watched, 0)
            if info is None:
                return
            alive = self.child.poll() is None
            if info.si_signo in _STOP_SIGNALS:
                if self.written and alive and not self.reader.ended:
                    self.child.kill()  # asked twice, and the program did not stop the first time
                    continue
                if self.stop_asked_at is None:
                    self.stop_asked_at = time.monotonic()
            if info.si_code == _SI_USER and alive:
                self.child.send_signal(info.si_signo)


def _nothing_recorded(status: int) -> int:
    """The program never ran under sampling: the child already said why, or it died at start."""
    if status < 0:
        sys.stderr.write(
            f"truestack: error: the program's process died of {_signal_name(-status)} before "
            "sampling started; no profile was written\n"
        )
        _die_like(-status)
    return status


def _note_how_it_ended(profile: Profile, status: int, damaged: bool) -> None:
    if status < 0:
        how = f"the program was killed by {_signal_name(-status)}"
    else:
        how = f"the program's process exited with status {status} without finishing (os._exit?)"
    lost = "; samples of its last drain interval (50-200 ms, by the rate) may be missing"
    if damaged:
        lost = "; the end of its profile stream was damaged and left out"
    profile.note_interrupted(how + lost)


def _signal_name(signo: int) -> str:
    try:
        return signal.Signals(signo).name
    except ValueError:
        return f"signal {signo}"


def _die_like(signo: int) -> None:
    """End this process by the signal that ended the program, so the shell sees the same."""
    sys.stdout.flush()
    sys.stderr.flush()
    if signo not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught, so need no reset
        signal.signal(signo, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signo])
    os.kill(os.getpid(), signo)


def _import_writers(plan: Plan) -> None:
    import importlib

    from .. import exporters
    from . import output  # noqa: F401

    if plan.output:
        importlib.import_module(f"{exporters.__name__}.{exporters.FORMATS[plan.fmt].module}")
    if not plan.quiet:
        importlib.import_module(f"{exporters.__name__}.summary")


def write_outputs(plan: Plan, profile: Profile) -> str | None:
    """Write the output the plan names and print the summary; returns the write error, if any."""
    from ..exporters.summary import render_summary
    from .output import PROCESS_ROOTED, export_and_write, output_view

    view = output_view(profile, plan.fmt, plan.function_level, plan.include_idle)
    # A .tsp keeps idle samples; the summary shows what other formats would, without process root frames.
    own_view = plan.fmt == "truestack" or (plan.fmt in PROCESS_ROOTED and bool(profile.meta.processes))
    shown = output_view(profile, "summary", plan.function_level, plan.include_idle) if own_view else view
    # No output (`top` without --output): the summary only.
    error = export_and_write(view, plan.fmt, plan.output) if plan.output else None
    if plan.quiet:
        return error
    # Absolute: unambiguous wherever the program or the user went meanwhile.
    outputs = [] if error or not plan.output else [f"{plan.output} ({plan.fmt})"]
    try:
        sys.stderr.write(render_summary(shown, top=plan.top, outputs=outputs))
    except Exception as exc:  # the profile is written; the summary is a courtesy
        sys.stderr.write(f"truestack: could not print the summary: {type(exc).__name__}: {exc}\n")
    return error
