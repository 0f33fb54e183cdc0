"""Debugger overhead on a recursive fib: truestack vs pdb, same run.

Cases, each as a ratio to the same fib with no debugger:
  (a) a breakpoint in a function fib never calls
  (b) a never-true conditional breakpoint inside fib

Each measurement is a fresh child process (debugger state is global) that
alternates runs without and with the debugger and reports
median(with) / median(without); rounds interleave all configurations, and
the figure printed is the median over rounds.

    python bench/debugger/run.py [--quick] [--n N] [--rounds R]
"""
from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from truestack_path import child_env

CONFIGS = ("ts-a", "ts-b", "pdb-a", "pdb-b")


def fib(n):
    if n <= 1:
        return n  # FIB_BREAK_LINE
    return fib(n - 1) + fib(n - 2)


def never_called():
    return 0  # UNCALLED_LINE


def _line_of(marker: str) -> int:
    with open(__file__) as fh:
        for number, text in enumerate(fh, 1):
            if text.rstrip().endswith(f"# {marker}"):
                return number
    raise LookupError(marker)


def _worker(config: str, n: int, calls: int) -> float:
    """Time fib(n) alternately without and with the debugger set up as
    `config` says, in this process; return median(with) / median(without).

    Alternating inside one process cancels most of the drift a shared machine
    adds between processes."""
    here = os.path.abspath(__file__)
    line = _line_of("UNCALLED_LINE" if config.endswith("-a") else "FIB_BREAK_LINE")
    cond = None if config.endswith("-a") else "n < 0"
    if config.startswith("ts-"):
        from truestack.debugger.core import Debugger

        class Quiet(Debugger):
            def message(self, text: str) -> None:
                pass

        debugger = Quiet()

        def on() -> None:
            debugger.set_break(here, line, cond)

        def off() -> None:
            debugger.clear_all_breaks()
    else:
        import pdb

        debugger = pdb.Pdb(stdin=io.StringIO("c\n"), stdout=io.StringIO())
        debugger.set_break(here, line, cond=cond)
        debugger.set_trace()  # reads "c": keeps tracing because a breakpoint exists
        trace = sys.gettrace()

        def on() -> None:
            sys.settrace(trace)

        def off() -> None:
            sys.settrace(None)

    without, with_debugger = [], []
    for _ in range(calls):
        off()
        fib(10)  # warm-up after each switch (and lets monitoring disable what it never needs)
        start = time.perf_counter()
        fib(n)
        without.append(time.perf_counter() - start)
        on()
        fib(10)
        start = time.perf_counter()
        fib(n)
        with_debugger.append(time.perf_counter() - start)
    off()
    return statistics.median(with_debugger) / statistics.median(without)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small run (smoke test)")
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--calls", type=int, default=None)
    parser.add_argument("--worker", choices=CONFIGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.n or (15 if args.quick else 22)
    rounds = args.rounds or (2 if args.quick else 7)
    calls = args.calls or (3 if args.quick else 9)
    if args.worker:
        print(_worker(args.worker, n, calls))
        return 0

    env = child_env()
    env.pop("PYTHONBREAKPOINT", None)
    ratios: dict[str, list[float]] = {config: [] for config in CONFIGS}
    for _ in range(rounds):
        for config in CONFIGS:
            # pdb is ~100x slower: fewer calls keep its share of the run sane
            count = max(2, calls // 3) if config.startswith("pdb") else calls
            out = subprocess.run(
                [sys.executable, __file__, "--worker", config, "--n", str(n), "--calls", str(count)],
                env=env, capture_output=True, text=True, check=True)
            ratios[config].append(float(out.stdout.strip().splitlines()[-1]))
    median = {config: statistics.median(values) for config, values in ratios.items()}
    backend = "sys.monitoring" if sys.version_info >= (3, 12) and \
        os.environ.get("TRUESTACK_DEBUG_BACKEND") != "settrace" else "settrace"
    print(f"python {sys.version.split()[0]}  truestack backend: {backend}")
    print(f"fib({n}); {rounds} rounds of fresh processes, each alternating runs without/with the debugger;")
    print("slowdown = median(with) / median(without) per process, median over rounds")
    print(f"{'case':<44}{'truestack':>12}{'pdb':>12}")
    print(f"{'(a) breakpoint in a function never called':<44}"
          f"{median['ts-a']:>11.2f}x{median['pdb-a']:>11.2f}x")
    print(f"{'(b) never-true conditional bp inside fib':<44}"
          f"{median['ts-b']:>11.2f}x{median['pdb-b']:>11.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
