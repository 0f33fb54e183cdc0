"""Engine selection: native cpu | native wall | safepoint fallback."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from ..settings import ENGINE_CHOICES, NATIVE_CHOICES
from .base import Engine, EngineUnavailable


def native_problem(native: str, engine: str) -> str | None:
    """Why `native` ("on"/"all") cannot be had with `engine` here, or None."""
    if native == "off":
        return None
    if engine == "safepoint":
        return "--native needs the native engine (the safepoint engine sees no C frames)"
    try:
        from .. import _native
    except ImportError as exc:
        return f"--native needs truestack's native extension, which cannot be imported: {exc}"
    if not getattr(_native, "NATIVE_UNWIND", 0):
        from .native_stacks import NO_LIBUNWIND

        return NO_LIBUNWIND
    return None


def warm_cpu_timers(engine: str, mode: str) -> Callable[[], None]:
    """Start, in a helper thread, the kernel's one-off set-up of the perf timers the native cpu
    engine will arm (6-12 ms in the first perf_event_open of a perf-idle system); returns a
    function that waits for it. `record` calls it while it imports, then waits before its fork."""
    if mode != "cpu" or engine not in ("auto", "native") or os.environ.get("TRUESTACK_TIMER", "auto") == "posix":
        return _nothing
    try:
        from .. import _native
    except ImportError:
        return _nothing
    import threading

    def warm() -> None:
        with contextlib.suppress(OSError):  # no perf events here: the engine then uses POSIX timers
            _native.warm_cpu_timers()

    helper = threading.Thread(target=warm, name="truestack-warm-timers", daemon=True)
    try:
        helper.start()
    except RuntimeError:  # no thread to be had (RLIMIT_NPROC, ...): the sampler's start pays it
        return _nothing
    return helper.join


def _nothing() -> None:
    pass


def create_engine(
    engine: str, mode: str, rate_hz: float, max_depth: int, native: str = "off"
) -> tuple[Engine, list[str]]:
    """Build the engine asked for; return it with notes on any fallback taken.

    "auto" prefers the native engine and falls back to the safepoint engine
    (saying why) when the extension cannot be loaded or its timers refused.
    "native" fails instead of falling back, and so does any engine with
    `native` ("on": C frames interleaved; "all": interpreter plumbing too).
    """
    if native not in NATIVE_CHOICES:
        raise ValueError(f"unknown native setting {native!r} (expected one of {', '.join(NATIVE_CHOICES)})")
    problem = native_problem(native, engine)
    if problem is not None:
        raise EngineUnavailable(problem)
    if engine not in ENGINE_CHOICES:
        raise ValueError(f"unknown engine {engine!r} (expected one of {', '.join(ENGINE_CHOICES)})")
    notes: list[str] = []
    if engine in ("auto", "native"):
        try:
            from . import native as native_engines

            cls = native_engines.NativeCpuEngine if mode == "cpu" else native_engines.NativeWallEngine
            if native != "off":
                return cls(mode, rate_hz, max_depth, native=True, native_all=native == "all"), notes
            return cls(mode, rate_hz, max_depth), notes
        except (ImportError, EngineUnavailable, OSError) as exc:
            if engine == "native":
                raise EngineUnavailable(f"native engine unavailable: {exc}") from exc
            notes.append(f"native engine unavailable ({exc}); using the biased safepoint engine")
    from .safepoint import SafepointEngine

    return SafepointEngine(mode, rate_hz, max_depth), notes


__all__ = ["ENGINE_CHOICES", "Engine", "EngineUnavailable", "create_engine", "native_problem", "warm_cpu_timers"]
