"""Issue 13: the drain resolves stacks through a C cache (one Python call per new
frame and per new stack, not per frame of every sample). Held to the stacks the
program recorded itself, across hits, misses, frames whose code died before the
drain, and the cache being emptied midway."""
from __future__ import annotations

import pytest
from _runner import run_workload


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_cached_stacks_are_the_stacks_that_ran(mode):
    r = run_workload("wl_stack_cache.py", mode, 1.5)
    counts = r["counts"]
    assert r["samples"] >= 300 and r["distinct_stacks"] >= 100, r
    assert r["churned"] >= 50, r  # frames of code objects that die right after running
    assert r["n_wrong"] == 0, r
    assert counts["hits"] >= 100 and counts["misses"] >= 100, r
    # A hit hands over the very tuple its stack's first sample got, and nothing else does.
    assert r["reused"] == counts["hits"], r


def test_native_samples_python_frames_come_from_the_cache_and_are_the_stacks_that_ran():
    # --native: the Python half of each sample is resolved through the same cache (shims kept
    # in place for the C frames), and each distinct merge with the C half made once.
    r = run_workload("wl_stack_cache.py", "cpu", 1.5, "native")
    counts = r["counts"]
    assert r["samples"] >= 300 and r["distinct_stacks"] >= 100, r
    # --native was on: every sample carried its C chain. Not every sample shows a C frame: with the
    # interpreter's plumbing hidden, a sample in pure Python code on 3.11+ has none left.
    assert r["unwound"] >= r["drained"] * 0.9 and r["with_c_frames"] >= 100, r
    assert r["churned"] >= 50, r
    assert r["n_wrong"] == 0, r
    assert counts["hits"] >= 100 and counts["misses"] >= 100, r
    # Samples whose Python and C halves both repeat get the very tuple made for the first of them.
    assert r["reused"] > 0, r


def test_the_last_drain_lets_go_of_the_cache():
    r = run_workload("wl_stack_cache.py", "cpu", 0.5)
    stacks, frames = r["counts_after_stop"][:2]
    assert (stacks, frames) == (0, 0), r
    assert r["refs_added"] == 0, r  # no code object stays pinned
