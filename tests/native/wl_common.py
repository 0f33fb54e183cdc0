"""Helpers shared by the native-engine workload programs (run as subprocesses).

Each workload measures its own ground truth (time.thread_time_ns) and prints
one JSON line that the tests check.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable

from truestack.engines.native import NativeCpuEngine, NativeWallEngine
from truestack.samples import Sample


class Collector:
    """Runs a native engine and drains it from a separate thread, like Sampler does."""

    def __init__(self, mode: str, rate: float, max_depth: int = 128,
                 on_batch: Callable[[list[Sample]], None] | None = None, keep: bool = True,
                 inline: bool = False, native: bool = False) -> None:
        cls = NativeCpuEngine if mode == "cpu" else NativeWallEngine
        self.engine = cls(mode, rate, max_depth, native=native)
        self.samples: list[Sample] = []
        self._on_batch = on_batch
        self._keep = keep
        self._stop = threading.Event()
        # inline: the workload calls poll() itself, outside its measured
        # regions, so no collector thread competes for the GIL inside them.
        self._inline = inline
        self._last_poll = 0.0
        self._thread = threading.Thread(target=self._loop, name="truestack-test-collector", daemon=True)

    def _take(self) -> None:
        batch = self.engine.drain()
        if self._on_batch is not None:
            self._on_batch(batch)
        if self._keep:
            self.samples.extend(batch)

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            self._take()

    def poll(self) -> None:
        now = time.monotonic()
        if now - self._last_poll >= 0.05:
            self._last_poll = now
            self._take()

    def __enter__(self) -> Collector:
        self.engine.start()
        if not self._inline:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.engine.stop()
        self._stop.set()
        if not self._inline:
            self._thread.join()
        self._take()


def emit(result: dict) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def leaf_weights(samples: list[Sample], names: set[str]) -> dict[str, int]:
    """Sum of weights per leaf function name, over samples whose leaf is in names."""
    out = {n: 0 for n in names}
    for s in samples:
        if s.frames and s.frames[-1].name in names:
            out[s.frames[-1].name] += s.weight_ns
    return out


def spin_until(deadline: float) -> None:
    while time.monotonic() < deadline:
        pass
