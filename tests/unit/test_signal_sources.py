"""remote/signal_sources.py: what /proc shows of a process's SIGPROF senders, on real processes."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from truestack.remote.signal_sources import OTHER_SAMPLER, TRUESTACK_SAMPLES, sigprof_sender

# A POSIX timer on the process's CPU clock that sends SIGPROF, as a sampler written that way arms one.
POSIX_TIMER = """
import ctypes, signal
libc = ctypes.CDLL(None, use_errno=True)
class SigEvent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("pad", ctypes.c_char * 48)]
class TimerSpec(ctypes.Structure):
    _fields_ = [("interval", ctypes.c_long * 2), ("value", ctypes.c_long * 2)]
timer = ctypes.c_void_p()
event = SigEvent(None, int(signal.SIGPROF), 0)  # SIGEV_SIGNAL
assert libc.timer_create(2, ctypes.byref(event), ctypes.byref(timer)) == 0, ctypes.get_errno()  # CPUTIME
spec = TimerSpec((0, 10_000_000), (0, 10_000_000))
assert libc.timer_settime(timer, 0, ctypes.byref(spec), None) == 0
"""

SCRIPTS = {
    "plain": "",
    "handler only": "import signal; signal.signal(signal.SIGPROF, lambda *a: None)",
    "handler and timer": "import signal; signal.signal(signal.SIGPROF, lambda *a: None)\n" + POSIX_TIMER,
    "truestack sampling": "import truestack; truestack.start()",
    "truestack stopped": "import truestack; truestack.start(); truestack.stop()",
}
EXPECTED = {
    "plain": None,
    "handler only": None,  # a handler nothing arms: attaching is safe
    "handler and timer": OTHER_SAMPLER,
    "truestack sampling": TRUESTACK_SAMPLES,
    "truestack stopped": None,  # the handler stays installed; the control thread has ended
}


@pytest.mark.parametrize("case", list(SCRIPTS))
def test_sigprof_sender_of_a_real_process(case):
    body = SCRIPTS[case] + "\nimport sys, time\nprint('ready', flush=True)\nsys.stdin.read()\n"
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(body)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout.readline() == "ready\n"
        assert sigprof_sender(proc.pid) == EXPECTED[case]
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_no_such_process_shows_no_sender():
    assert sigprof_sender(2**22 + 12345) is None
