"""Four threads doing CPU work in ratio 1:2:3:4; two start before profiling.

usage: wl_threads.py MODE RATE UNIT_SECONDS
"""
import sys
import threading
import time

from wl_common import Collector, emit

mode, rate, unit = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
go = threading.Event()
cpu = {}


def busy():
    s = 0
    for i in range(2000):
        s += i * i
    return s


def worker(k):
    go.wait()
    t0 = time.thread_time_ns()
    budget = k * unit * 1e9
    while time.thread_time_ns() - t0 < budget:
        busy()
    cpu[threading.current_thread().name] = time.thread_time_ns() - t0


threads = [threading.Thread(target=worker, args=(k,), name=f"w{k}") for k in (1, 2, 3, 4)]
for t in threads[:2]:
    t.start()  # started before profiling
with Collector(mode, rate) as c:
    for t in threads[2:]:
        t.start()
    time.sleep(0.1)
    go.set()
    for t in threads:
        t.join()
w = {t.name: 0 for t in threads}
for s in c.samples:
    if s.thread_name in w and any(f.name == "worker" for f in s.frames):
        w[s.thread_name] += s.weight_ns
tw, tc = sum(w.values()) or 1, sum(cpu.values())
emit({"truth": {k: v / tc for k, v in cpu.items()}, "measured": {k: v / tw for k, v in w.items()},
      "samples": len(c.samples), "stats": c.engine.stats().as_dict()})
