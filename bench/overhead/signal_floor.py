"""What the kernel alone charges per sampling signal on this machine.

Compiles `signal_floor.c` (gcc) and runs the same busy loop with no signals
and with SIGPROF at 1 kHz and 10 kHz from each source truestack uses, to a
handler that does nothing; interleaved rounds, medians. Whatever a profiler
built on signals does, it cannot cost less than this.

    python bench/overhead/signal_floor.py [--rounds 5] [--loops 300000000]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = [("none", 0), ("perf", 1000), ("perf", 10000), ("thread", 1000), ("thread", 10000)]


def build(workdir: str) -> str:
    exe = os.path.join(workdir, "signal_floor")
    subprocess.run(["gcc", "-O2", "-pthread", "-o", exe, os.path.join(HERE, "signal_floor.c")], check=True)
    return exe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--loops", type=int, default=300_000_000, help="busy-loop iterations per run")
    args = parser.parse_args()
    if shutil.which("gcc") is None:
        print("signal_floor: gcc not found", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as workdir:
        exe = build(workdir)
        times: dict[tuple[str, int], list[float]] = {c: [] for c in CONFIGS}
        signals: dict[tuple[str, int], list[int]] = {c: [] for c in CONFIGS}
        for _ in range(args.rounds):
            for source, rate in CONFIGS:
                out = subprocess.run([exe, source, str(rate or 1), str(args.loops)], capture_output=True, text=True)
                if out.returncode != 0:
                    print(f"{source} @{rate}: failed: {out.stderr.strip()}", file=sys.stderr)
                    continue
                seconds, received = out.stdout.split()
                times[(source, rate)].append(float(seconds))
                signals[(source, rate)].append(int(received))
    base = statistics.median(times[("none", 0)])
    print(f"Kernel cost of sampling signals to a no-op handler, median of {args.rounds} interleaved rounds "
          f"(busy loop {base:.3f} s unsignalled)\n")
    print("| source | rate | slowdown | signals/s received | µs per signal |")
    print("|---|---:|---:|---:|---:|")
    for source, rate in CONFIGS[1:]:
        if not times[(source, rate)]:
            print(f"| {source} | {rate} | failed | - | - |")
            continue
        t = statistics.median(times[(source, rate)])
        n = statistics.median(signals[(source, rate)])
        per_signal = (t - base) / n * 1e6 if n else float("nan")
        print(f"| {source} | {rate} | {t / base:.3f} | {n / t:.0f} | {per_signal:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
