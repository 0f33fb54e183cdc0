"""A sleeping thread next to a busy one.

usage: wl_sleep.py MODE RATE SECONDS
"""
import sys
import threading
import time

from wl_common import Collector, emit

mode, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
stop = threading.Event()


def sleeper():
    while not stop.is_set():
        time.sleep(0.05)  # the sleep line


SLEEP_LINE = sleeper.__code__.co_firstlineno + 2


def busy():
    s = 0
    for i in range(2000):
        s += i
    return s


t = threading.Thread(target=sleeper, name="sleeper")
t.start()
with Collector(mode, rate) as c:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        busy()
    stop.set()
    t.join()
mine = [s for s in c.samples if s.thread_name == "sleeper"]
at_line = [s for s in mine if s.frames and s.frames[-1].name == "sleeper" and s.frames[-1].line == SLEEP_LINE]
main = [s for s in c.samples if s.thread_name == "MainThread"]
emit({"sleeper_samples": len(mine), "sleeper_weight_s": sum(s.weight_ns for s in at_line) / 1e9, "at_sleep_line": len(at_line),
      "idle_at_sleep_line": sum(1 for s in at_line if s.state == "idle"),
      "main_samples": len(main), "expected_ticks": seconds * rate,
      "stats": c.engine.stats().as_dict()})
