"""Stress at 10 kHz over generators, asyncio, exceptions, 2000-deep recursion,
code churn, short-lived threads, faulthandler toggling, fork and exec churn
and (3.12+) sub-interpreters: no crash, no misattribution, few partial stacks.

Under TRUESTACK_SANITIZED=1 (scripts/sanitizer-check) the run is shorter; each
kind of churn must still have happened."""
from __future__ import annotations

import os
import sys

import pytest
from _runner import run_workload

SANITIZED = os.environ.get("TRUESTACK_SANITIZED") == "1"
# ASan runs the main loop ~5x slower: a shorter run does fewer rounds of code churn.
SECONDS, MIN_CHURNED, MIN_TAGGED = (6, 40, 10) if SANITIZED else (10, 100, 50)


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_stress(mode):
    r = run_workload("wl_stress.py", mode, 10000, SECONDS, timeout=240)
    assert r["errors"] == [], r["errors"]  # no helper failed, no child crashed
    # Every kind of churn ran, as often as the workload promises.
    assert r["threads_started"] >= 200, r
    assert r["faulthandler_toggles"] >= 20, r
    assert r["execs"] >= 3 and r["forks"] >= 3, r
    assert r["subinterpreters_supported"] == (sys.version_info >= (3, 12))
    if r["subinterpreters_supported"]:
        assert r["subinterps"] >= 10, r
    assert r["samples"] > 5000, r
    assert r["misattributed"] == 0, r["examples"]
    assert r["tagged"] > MIN_TAGGED, r  # churned code was actually sampled
    assert r["fork_statuses"] == [0], r  # the child neither crashed nor hung
    # ... except, under the sanitizer job only, a child stuck in ASan's own allocator (wl_stress.wait_child)
    print("children stuck in ASan's allocator", r["children_stuck_in_asan_allocator"])
    assert r["max_depth"] >= 2000, r
    assert r["churned"] >= MIN_CHURNED, r
    assert any(name.startswith("short-") or name.startswith("thread-") for name in r["threads"]), r
    # Checked last, so that a failure here says all of the above held.
    # Two reasons are not failed walks but samples the core declines to walk by
    # design, counted by reason: a thread running a sub-interpreter, and a
    # thread with no Python thread state (starting or ending). Every other
    # partial stack is a walk that failed or was caught mid-update: at most
    # 0.5 % of the samples, and never a wrong complete stack (misattributed).
    declined = sum(v for k, v in r["kinds"].items() if k in ("subinterpreter", "no_thread_state"))
    failed = r["partial"] - declined
    print("declined", declined / r["samples"], "failed walks", failed / r["samples"], r["kinds"])
    assert failed / r["samples"] <= 0.005, r["kinds"]
    # faulthandler's toggling (every 50 ms) almost never leaves a walk unguarded: the handler puts
    # our SIGSEGV handler back itself. When another thread's re-install outlasts the bounded wait,
    # the sample is declined (never walked unguarded) and counted: CI saw 1 in 40,170 once on 3.11.
    # Before the re-install, 14,000-19,000 of ~50,000 samples were.
    assert r["kinds"].get("unguarded", 0) <= max(3, r["samples"] // 10_000), r["kinds"]
