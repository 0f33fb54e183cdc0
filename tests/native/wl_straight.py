"""Straight-line big-int additions vs the same additions in a loop, 50/50 by CPU time.

usage: wl_straight.py MODE RATE SECONDS
"""
import sys
import time

from wl_common import Collector, emit, leaf_weights

N_ADDS = 200
src = ["def straight(a, b):", "    x = a"]
src += ["    x = x + b"] * N_ADDS
src += ["    return x"]
exec(compile("\n".join(src), "<straight>", "exec"))  # defines straight()
straight = globals()["straight"]  # named for the linter: exec defined it


def looped(a, b):
    x = a
    for _ in range(N_ADDS):
        x = x + b
    return x


def cost(fn, reps, clock=time.thread_time_ns):
    t0 = clock()
    for _ in range(reps):
        fn(A, B)
    return clock() - t0


A, B = 7 ** 3000, 3 ** 3000
mode, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
# Truth is CPU time in cpu mode and elapsed time in wall mode (they differ
# when the machine is busy and this process waits for a CPU).
clock = time.thread_time_ns if mode == "cpu" else time.perf_counter_ns
# Calibrate so each chunk of calls takes about the same CPU time.
cost(straight, 50), cost(looped, 50)
per_s = cost(straight, 200) / 200
per_l = cost(looped, 200) / 200
reps_s = max(1, int(2_000_000 / per_s))  # ~2 ms chunks
reps_l = max(1, int(reps_s * per_s / per_l))

truth = {"straight": 0, "looped": 0}
with Collector(mode, rate, inline=True) as c:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        truth["straight"] += cost(straight, reps_s, clock)
        truth["looped"] += cost(looped, reps_l, clock)
        c.poll()
w = leaf_weights(c.samples, {"straight", "looped"})
total_w = sum(w.values()) or 1
total_t = sum(truth.values())
lines = {s.frames[-1].line for s in c.samples if s.frames and s.frames[-1].name == "straight"}
emit({
    "truth_straight": truth["straight"] / total_t, "measured_straight": w["straight"] / total_w,
    "samples": len(c.samples), "straight_lines_hit": len(lines),
    "stats": c.engine.stats().as_dict(),
})
