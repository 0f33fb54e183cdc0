"""`truestack check`: which engine `record` will use on this machine, and why.

The first thing to run when a profile looks off: the interpreter and its
support, whether the native sampler loads (and how to fix it when it does
not), the kernel's perf_event setting, the timers cpu and wall mode get, and
the highest rate this machine sustains under the sampler's CPU budget
(measured: a short burst at 100 kHz). Exit status 0 when the native sampler
works, 1 when `record` would fall back to the biased safepoint engine.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

SUPPORTED = ((3, 10), (3, 11), (3, 12), (3, 13))
FIX = (
    "fix: install a C compiler and this interpreter's headers (e.g. `apt-get install gcc python3-dev`), then "
    "reinstall truestack (`pip install --force-reinstall --no-binary truestack truestack`, or `pip install .` "
    "in a checkout)"
)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "check",
        help="which engine record will use here, and why",
        description="Check this machine and interpreter: engine, perf_event permission, timers, highest rate.",
    )
    p.set_defaults(func=run)


def _perf_paranoid() -> str:
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as fh:
            value = fh.read().strip()
    except OSError:
        return "unknown (no /proc/sys/kernel/perf_event_paranoid)"
    return f"{value} (the cpu mode line shows which timer it leaves truestack)"


def _measure(mode: str) -> tuple[str, float]:
    """(timer, highest sustained rate) of a 0.3 s burst at the maximum rate."""
    from ..engines.native import NativeCpuEngine, NativeWallEngine

    engine = (NativeCpuEngine if mode == "cpu" else NativeWallEngine)(rate_hz=100_000)
    engine.start()
    try:
        end = time.thread_time() + 0.3
        while time.thread_time() < end:
            sum(range(100))
        stats = engine.stats()
    finally:
        engine.stop()
        engine.drain()
    interval = stats.extra.get("effective_interval_ns")
    interval = interval if isinstance(interval, int) else 0
    return stats.timer, (1e9 / interval if interval else 0.0)


def run(args: argparse.Namespace) -> int:
    from ..engines import EngineUnavailable, create_engine
    from ..model.facts import format_rate

    out = sys.stdout.write
    version = sys.version_info[:2]
    supported = version in SUPPORTED and platform.python_implementation() == "CPython"
    out(f"interpreter:    {platform.python_implementation()} {platform.python_version()} ({sys.executable}) — ")
    out("supported\n" if supported else "NOT supported (truestack supports CPython 3.10–3.13)\n")
    out(f"machine:        {platform.machine()}, Linux {platform.release()}\n")
    out(f"perf_event:     kernel.perf_event_paranoid = {_perf_paranoid()}\n")
    healthy = True
    for mode in ("cpu", "wall"):
        try:
            engine, notes = create_engine("auto", mode, 1000, 128)
        except EngineUnavailable as exc:  # pragma: no cover - auto falls back instead
            engine, notes = None, [str(exc)]
        name = engine.name if engine else "none"
        label = f"{mode} mode:"
        if notes:
            healthy = False
            out(f"{label:16}engine {name} (biased): {'; '.join(notes)}\n")
            continue
        try:
            timer, rate = _measure(mode)
        except (EngineUnavailable, OSError) as exc:
            healthy = False
            out(f"{label:16}engine {name}, but it could not start: {exc}\n")
            continue
        out(f"{label:16}engine {name}, timer {timer}, highest sustained rate ~{format_rate(rate)}\n")
    if not healthy:
        out(f"the native sampler is unavailable: record falls back to the biased safepoint engine\n{FIX}\n")
        return 1
    out("ok: record uses the native sampler\n")
    return 0
