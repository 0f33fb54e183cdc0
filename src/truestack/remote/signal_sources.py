"""What sends SIGPROF to another process, read from /proc without stopping it.

The pyinjector route cannot attach safely to a process that receives
SIGPROF: its ptrace calls `dlopen` in the stopped thread, and a signal that
stops the thread meanwhile makes pyinjector give up and put the thread's
registers back, leaving `dlopen` half done with the loader's and malloc's
locks held. The thread then deadlocks on them (CI saw a recorded target hang
this way). So that route asks here first, and refuses.

What /proc shows:
- a truestack sampler (a recording, an attach, the API): its control thread,
  named `truestack-ctl` (`_csrc/control.c`), runs exactly as long as it samples;
- another sampler: a SIGPROF handler installed (`SigCgt`) and something armed
  to send it, a perf_event fd or a POSIX timer that signals SIGPROF. A
  setitimer(ITIMER_PROF) timer is not shown anywhere; pyinjector still says
  so when such a signal stops it.
"""

from __future__ import annotations

import os
import signal

CONTROL_THREAD_NAME = "truestack-ctl"  # TS_CONTROL_THREAD_NAME in _csrc/sampler_int.h

TRUESTACK_SAMPLES = "a truestack sampler is already running in it"  # also what the injected code says of one
OTHER_SAMPLER = (
    "it is already being sampled (it receives SIGPROF: a truestack recording or another profiler runs in it)"
)


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:  # gone, or not ours to read: nothing seen
        return ""


def _thread_names(pid: int) -> list[str]:
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    return [_read(f"/proc/{pid}/task/{tid}/comm").strip() for tid in tids]


def _catches_sigprof(pid: int) -> bool:
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (int(signal.SIGPROF) - 1) & 1)
    return False


def _perf_event_fds(pid: int) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[perf_event]":
                return True
        except OSError:  # closed meanwhile
            continue
    return False


def _sigprof_timers(pid: int) -> bool:
    # /proc/<pid>/timers: one block per POSIX timer, with "signal: <number>/<value>"
    wanted = f"signal: {int(signal.SIGPROF)}/"
    return any(line.startswith(wanted) for line in _read(f"/proc/{pid}/timers").splitlines())


def sigprof_sender(pid: int) -> str | None:
    """Why `pid` receives SIGPROF now (one of the two messages above), or None when /proc shows no sender."""
    if CONTROL_THREAD_NAME in _thread_names(pid):
        return TRUESTACK_SAMPLES
    if _catches_sigprof(pid) and (_perf_event_fds(pid) or _sigprof_timers(pid)):
        return OTHER_SAMPLER
    return None
