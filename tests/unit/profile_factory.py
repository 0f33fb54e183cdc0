"""Small, fully known profiles for the exporter tests.

`make_profile()` builds two threads with recursion, a native frame, an empty
stack, unicode and `;`/newline-bearing names, markers and the `interrupted`
note; `EXPECTED` records what went in so tests can check totals against it.
"""
from __future__ import annotations

from truestack.model import Marker, Profile
from truestack.samples import Frame, Sample

RATE_HZ = 100
INTERVAL_NS = 10_000_000
T0 = 5_000_000_000  # monotonic origin of the profile

MAIN = Frame("<module>", "/app/main.py", 3, 1)
RUN = Frame("run", "/app/main.py", 10, 8)
RUN_L12 = Frame("run", "/app/main.py", 12, 8)
FIB = Frame("fib", "/app/math_utils.py", 5, 4)
FIB_INNER = Frame("fib", "/app/math_utils.py", 6, 4)
UNI = Frame("Über.naïve_λ", "/app/ünï.py", 2, 1)
ODD = Frame("weird;name\nsplit", "/app/odd file.py", 7, 7)
NATIVE = Frame("time.sleep", "", 0, 0, kind="native")
WORKER = Frame("Worker.loop", "/app/worker.py", 20, 18)

# (thread id, thread name, frames root first, weight in intervals, cpu delta ns, state)
SAMPLES: list[tuple[int, str, tuple[Frame, ...], float, int, str]] = [
    (1, "MainThread", (MAIN, RUN), 1, 9_000_000, "running"),
    (1, "MainThread", (MAIN, RUN, FIB), 1, 10_000_000, "running"),
    (1, "MainThread", (MAIN, RUN, FIB, FIB_INNER), 2, 20_000_000, "running"),
    (1, "MainThread", (MAIN, RUN, FIB, FIB_INNER, FIB_INNER), 1, 10_000_000, "running"),
    (1, "MainThread", (MAIN, RUN_L12, UNI), 1, 10_000_000, "running"),
    (1, "MainThread", (MAIN, RUN_L12, ODD), 1, 10_000_000, "running"),
    (1, "MainThread", (MAIN, RUN, FIB), 0.2, 2_000_000, "running"),  # short: still counts once
    (1, "MainThread", (), 1, 0, "idle"),
    (2, "worker-ü", (WORKER,), 1, 10_000_000, "running"),
    (2, "worker-ü", (WORKER, NATIVE), 3, 0, "idle"),
    (2, "worker-ü", (WORKER, FIB), 1, 10_000_000, "running"),
    (2, "worker-ü", (WORKER, FIB, FIB_INNER), 1, 10_000_000, "running"),
]


def weighted(intervals: float) -> int:
    return max(1, round(intervals))


def make_profile(rate_hz: float | None = RATE_HZ, interrupted: str | None = "SIGINT") -> Profile:
    meta = {
        "start_time_unix_ns": 1_700_000_000_000_000_000,
        "start_monotonic_ns": T0,
        "engine": "native-cpu",
        "mode": "cpu",
        "command": ["app.py", "--fast"],
        "python_version": "3.12.1",
        "truestack_version": "0.1",
        "function_level": False,
        "interrupted": interrupted,
        "sampler_stats": {"samples": len(SAMPLES), "dropped": 2, "achieved_rate_hz": 97.5,
                          "partial": {"fault": 1, "depth_limit": 0}, "timer": "perf_event task-clock"},
    }
    if rate_hz is not None:
        meta["rate_hz"] = rate_hz
    profile = Profile(meta)
    clock = {1: T0, 2: T0 + 1_000_000}
    for tid, name, frames, intervals, cpu, state in SAMPLES:
        weight = int(intervals * INTERVAL_NS)
        clock[tid] += weight
        profile.add_sample(Sample(tid, name, clock[tid], weight, frames, cpu_delta_ns=cpu, state=state,
                                  depth=len(frames)))
    profile.add_marker(Marker("start ✓", T0 + 2_000_000, None, 1, {"step": 1}))
    profile.add_marker(Marker("phase;2", T0 + 5_000_000, T0 + 40_000_000, 1, {}))
    profile.add_marker(Marker("worker span", T0 + 3_000_000, T0 + 9_000_000, 2, {"n": 3}))
    return profile


def expected_total_count() -> int:
    return sum(weighted(s[3]) for s in SAMPLES)


def expected_total_weight_ns() -> int:
    return sum(int(s[3] * INTERVAL_NS) for s in SAMPLES)


def make_recursive_profile() -> Profile:
    """One thread, deep self-recursion: a→a→a→b, for the 'counted once' rules."""
    a = Frame("a", "/r.py", 2, 1)
    b = Frame("b", "/r.py", 9, 8)
    profile = Profile({"rate_hz": RATE_HZ, "start_monotonic_ns": 0, "mode": "cpu"})
    t = 0
    for frames, n in (((a, a, a, b), 3), ((a,), 2), ((a, a), 1), ((b,), 1)):
        for _ in range(n):
            t += INTERVAL_NS
            profile.add_sample(Sample(1, "MainThread", t, INTERVAL_NS, frames))
    return profile
