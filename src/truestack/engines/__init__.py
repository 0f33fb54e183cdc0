"""Engine selection: native cpu | native wall | safepoint fallback."""

from __future__ import annotations

from ..settings import ENGINE_CHOICES
from .base import Engine, EngineUnavailable


def create_engine(engine: str, mode: str, rate_hz: float, max_depth: int) -> tuple[Engine, list[str]]:
    """Build the engine asked for; return it with notes on any fallback taken.

    "auto" prefers the native engine and falls back to the safepoint engine
    (saying why) when the extension cannot be loaded or its timers refused.
    "native" fails instead of falling back.
    """
    if engine not in ENGINE_CHOICES:
        raise ValueError(f"unknown engine {engine!r} (expected one of {', '.join(ENGINE_CHOICES)})")
    notes: list[str] = []
    if engine in ("auto", "native"):
        try:
            from . import native

            cls = native.NativeCpuEngine if mode == "cpu" else native.NativeWallEngine
            return cls(mode, rate_hz, max_depth), notes
        except (ImportError, EngineUnavailable, OSError) as exc:
            if engine == "native":
                raise EngineUnavailable(f"native engine unavailable: {exc}") from exc
            notes.append(f"native engine unavailable ({exc}); using the biased safepoint engine")
    from .safepoint import SafepointEngine

    return SafepointEngine(mode, rate_hz, max_depth), notes


__all__ = ["ENGINE_CHOICES", "Engine", "EngineUnavailable", "create_engine"]
