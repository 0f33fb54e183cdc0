"""Sampling session lifecycle: engine choice, collector thread, start/stop.

The collector thread drains the engine every `drain_interval` seconds with
the GIL held, so the native engine can release the code objects it pinned
quickly, and hands resolved samples either to `on_samples` or to an internal
buffer read by `drain()`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from .engines import Engine, create_engine
from .rates import parse_rate
from .samples import Sample, SamplerStats
from .settings import DEFAULT_MAX_DEPTH

SampleSink = Callable[[list[Sample]], None]


class Sampler:
    """Samples every Python thread of this process.

    >>> with Sampler(mode="cpu", rate=1000) as s:
    ...     work()
    >>> for sample in s.drain(): ...
    """

    def __init__(
        self,
        mode: str = "cpu",
        rate: float | str = 100,
        max_depth: int = DEFAULT_MAX_DEPTH,
        engine: str = "auto",
        on_samples: SampleSink | None = None,
        drain_interval: float = 0.05,
    ) -> None:
        if mode not in ("cpu", "wall"):
            raise ValueError(f"unknown mode {mode!r} (expected 'cpu' or 'wall')")
        if max_depth < 1:
            raise ValueError("max_depth must be at least 1")
        self.mode = mode
        self.rate_hz = parse_rate(rate)
        self.max_depth = max_depth
        self.engine_choice = engine
        self._sink = on_samples
        self._drain_interval = drain_interval
        self._buffer: list[Sample] = []
        self._buffer_lock = threading.Lock()
        self._engine: Engine | None = None
        self._notes: list[str] = []
        self._collector: threading.Thread | None = None
        self._stopping = threading.Event()
        self._running = False
        self._sink_errors = 0
        self._collect_lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------
    def start(self) -> Sampler:
        if self._running:
            raise RuntimeError("sampler already running")
        if self._engine is None:
            self._engine, self._notes = create_engine(self.engine_choice, self.mode, self.rate_hz, self.max_depth)
        self._engine.start()
        self._running = True
        self._stopping.clear()
        self._collector = threading.Thread(target=self._collect_loop, name="truestack-collector", daemon=True)
        self._collector.start()
        return self

    def stop(self) -> SamplerStats:
        if not self._running:
            return self.stats()
        self._running = False
        assert self._engine is not None  # set by start()
        self._engine.stop()
        self._stopping.set()
        if self._collector is not None:
            self._collector.join()
            self._collector = None
        self._collect_once()  # whatever arrived between the last tick and stop()
        return self.stats()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._running

    @property
    def fallback_notes(self) -> list[str]:
        """Why the engine asked for is not the one running (empty when it is)."""
        return list(self._notes)

    @property
    def engine_name(self) -> str:
        return self._engine.name if self._engine is not None else "not started"

    # -- data ------------------------------------------------------------
    def drain(self) -> Iterator[Sample]:
        """Yield the samples collected so far (when no on_samples sink is set)."""
        if self._running:
            self._collect_once()
        with self._buffer_lock:
            batch, self._buffer = self._buffer, []
        yield from batch

    def stats(self) -> SamplerStats:
        if self._engine is None:
            return SamplerStats(engine="not started", mode=self.mode, requested_rate_hz=self.rate_hz)
        stats = self._engine.stats()
        stats.notes = [*self._notes, *stats.notes]
        if self._sink_errors:
            stats.notes.append(f"{self._sink_errors} sample batches lost to a failing consumer")
        return stats

    # -- collector -------------------------------------------------------
    def collect_now(self) -> None:
        """Hand what the engine holds to the consumer now (serialised with the collector thread)."""
        self._collect_once()

    def _collect_loop(self) -> None:
        while not self._stopping.wait(self._drain_interval):
            self._collect_once()

    def _collect_once(self) -> None:
        with self._collect_lock:
            if self._engine is None:
                return
            started = time.thread_time_ns()
            batch = self._engine.drain()
            # Turning raw samples into Python ones is part of what each sample costs: the
            # engine reports it with its counters (not what the consumer does per batch).
            self._engine.charge_collector(time.thread_time_ns() - started)
            self._hand_over(batch)

    def _hand_over(self, batch: list[Sample]) -> None:
        if not batch:
            return
        if self._sink is None:
            with self._buffer_lock:
                self._buffer.extend(batch)
            return
        try:
            self._sink(batch)
        except Exception:
            self._sink_errors += 1


def sleep_until(deadline: float) -> None:
    """Sleep until time.monotonic() reaches deadline (helper for --duration)."""
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.1))
