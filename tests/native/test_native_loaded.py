"""Wall mode on a loaded machine must not count the same time twice.

A signal sent while a thread runs waits for the thread to be scheduled
again; meanwhile the control thread walks it remotely (it is not running)
and accounts its time. The late signal then stands for nothing: recording
it with a full interval's weight inflated whatever ran next (measured
before the fix: +6 points of running share for busy asyncio tasks at load 5
on 2 CPUs, and the main thread's samples weighing more than its lifetime).
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from _runner import run_workload

pytestmark = pytest.mark.native


@pytest.fixture
def cpu_hogs():
    n = (os.cpu_count() or 1) + 1
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    yield n
    for p in hogs:
        p.kill()
        p.wait()


def test_weights_of_a_descheduled_thread_add_up_to_its_wall_time(cpu_hogs):
    r = run_workload("wl_loaded_wall.py", 1000, 3)
    assert r["samples"] > 300, r
    assert r["remote"] > 0, r  # the thread was found descheduled and walked from outside
    # Each sample weighs the time since the previous one: together, the window (one interval of slack).
    assert abs(r["ratio"] - 1) <= 0.03, r
