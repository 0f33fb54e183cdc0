"""A long GIL-holding C call (sorted) must be attributed to its calling line.

usage: wl_sorted.py MODE RATE SECONDS
"""
import random
import sys
import time

from wl_common import Collector, emit

random.seed(1)
DATA = [random.random() for _ in range(200_000)]
SORT_LINE = 0


def busy(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def step(n, acc, clock):
    t0 = clock()
    r = sorted(DATA)  # the line under test
    t1 = clock()
    busy(n)
    t2 = clock()
    acc[0] += t1 - t0
    acc[1] += t2 - t0
    return r


SORT_LINE = step.__code__.co_firstlineno + 2
mode, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
t = time.thread_time_ns(); sorted(DATA); sort_ns = time.thread_time_ns() - t
t = time.thread_time_ns(); busy(100_000); busy_ns = (time.thread_time_ns() - t) / 100_000
n = int(sort_ns * 7 / 3 / busy_ns)  # sorting ~30 % of the step
acc = [0, 0]
# Truth is CPU time in cpu mode and elapsed time in wall mode.
clock = time.thread_time_ns if mode == "cpu" else time.perf_counter_ns
with Collector(mode, rate, inline=True) as c:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        step(n, acc, clock)
        c.poll()
in_step = [s for s in c.samples if any(f.name == "step" for f in s.frames)]
at_sort = sum(s.weight_ns for s in in_step if s.frames[-1].name == "step" and s.frames[-1].line == SORT_LINE)
total = sum(s.weight_ns for s in in_step) or 1
emit({"truth_sort": acc[0] / acc[1], "measured_sort": at_sort / total, "samples": len(in_step),
      "stats": c.engine.stats().as_dict()})
