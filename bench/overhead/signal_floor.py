"""What each kernel timer mechanism charges per sampling signal on this machine,
what rate it achieves, and whether its signals land on the right thread.

Compiles `signal_floor.c` (gcc) and runs the same busy loop with no signals
and with SIGPROF from each source (cpu mode: perf_event task-clock, a
per-thread CPU-clock POSIX timer, setitimer(ITIMER_PROF); wall mode: a
sampler thread's clock_nanosleep + tgkill, a per-thread CLOCK_MONOTONIC POSIX
timer) at each rate, to a handler that only counts; interleaved rounds in a
fresh random order, medians. Whatever a signal-based profiler does on top,
it cannot cost less than this.

Two tables:
  cost      one busy thread. delivered/s and delivered/asked (asked = the
            thread's CPU time, or wall time in wall mode, times the rate);
            ns per delivered signal = extra CPU over the unsignalled loop
            divided by signals delivered, counted on the signalled thread and
            on the whole process (the latter includes a sampler thread).
  accuracy  two busy threads, the second doing half the work (uneven truth).
            delivered/expected per thread (expected = its own CPU or wall
            time times the rate), and the share error: |share of signals -
            share of the truth| for the first thread, percentage points.

    python bench/overhead/signal_floor.py [--rounds 5] [--loops 200000000] [--rates 100 1000 10000]
                                          [--sources perf thread itimer tgkill mono] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = {"perf": "cpu", "thread": "cpu", "itimer": "cpu", "tgkill": "wall", "mono": "wall"}
NOTES = {
    "perf": "perf_event task-clock per thread (hrtimer)",
    "thread": "timer_create(CLOCK_THREAD_CPUTIME_ID, SIGEV_THREAD_ID)",
    "itimer": "setitimer(ITIMER_PROF): process-wide, kernel picks the thread",
    "tgkill": "sampler thread: clock_nanosleep + tgkill per thread",
    "mono": "timer_create(CLOCK_MONOTONIC, SIGEV_THREAD_ID) per thread",
}


@dataclass
class Run:
    """One child's output: process totals and, per worker, (cpu s, wall s, signals)."""
    wall: float
    cpu: float
    workers: list[tuple[float, float, int]] = field(default_factory=list)


def build(workdir: str) -> str:
    exe = os.path.join(workdir, "signal_floor")
    subprocess.run(["gcc", "-O2", "-pthread", "-o", exe, os.path.join(HERE, "signal_floor.c")], check=True)
    return exe


def run_once(exe: str, source: str, rate: int, loops: int, threads: int) -> Run | str:
    out = subprocess.run([exe, source, str(rate or 1), str(loops), str(threads)], capture_output=True, text=True)
    if out.returncode != 0:
        return out.stderr.strip() or f"exit {out.returncode}"
    values = out.stdout.split()
    workers = [(float(values[i]), float(values[i + 1]), int(values[i + 2])) for i in range(2, len(values), 3)]
    return Run(float(values[0]), float(values[1]), workers)


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def cost_rows(runs: dict[tuple[str, int], list[Run]], configs: list[tuple[str, int]]) -> list[list[str]]:
    base = runs[("none", 0)]
    base_thread = median([r.workers[0][0] for r in base])
    base_proc = median([r.cpu for r in base])
    base_wall = median([r.wall for r in base])
    rows = []
    for source, rate in configs:
        got = runs[(source, rate)]
        if not got:
            rows.append([source, MODES[source], str(rate), "failed", "-", "-", "-", "-"])
            continue
        signals = median([r.workers[0][2] for r in got])
        thread_cpu = median([r.workers[0][0] for r in got])
        # Asked: the rate times the time the source counts (CPU or wall) of the signalled thread.
        clock = median([r.workers[0][0 if MODES[source] == "cpu" else 1] for r in got])
        per_thread = (thread_cpu - base_thread) / signals * 1e9 if signals else float("nan")
        per_proc = (median([r.cpu for r in got]) - base_proc) / signals * 1e9 if signals else float("nan")
        rows.append([source, MODES[source], str(rate), f"{signals / clock:.0f}", f"{signals / (clock * rate):.3f}",
                     f"{per_thread:.0f}", f"{per_proc:.0f}", f"{median([r.wall for r in got]) / base_wall:.3f}"])
    return rows


def accuracy_rows(runs: dict[tuple[str, int], list[Run]], configs: list[tuple[str, int]]) -> list[list[str]]:
    rows = []
    for source, rate in configs:
        got = runs[(source, rate)]
        if not got:
            rows.append([source, MODES[source], str(rate), "failed", "-", "-"])
            continue
        k = 0 if MODES[source] == "cpu" else 1
        ratios: list[list[float]] = [[], []]
        errors = []
        for r in got:
            truth = [w[k] for w in r.workers]
            signals = [w[2] for w in r.workers]
            for i in range(2):
                ratios[i].append(signals[i] / (truth[i] * rate))
            if sum(signals):
                errors.append(abs(signals[0] / sum(signals) - truth[0] / sum(truth)) * 100)
        rows.append([source, MODES[source], str(rate), f"{median(ratios[0]):.3f}", f"{median(ratios[1]):.3f}",
                     f"{median(errors):.1f}" if errors else "-"])
    return rows


def table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" if i < 3 else "---:" for i in range(len(headers))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--loops", type=int, default=200_000_000, help="busy-loop iterations per run")
    parser.add_argument("--rates", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--sources", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--no-accuracy", action="store_true", help="skip the two-thread accuracy runs")
    parser.add_argument("--json", help="write the raw runs here")
    args = parser.parse_args(argv)
    if shutil.which("gcc") is None:
        print("signal_floor: gcc not found", file=sys.stderr)
        return 2
    configs = [(s, r) for s in args.sources for r in args.rates]
    thread_counts = [1] if args.no_accuracy else [1, 2]
    runs = {n: {c: [] for c in [("none", 0), *configs]} for n in thread_counts}
    failures: dict[str, str] = {}
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as workdir:
        exe = build(workdir)
        for _ in range(args.rounds):
            order = [(n, c) for n in thread_counts for c in runs[n]]
            rng.shuffle(order)  # drifting machine load spreads over every configuration alike
            for n, (source, rate) in order:
                got = run_once(exe, source, rate, args.loops, n)
                if isinstance(got, str):
                    failures[f"{source} @{rate} x{n}"] = got
                else:
                    runs[n][(source, rate)].append(got)
    if not runs[1][("none", 0)]:
        print(f"signal_floor: the unsignalled loop failed: {failures}", file=sys.stderr)
        return 1
    base = runs[1][("none", 0)]
    print(f"Per-signal cost of each timer mechanism (handler only counts), median of {args.rounds} interleaved "
          f"rounds; busy loop {median([r.workers[0][0] for r in base]):.3f} s CPU, "
          f"{median([r.wall for r in base]):.3f} s wall unsignalled\n")
    print(table(["source", "mode", "rate", "delivered/s", "delivered/asked", "ns/signal thread",
                 "ns/signal process", "wall slowdown"], cost_rows(runs[1], configs)))
    if 2 in runs:
        print("\nAccuracy with two busy threads (second does half the work): delivered/expected per thread, "
              "share error of the first thread in percentage points\n")
        print(table(["source", "mode", "rate", "thread A", "thread B", "share error pp"],
                    accuracy_rows(runs[2], configs)))
    print()
    for source in args.sources:
        print(f"{source}: {NOTES[source]}")
    for label, reason in failures.items():
        print(f"FAILED {label}: {reason.splitlines()[-1] if reason else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(n): {f"{s}@{r}": [vars(x) for x in v] for (s, r), v in by.items()}
                       for n, by in runs.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
