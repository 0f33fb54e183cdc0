"""_native.call_in_main_after (_csrc/main_call.c): a thread waits on a socket without the GIL, then
the main thread runs the call at its next eval-breaker check, in a program that keeps the GIL."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import truestack_env
from hang_report import run_reporting_hangs

PROGRAM = """
import json, os, socket, sys, threading, time
from truestack import _native
kind = sys.argv[1]
ran_in = []
def call():
    ran_in.append(threading.current_thread().name)
    if kind == "error":
        raise ValueError("ours, not the program's")
    if kind == "interrupt":
        raise KeyboardInterrupt  # as the program's SIGINT handler would, while the call runs
ours, theirs = socket.socketpair()
handed = []
waiter = threading.Thread(target=lambda: handed.append(_native.call_in_main_after(ours.fileno(), b"stop\\n", call)),
                          name="waiter")
waiter.start()
time.sleep(0.2)
theirs.sendall(b"something else first\\n")
if kind == "closed":
    theirs.close()  # no marker: the connection's end ends the wait
else:
    theirs.sendall(b"stop\\n")
outcome, end = "ran on", time.monotonic() + 10
try:
    # The main thread keeps the GIL: it lets go at each stat() and takes it straight back.
    while not ran_in and time.monotonic() < end:
        sum(range(10000))
        os.path.exists("/nonexistent")
    for _ in range(1000):  # the pending call's exception, if any, lands within these
        sum(range(100))
except KeyboardInterrupt:
    outcome = "interrupted"
latency = 10 - (end - time.monotonic())
waiter.join()
print(json.dumps({"ran_in": ran_in, "handed": handed, "outcome": outcome, "latency": latency}))
"""


def run(kind: str) -> dict:
    done = run_reporting_hangs([sys.executable, "-c", textwrap.dedent(PROGRAM), kind], 60, env=truestack_env())
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_main_thread_runs_the_call_soon_after_the_marker_even_while_it_keeps_the_gil():
    out = run("plain")
    assert out["ran_in"] == ["MainThread"] and out["handed"] == [True], out
    assert out["outcome"] == "ran on", out
    # A thread waiting for the GIL here waited seconds (the attach's stop: 9-12 s).
    assert out["latency"] < 2.0, out


def test_the_calls_own_error_is_dropped_and_the_program_runs_on():
    out = run("error")
    assert out["ran_in"] == ["MainThread"] and out["outcome"] == "ran on", out


def test_a_keyboard_interrupt_during_the_call_reaches_the_program():
    out = run("interrupt")
    assert out["ran_in"] == ["MainThread"] and out["outcome"] == "interrupted", out


def test_the_end_of_the_connection_also_ends_the_wait():
    out = run("closed")
    assert out["ran_in"] == ["MainThread"] and out["handed"] == [True], out


def test_bad_arguments_are_a_type_error():
    check = "from truestack import _native\ntry:\n    _native.call_in_main_after(0, b'', print)\nexcept TypeError as e:\n    print('TypeError', e)"
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=truestack_env(), timeout=60)
    assert done.stdout.startswith("TypeError call_in_main_after(fd, marker, call)"), (done.stdout, done.stderr)
