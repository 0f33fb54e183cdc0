"""The signal handler's cost per sample, two truestack builds side by side (e.g. before/after a
change to the walk), from the native core's own counters (`handler_ns` / samples).

    python bench/async/handler_cost.py --before /venv-main/bin/python --after /venv-branch/bin/python [--rounds 8]

Each round records every (build, program) pair once, in a fresh random order, at 1 kHz in cpu
mode; medians over rounds. Programs: bench/overhead's cpu_bound (plain calls) and an asyncio
program (three tasks, coroutine frames on every stack).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ASYNC_PROGRAM = """
import asyncio

def spin(n):
    x = 0
    for i in range(n):
        x += i * i
    return x

async def worker(ms):
    for _ in range(300):
        spin(20000)
        await asyncio.sleep(ms / 1000)

async def main():
    await asyncio.gather(worker(1), worker(2), worker(3))

asyncio.run(main())
"""
READ = (
    "import sys; from truestack.model import load; s = load(sys.argv[1]).meta.sampler_stats; "
    "print(s.extra['handler_ns'] / max(s.samples, 1) / 1000)"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="python of the first build")
    ap.add_argument("--after", required=True, help="python of the second build")
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    builds = {"before": args.before, "after": args.after}
    results: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        progs = {"cpu_bound": os.path.join(HERE, "..", "overhead", "programs", "cpu_bound.py")}
        progs["asyncio"] = os.path.join(tmp, "asyncio_prog.py")
        with open(progs["asyncio"], "w") as fh:
            fh.write(ASYNC_PROGRAM)
        out = os.path.join(tmp, "p.tsp")
        for _ in range(args.rounds):
            jobs = [(b, p) for b in builds for p in progs]
            random.shuffle(jobs)
            for build, prog in jobs:
                py = builds[build]
                cmd = [py, "-m", "truestack", "record", "-q", "--rate", "1k", "-o", out, progs[prog]]
                subprocess.run(cmd, check=True, capture_output=True, cwd=tmp)
                us = subprocess.run([py, "-c", READ, out], check=True, capture_output=True, text=True).stdout
                results.setdefault((prog, build), []).append(float(us))
    print(f"handler µs per sample, median of {args.rounds} rounds [min-max]")
    print("| program | before | after | after / before |")
    print("|---|---:|---:|---:|")
    for prog in ("cpu_bound", "asyncio"):
        b, a = results[(prog, "before")], results[(prog, "after")]
        mb, ma = statistics.median(b), statistics.median(a)
        print(
            f"| {prog} | {mb:.2f} [{min(b):.2f}-{max(b):.2f}] | {ma:.2f} [{min(a):.2f}-{max(a):.2f}] | {ma / mb:.3f} |"
        )


if __name__ == "__main__":
    main()
