"""Wall mode on a CPU-starved machine: the main thread alternates spinning
and sleeping while the test runs more busy processes than there are CPUs,
so the thread is often descheduled with a signal pending. Reports the wall
time the main thread's samples weigh inside the measured window against the
window's length (each sample weighs the time since the thread's previous one).

usage: wl_loaded_wall.py RATE SECONDS
"""
import sys
import time

from wl_common import Collector, emit

rate, seconds = float(sys.argv[1]), float(sys.argv[2])


def spin(ms):
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


with Collector("wall", rate) as c:
    time.sleep(0.2)  # the first ticks settle
    t0 = time.monotonic_ns()
    while time.monotonic_ns() - t0 < seconds * 1e9:
        spin(4)
        time.sleep(0.001)
    t1 = time.monotonic_ns()
    time.sleep(0.1)

import threading  # noqa: E402  (the main thread's id, once sampling is over)

main = threading.main_thread().native_id
inside = [s for s in c.samples if s.thread_id == main and t0 < s.time_ns <= t1]
weighed = sum(s.weight_ns for s in inside)
stats = c.engine.stats()
emit({"samples": len(inside), "window_ns": t1 - t0, "weighed_ns": weighed, "ratio": weighed / (t1 - t0),
      "stale": stats.extra["stale_signals"], "remote": stats.extra["remote_samples"],
      "stats": {"timer": stats.timer, "achieved_rate_hz": stats.achieved_rate_hz, "samples": stats.samples,
                "dropped": stats.dropped, "partial": stats.partial, "extra": {}}})
