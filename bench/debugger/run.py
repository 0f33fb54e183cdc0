"""Debugger overhead on a recursive fib: truestack vs pdb, per Python version, same run.

Cases, each as a ratio to the same fib with no debugger:
  (0) no breakpoint: the debugger had one and removed it (truestack) /
      was continued with none (pdb)
  (a) a breakpoint in a function fib never calls (elsewhere.py)
  (b) `b fib, n == -1`: a never-true conditional breakpoint on fib's first
      line, reached on every call

Each measurement is a fresh child process (debugger state is global) that
alternates runs without and with the debugger and reports
median(with) / median(without); rounds interleave all configurations and
versions, and the figure printed is the median over rounds.

    python bench/debugger/run.py [--quick] [--n N] [--rounds R] [--python PY ...]

--python (repeatable) names the interpreters to compare, each with truestack
installed (default: this one); the table puts them side by side.
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

CASES = ("0", "a", "b")
CONFIGS = tuple(f"{tool}-{case}" for case in CASES for tool in ("ts", "pdb"))
LABELS = {
    "0": "(0) no breakpoint",
    "a": "(a) unrelated breakpoint",
    "b": "(b) b fib, n == -1 (never true)",
}


def fib(n):
    if n <= 1:  # FIB_FIRST_LINE
        return n
    return fib(n - 1) + fib(n - 2)


ELSEWHERE = os.path.join(HERE, "elsewhere.py")


def _line_of(marker: str, path: str = __file__) -> int:
    with open(path) as fh:
        for number, text in enumerate(fh, 1):
            if text.rstrip().endswith(f"# {marker}"):
                return number
    raise LookupError(marker)


def _setup(config: str):
    """(on, off, backend) for `config`: on() makes the debugger active as the case says."""
    case = config[-1]
    here = ELSEWHERE if case in "0a" else os.path.abspath(__file__)
    line = _line_of("UNCALLED_LINE" if case in "0a" else "FIB_FIRST_LINE", here)
    cond = "n == -1" if case == "b" else None
    if config.startswith("ts-"):
        from truestack.debugger import fastpath
        from truestack.debugger.core import Debugger

        class Quiet(Debugger):
            def message(self, text: str) -> None:
                pass

        debugger = Quiet()
        backend = type(debugger.backend).__name__.replace("Backend", "").lower()
        backend += "+C" if fastpath.hook is not None else " (Python path)"

        def on() -> None:
            bp = debugger.set_break(here, line, cond)
            if case == "0":
                debugger.clear_break(bp.id)

        def off() -> None:
            debugger.clear_all_breaks()

        return on, off, backend
    import pdb

    debugger = pdb.Pdb(stdin=io.StringIO("c\n"), stdout=io.StringIO())
    if case != "0":
        debugger.set_break(here, line, cond=cond)
    debugger.set_trace()  # reads "c": keeps tracing only while a breakpoint exists
    trace = sys.gettrace()

    def on() -> None:
        sys.settrace(trace)

    def off() -> None:
        sys.settrace(None)

    return on, off, "settrace"


def _worker(config: str, n: int, calls: int) -> tuple[float, str]:
    """Time fib(n) alternately without and with the debugger set up as
    `config` says, in this process; return median(with) / median(without).

    Alternating inside one process cancels most of the drift a shared machine
    adds between processes."""
    on, off, backend = _setup(config)
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
    return statistics.median(with_debugger) / statistics.median(without), backend


def _version(python: str) -> str:
    out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small run (smoke test)")
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--calls", type=int, default=None)
    parser.add_argument("--python", action="append", default=None, help="interpreter to include (repeatable)")
    parser.add_argument("--worker", choices=CONFIGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.n or (15 if args.quick else 25)
    rounds = args.rounds or (2 if args.quick else 7)
    calls = args.calls or (3 if args.quick else 9)
    if args.worker:
        ratio, backend = _worker(args.worker, n, calls)
        print(f"{ratio} {backend}")
        return 0

    pythons = args.python or [sys.executable]
    versions = {python: _version(python) for python in pythons}
    env = child_env()
    env.pop("PYTHONBREAKPOINT", None)
    ratios: dict[tuple[str, str], list[float]] = {(py, config): [] for py in pythons for config in CONFIGS}
    backends: dict[str, str] = {}
    for _ in range(rounds):
        for python in pythons:
            for config in CONFIGS:
                # pdb with a breakpoint is ~10-30x slower: fewer calls keep its share of the run sane
                count = max(2, calls // 3) if config in ("pdb-a", "pdb-b") else calls
                out = subprocess.run(
                    [python, __file__, "--worker", config, "--n", str(n), "--calls", str(count)],
                    env=env, capture_output=True, text=True, check=True)
                ratio, backend = out.stdout.strip().splitlines()[-1].split(" ", 1)
                ratios[python, config].append(float(ratio))
                if config.startswith("ts-"):
                    backends[python] = backend
    median = {key: statistics.median(values) for key, values in ratios.items()}

    print(f"fib({n}); {rounds} rounds of fresh processes, each alternating runs without/with the debugger;")
    print("slowdown = median(with) / median(without) per process, median over rounds")
    for python in pythons:
        print(f"python {versions[python]} ({python}): truestack backend {backends[python]}")
    head = "".join(f"{'py' + versions[py] + ' truestack':>18}{'pdb':>10}" for py in pythons)
    print(f"{'case':<36}{head}")
    for case in CASES:
        cells = "".join(f"{median[py, 'ts-' + case]:>17.2f}x{median[py, 'pdb-' + case]:>9.2f}x" for py in pythons)
        print(f"{LABELS[case]:<36}{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
