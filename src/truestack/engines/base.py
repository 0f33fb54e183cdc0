"""The one interface every sampling engine implements."""

from __future__ import annotations

import abc

from ..samples import Sample, SamplerStats


class EngineUnavailable(RuntimeError):
    """This engine cannot run here (extension missing, timers refused, ...)."""


class Engine(abc.ABC):
    """A source of samples for every Python thread of this process.

    Lifecycle: start() → drain() repeatedly (from one collector thread, with
    the GIL) → stop() → a final drain(). An engine can be started again after
    stop().
    """

    name: str = "?"
    biased: bool = False

    def __init__(self, mode: str, rate_hz: float, max_depth: int) -> None:
        if mode not in ("cpu", "wall"):
            raise ValueError(f"unknown mode {mode!r} (expected 'cpu' or 'wall')")
        if rate_hz <= 0:
            raise ValueError("rate must be positive")
        self.mode = mode
        self.rate_hz = float(rate_hz)
        self.max_depth = int(max_depth)

    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    @abc.abstractmethod
    def drain(self) -> list[Sample]:
        """Return the samples taken since the previous drain, resolved."""

    @abc.abstractmethod
    def stats(self) -> SamplerStats: ...

    def charge_collector(self, cpu_ns: int) -> None:  # noqa: B027  # optional: a no-op unless the engine counts it
        """The collector spent `cpu_ns` of CPU turning a drain into samples (engines that report costs count it)."""
