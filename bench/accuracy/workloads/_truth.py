"""Ground truth recorder shared by the accuracy workloads.

A workload calls its target functions through `Truth.call` (or measures a
chunk itself with `Truth.add`) inside `Truth.region()`. Per target we keep
CPU time (`time.thread_time_ns` of the thread that ran it) and wall time
(`time.perf_counter_ns`). Targets are scored *exclusive of nested targets*:
a sample goes to the leaf-most target on its stack, so a target that contains
another (a generator consumer) subtracts the nested one's time itself.

The region's "(other)" share is the region thread's time outside any target
(driver loop, event loop, measurement calls).

How long to run: ACCURACY_DURATION seconds (default 2.0), or exactly
ACCURACY_ROUNDS rounds when set (the overhead bench needs fixed work).
Where to write: ACCURACY_TRUTH env var, or `--truth PATH` on the command line.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from contextlib import contextmanager

REGION = "measured_region"

_cpu = time.thread_time_ns
_wall = time.perf_counter_ns


class Truth:
    def __init__(self, workload: str, description: str) -> None:
        self.workload = workload
        self.description = description
        self.targets: dict[str, dict[str, int | bool]] = {}
        self._lock = threading.Lock()
        self._region_thread: int | None = None
        self.region_cpu = 0
        self.region_wall = 0
        self.rounds = 0
        self.duration = float(os.environ.get("ACCURACY_DURATION", "2.0"))
        fixed = os.environ.get("ACCURACY_ROUNDS")
        self.fixed_rounds = int(fixed) if fixed else None

    def declare(self, *names: str) -> None:
        """Declare targets up front so a never-sampled one still scores."""
        for name in names:
            self.targets.setdefault(name, {"cpu_ns": 0, "wall_ns": 0, "calls": 0, "in_region_thread": True})

    def add(self, name: str, cpu_ns: int, wall_ns: int) -> None:
        in_region = threading.get_ident() == self._region_thread
        with self._lock:
            entry = self.targets.setdefault(name, {"cpu_ns": 0, "wall_ns": 0, "calls": 0,
                                                   "in_region_thread": in_region})
            entry["cpu_ns"] += cpu_ns
            entry["wall_ns"] += wall_ns
            entry["calls"] += 1
            entry["in_region_thread"] = in_region

    def call(self, fn, *args):
        # Wall clock innermost: thread_time_ns is a real syscall, and on a
        # loaded machine the kernel often preempts at its return; that wait
        # happens outside fn and must not be booked to it.
        c0 = _cpu()
        w0 = _wall()
        result = fn(*args)
        w1 = _wall()
        self.add(fn.__name__, _cpu() - c0, w1 - w0)
        return result

    def rounds_iter(self):
        """Yield round numbers until the duration elapsed (or fixed rounds done)."""
        deadline = _wall() + int(self.duration * 1e9)
        n = 0
        while (n < self.fixed_rounds) if self.fixed_rounds is not None else (n == 0 or _wall() < deadline):
            yield n
            n += 1
        self.rounds = n

    @contextmanager
    def region(self):
        self._region_thread = threading.get_ident()
        c0, w0 = _cpu(), _wall()
        try:
            yield self
        finally:
            self.region_cpu = _cpu() - c0
            self.region_wall = _wall() - w0

    def write(self) -> None:
        path = os.environ.get("ACCURACY_TRUTH")
        if "--truth" in sys.argv:
            path = sys.argv[sys.argv.index("--truth") + 1]
        in_region = [t for t in self.targets.values() if t["in_region_thread"]]
        other_cpu = max(0, self.region_cpu - sum(int(t["cpu_ns"]) for t in in_region))
        other_wall = max(0, self.region_wall - sum(int(t["wall_ns"]) for t in in_region))
        doc = {
            "workload": self.workload,
            "description": self.description,
            "region": REGION,
            "rounds": self.rounds,
            "region_ns": {"cpu": self.region_cpu, "wall": self.region_wall},
            "other_ns": {"cpu": other_cpu, "wall": other_wall},
            "targets": {name: {"cpu": t["cpu_ns"], "wall": t["wall_ns"], "calls": t["calls"],
                               "in_region_thread": t["in_region_thread"]}
                        for name, t in self.targets.items()},
        }
        if path:
            with open(path, "w") as fh:
                json.dump(doc, fh, indent=1)
        else:
            json.dump(doc, sys.stdout, indent=1)
            print()


def run(truth: Truth, body) -> None:
    """Run `body(truth)` inside the region (called `measured_region` so
    profilers see it on the stack) and write the truth."""

    def measured_region():
        with truth.region():
            body(truth)

    measured_region()
    truth.write()
