"""`truestack record`'s two processes: the program's, forked first, and this
one, which supervises it (`supervisor.py`) and writes the profile.

Forked, not started as a new interpreter: the program's process skips a
second interpreter start-up, and each process then imports only what it
needs (the child the sampler, this one the stream reader and the exporters),
both at once. Everything loaded before the fork is frozen out of the
garbage collector's sight, so the child neither traverses those objects nor
copies their pages on write.
"""

from __future__ import annotations

import gc
import os
import signal
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import NoReturn

    from .live import LiveView
    from .plan import Plan

# Sent to the recorder by another process, these are passed on to the program (see supervisor.py).
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def run_recording(plan: Plan, live: LiveView | None = None) -> NoReturn:
    """Run the plan's program in a child process, write its profile, and exit with the program's status.

    `live` (`truestack top`) watches the profile as it grows (see `supervisor.supervise`).

    This process ends with `os._exit` once its output is flushed: it ran no user
    code, and an interpreter's orderly finalisation would only add to the run's time.
    """
    from .plan import check_native  # already imported by the CLI that built the plan

    check_native(plan.native, plan.engine)  # a one-line UsageError before anything runs
    from ..engines import warm_cpu_timers

    timers_warmed = warm_cpu_timers(plan.engine, plan.mode)  # meanwhile, on the other core
    import truestack.model.stream  # noqa: F401  # both processes need the model: import it once, before the fork

    tree = None
    if plan.subprocesses:  # the socket and the environment exist before the program can start a child
        from .tree import ProcessTree

        tree = ProcessTree(plan.mode, plan.rate_hz, plan.engine, plan.max_depth, plan.async_tasks, plan.native)
        tree.export_environment()
    read_fd, write_fd = os.pipe()
    timers_warmed()  # no helper thread at the fork
    sys.stdout.flush()  # nothing buffered here may be written twice
    sys.stderr.flush()
    gc.freeze()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        if live is not None:
            live.prepare_child()
        follow = None
        if tree is not None:
            follow = tree.config_text
            tree.close_in_program()
        from .child import run_forked

        run_forked(plan, write_fd, read_fd, follow)  # never returns
    os.close(write_fd)
    # Blocked at once: a signal meant for the recorder must not end it while it imports the rest.
    watched = [int(s) for s in FORWARDED_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    from .supervisor import supervise

    status = supervise(plan, Child(pid), read_fd, watched, live, tree)
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105  # contextlib is not loaded here otherwise (start-up time)
            stream.flush()
        except (OSError, ValueError):  # a reader that went away (`truestack top | head`)
            pass
    os._exit(status & 0xFF)


class Child:
    """The forked program's process: what the supervisor asks of it (Popen's poll/kill/send_signal)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit status (negative: the signal that killed it), or None while it runs."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, signo: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signo)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
