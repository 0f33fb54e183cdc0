"""Sampling session lifecycle: engine choice, collector thread, start/stop.

The collector thread drains the engine every `drain_interval` seconds (50 to
200 ms, by the rate: `drain_interval_for`) with
the GIL held, so the native engine can release the code objects it pinned
quickly, and hands resolved samples either to `on_samples` or to an internal
buffer read by `drain()`.

The collector wakes once per drain interval (a timed wait: no polling,
nothing per sample) and takes the GIL once per wake-up. A drain that runs
longer than the interpreter's switch interval (5 ms) while a program thread
waits for the GIL gives the GIL back in the middle and waits to get it again;
so does a consumer that does I/O. `stats().extra` counts the collector's
wake-ups, drains, the drains cut that way (`collector_gil_handbacks`: drains
during which the collector blocked at least once, from its own voluntary
context switches; `collector_drain_blocks`: those switches, 2-3 per hand-back)
and drains longer than `_LONG_DRAIN_S`.
"""

from __future__ import annotations

import os
import resource
import threading
import time
import weakref
from collections.abc import Callable, Iterator

from .engines import Engine, create_engine
from .rates import parse_rate
from .samples import Sample, SamplerStats
from .settings import DEFAULT_MAX_DEPTH

SampleSink = Callable[[list[Sample]], None]

_LONG_DRAIN_S = 0.02  # a drain that took longer (GIL waits included) is counted
# A drain costs the program's process ~0.5-1 ms of CPU however few samples it holds (the
# collector's wake-up, the GIL taken, the stream's write waking the recorder: wake-ups cost
# ~40 us each on a VM). Every 50 ms that was 1.5 % of a CPU at 100 Hz, more than the samples
# themselves; so a drain takes about _DRAIN_SAMPLES samples of one thread, within these bounds.
# The upper one bounds what a program killed outright loses, and how late a live view is.
_DRAIN_SAMPLES = 100
_DRAIN_MIN_S, _DRAIN_MAX_S = 0.05, 0.2


def drain_interval_for(rate_hz: float) -> float:
    """The collector's drain interval at this sampling rate."""
    return min(max(_DRAIN_SAMPLES / rate_hz, _DRAIN_MIN_S), _DRAIN_MAX_S)


_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", None)


def _thread_blocks() -> int:
    """Voluntary context switches of the calling thread so far (0 where unknown)."""
    return resource.getrusage(_RUSAGE_THREAD).ru_nvcsw if _RUSAGE_THREAD is not None else 0


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
        drain_interval: float | None = None,  # None: drain_interval_for(rate)
        native: str = "off",
    ) -> None:
        if mode not in ("cpu", "wall"):
            raise ValueError(f"unknown mode {mode!r} (expected 'cpu' or 'wall')")
        if max_depth < 1:
            raise ValueError("max_depth must be at least 1")
        self.mode = mode
        self.rate_hz = parse_rate(rate)
        self.max_depth = max_depth
        self.engine_choice = engine
        self.native = native  # settings.NATIVE_CHOICES
        self._sink = on_samples
        self._drain_interval = drain_interval if drain_interval is not None else drain_interval_for(self.rate_hz)
        self._buffer: list[Sample] = []
        self._buffer_lock = threading.Lock()
        self._engine: Engine | None = None
        self._notes: list[str] = []
        self._collector: threading.Thread | None = None
        self._stopping = threading.Event()
        self._running = False
        self._sink_errors = 0
        self._collect_lock = threading.Lock()
        self._wakeups = 0  # collector thread: times it woke up
        self._drains = 0  # ... and found samples to hand on
        self._handbacks = 0  # ... drains in which it blocked (the GIL taken back, or I/O)
        self._drain_blocks = 0  # ... and the times it blocked in them
        self._long_drains = 0  # drains longer than _LONG_DRAIN_S

    # -- lifecycle -----------------------------------------------------
    def start(self) -> Sampler:
        if self._running:
            raise RuntimeError("sampler already running")
        if self._engine is None:
            self._engine, self._notes = create_engine(
                self.engine_choice, self.mode, self.rate_hz, self.max_depth, self.native
            )
        self._engine.start()
        self._running = True
        _running_samplers.add(self)
        self._stopping.clear()
        self._collector = threading.Thread(target=self._collect_loop, name="truestack-collector", daemon=True)
        self._collector.start()
        return self

    def stop(self) -> SamplerStats:
        if not self._running:
            return self.stats()
        self._running = False
        _running_samplers.discard(self)
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
        stats.extra.update(
            collector_wakeups=self._wakeups,
            collector_drains=self._drains,
            collector_gil_handbacks=self._handbacks,
            collector_drain_blocks=self._drain_blocks,
            collector_long_drains=self._long_drains,
        )
        if self._sink_errors:
            stats.notes.append(f"{self._sink_errors} sample batches lost to a failing consumer")
        return stats

    # -- collector -------------------------------------------------------
    def collect_now(self) -> None:
        """Hand what the engine holds to the consumer now (serialised with the collector thread)."""
        self._collect_once()

    def _collect_loop(self) -> None:
        # One wake-up per drain interval (a timed wait: no polling, nothing per sample).
        # Its whole CPU time is what sampling cost the program: the drain, the consumer (the
        # profile's tables and record's stream are truestack's own work) and the wake-up itself.
        cpu = time.thread_time_ns()
        while not self._stopping.wait(self._drain_interval):
            self._wakeups += 1
            blocks = _thread_blocks()
            started = time.monotonic()
            if self._collect_once(charge=False):
                self._drains += 1
            blocked = _thread_blocks() - blocks
            self._drain_blocks += blocked
            self._handbacks += blocked > 0
            if time.monotonic() - started > _LONG_DRAIN_S:
                self._long_drains += 1
            cpu, spent = time.thread_time_ns(), cpu
            self._charge(cpu - spent)

    def _collect_once(self, charge: bool = True) -> bool:
        """Drain the engine into the consumer; False when there was nothing."""
        with self._collect_lock:
            if self._engine is None:
                return False
            started = time.thread_time_ns()
            drained = self._hand_over(self._engine.drain())
            if charge:  # a drain on another thread (drain(), stop()): its own CPU time only
                self._charge(time.thread_time_ns() - started)
            return drained

    def _charge(self, cpu_ns: int) -> None:
        engine = self._engine
        if engine is not None:
            engine.charge_collector(cpu_ns)

    def _hand_over(self, batch: list[Sample]) -> bool:
        if not batch:
            return False
        if self._sink is None:
            with self._buffer_lock:
                self._buffer.extend(batch)
            return True
        try:
            self._sink(batch)
        except Exception:
            self._sink_errors += 1
        return True


_running_samplers: weakref.WeakSet[Sampler] = weakref.WeakSet()


def _inert_in_forked_child() -> None:
    """A forked child's copy of a running sampler: its engine stopped at the fork and its
    collector thread is gone, and a parent thread may have held its locks at the fork. It is
    left stopped, with fresh locks and no engine, so stopping it there returns at once."""
    for sampler in list(_running_samplers):
        sampler._running = False
        sampler._collector = None
        sampler._engine = None
        sampler._collect_lock = threading.Lock()
        sampler._buffer_lock = threading.Lock()
    _running_samplers.clear()


os.register_at_fork(after_in_child=_inert_in_forked_child)


def sleep_until(deadline: float) -> None:
    """Sleep until time.monotonic() reaches deadline (helper for --duration)."""
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.1))
