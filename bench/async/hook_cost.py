"""What `--async`'s task registry hook (`truestack.tasks.hook`) costs the program at each task
creation: `create_task` with and without it, side by side.

    python bench/async/hook_cost.py [--rounds 9] [--tasks 20000]

Each round creates --tasks tasks with and without the hook, in a fresh random order, and times
only the `create_task` calls (the tasks then run and finish untimed); medians over rounds of µs
per task and of the ratio of the two in the same round.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time

from truestack.tasks.hook import TaskHook


async def _noop() -> None:
    pass


async def _create(n: int) -> float:
    start = time.perf_counter()
    tasks = [asyncio.create_task(_noop()) for _ in range(n)]
    elapsed = time.perf_counter() - start
    await asyncio.gather(*tasks)
    return elapsed


def _timed(hooked: bool, n: int) -> float:
    hook = TaskHook()
    try:
        if hooked and not hook.install():
            raise SystemExit("this Python's asyncio task registry is not the one the hook knows")
        return asyncio.run(_create(n))
    finally:
        hook.uninstall()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--tasks", type=int, default=20_000)
    args = parser.parse_args()
    plain: list[float] = []
    hooked: list[float] = []
    ratios: list[float] = []
    for _ in range(args.rounds):
        order = [False, True]
        random.shuffle(order)
        times = {h: _timed(h, args.tasks) for h in order}
        plain.append(times[False] / args.tasks * 1e6)
        hooked.append(times[True] / args.tasks * 1e6)
        ratios.append(times[True] / times[False])
    p, h = statistics.median(plain), statistics.median(hooked)
    print(f"{args.tasks} tasks per run, {args.rounds} interleaved rounds, medians (Python {sys.version.split()[0]})")
    print(f"create_task without the hook {p:.2f} µs, with it {h:.2f} µs: +{h - p:.2f} µs per task, "
          f"ratio {statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
