"""What --native costs per sample: the SIGPROF handler's own CPU time with and without native unwinding.

Runs a CPU-bound Python loop (a recursion 30 frames deep calling sorted() and
zlib.crc32, so both Python and C frames are on the stack) in this process
under the native cpu engine, once per configuration (no --native; --native
with the handler's own CFI unwinder, as shipped; --native with libunwind
alone), interleaved over REPS rounds, and prints per configuration the
median of: handler CPU time per signal (the core's own counter,
CLOCK_THREAD_CPUTIME_ID around the handler body), the collector's CPU time
per sample (resolving, and symbolizing with --native), and the loop's
wall-time ratio to the unprofiled run just before it.

    python bench/overhead/native_handler.py [--rates 100 1000] [--reps 3] [--seconds 2]
"""
from __future__ import annotations

import argparse
import statistics
import time
import zlib

from truestack import _native
from truestack.engines.native import NativeCpuEngine

DATA = b"truestack" * 512


def work(depth: int) -> int:
    if depth:
        return work(depth - 1)
    return len(sorted(range(200), key=lambda x: -x)) + zlib.crc32(DATA)


def run_loop(seconds: float) -> tuple[int, float]:
    """Loop for ~seconds of CPU; return (iterations, wall seconds)."""
    n, start, end = 0, time.perf_counter(), time.thread_time() + seconds
    while time.thread_time() < end:
        work(30)
        n += 1
    return n, time.perf_counter() - start


def measure(rate: int, unwinder: str | None, seconds: float) -> dict[str, float]:
    if unwinder:
        _native.native_unwinder(unwinder)
    engine = NativeCpuEngine("cpu", rate, native=unwinder is not None)
    before = _native.stats()
    engine.start()
    n, wall = run_loop(seconds)
    engine.stop()
    t0 = time.thread_time_ns()
    samples = engine.drain()
    collector_ns = time.thread_time_ns() - t0
    after = _native.stats()
    signals = max(after["signals"] - before["signals"], 1)
    return {
        "per_iter_us": wall / n * 1e6,
        "handler_us": (after["handler_ns"] - before["handler_ns"]) / signals / 1e3,
        "collector_us": collector_ns / max(len(samples), 1) / 1e3,
        "samples": len(samples),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", nargs="+", type=int, default=[100, 1000])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    if not _native.NATIVE_UNWIND:
        print("truestack was built without libunwind: --native is unavailable")
        return 1
    results: dict[tuple[int, str | None], list[dict[str, float]]] = {}
    base: list[float] = []
    for _ in range(args.reps):
        for rate in args.rates:
            for unwinder in (None, "cfi", "libunwind"):
                # Each configuration right after an unprofiled run of its own: the ratio of the pair
                # (a shared VM's speed drifts over a run; two adjacent runs share its phase).
                n, wall = run_loop(args.seconds)
                base.append(wall / n * 1e6)
                r = measure(rate, unwinder, args.seconds)
                r["ratio"] = r["per_iter_us"] / base[-1]
                results.setdefault((rate, unwinder), []).append(r)
    _native.native_unwinder("cfi")
    base_us = statistics.median(base)
    print(f"unprofiled: {base_us:.1f} us per iteration (median of {len(base)} runs)")
    print(f"{'rate':>6} {'native':>10} {'wall ratio':>10} {'handler us/sample':>18} {'collector us/sample':>20} {'samples':>8}")
    for (rate, unwinder), runs in results.items():
        def med(key: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(r[key] for r in runs)

        print(f"{rate:>6} {unwinder or 'no':>10} {med('ratio'):>10.3f} "
              f"{med('handler_us'):>18.2f} {med('collector_us'):>20.2f} {med('samples'):>8.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
