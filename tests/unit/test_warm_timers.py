"""`engines.warm_cpu_timers`: when `record` starts its perf warm-up thread, and that it never fails a run."""
from __future__ import annotations

import threading

import pytest

from truestack.engines import warm_cpu_timers


@pytest.mark.parametrize(
    "engine,mode,timer",
    [("auto", "wall", None), ("native", "wall", None), ("safepoint", "cpu", None), ("auto", "cpu", "posix")],
)
def test_no_helper_thread_where_no_perf_timer_will_be_armed(monkeypatch, engine, mode, timer):
    if timer is None:
        monkeypatch.delenv("TRUESTACK_TIMER", raising=False)
    else:
        monkeypatch.setenv("TRUESTACK_TIMER", timer)
    started = []
    monkeypatch.setattr(threading.Thread, "start", lambda self: started.append(self.name))
    warm_cpu_timers(engine, mode)()
    assert started == []


def test_a_thread_refused_by_the_system_costs_the_run_nothing(monkeypatch):
    monkeypatch.delenv("TRUESTACK_TIMER", raising=False)

    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    wait = warm_cpu_timers("auto", "cpu")
    assert wait() is None  # waiting for a thread that never started returns at once
