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
  cost      one busy thread, its loop cut into chunk pairs, the source armed
            in one chunk of each pair (neighbouring chunks share the machine's
            load of the moment, which separate runs on a shared machine do
            not). delivered/s and delivered/asked (asked = the thread's CPU
            time, or wall time in wall mode, times the rate); ns per delivered
            signal = median over pairs of the armed chunk's extra CPU divided
            by the signals it got, on the signalled thread and on the whole
            process (the latter includes a sampler thread's wake-ups).
  accuracy  two busy threads, the second doing half the work (uneven truth).
            delivered/expected per thread (expected = its own CPU or wall
            time times the rate), and the share error: |share of signals -
            share of the truth| for the first thread, percentage points.

    python bench/overhead/signal_floor.py [--rounds 5] [--loops 200000000] [--pairs 10] [--rates 100 1000 10000]
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
    """One two-thread child: process totals and, per worker, (cpu s, wall s, signals)."""
    wall: float
    cpu: float
    workers: list[tuple[float, float, int]] = field(default_factory=list)


@dataclass
class Chunk:
    """One chunk of a one-thread chunked child (source armed or not)."""
    armed: bool
    thread_cpu: float
    process_cpu: float
    wall: float
    signals: int


def build(workdir: str) -> str:
    exe = os.path.join(workdir, "signal_floor")
    subprocess.run(["gcc", "-O2", "-pthread", "-o", exe, os.path.join(HERE, "signal_floor.c")], check=True)
    return exe


def run_child(exe: str, source: str, rate: int, loops: int, threads: int, pairs: int = 0) -> str:
    argv = [exe, source, str(rate), str(loops), str(threads), *([str(pairs)] if pairs else [])]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip() or f"exit {out.returncode}")
    return out.stdout


def run_two_threads(exe: str, source: str, rate: int, loops: int) -> Run:
    values = run_child(exe, source, rate, loops, 2).split()
    workers = [(float(values[i]), float(values[i + 1]), int(values[i + 2])) for i in range(2, len(values), 3)]
    return Run(float(values[0]), float(values[1]), workers)


def run_chunked(exe: str, source: str, rate: int, loops: int, pairs: int) -> list[Chunk]:
    chunks = []
    for line in run_child(exe, source, rate, loops, 1, pairs).splitlines():
        _, armed, thread_cpu, process_cpu, wall, signals = line.split()
        chunks.append(Chunk(armed == "1", float(thread_cpu), float(process_cpu), float(wall), int(signals)))
    return chunks


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def chunk_pairs(chunks: list[Chunk]) -> list[tuple[Chunk, Chunk]]:
    """(armed, unarmed) neighbours: the child prints each pair's two chunks in a row."""
    return [(a, b) if a.armed else (b, a) for a, b in zip(chunks[::2], chunks[1::2])]


def cost_row(source: str, rate: int, chunks: list[Chunk]) -> list[str]:
    pairs = chunk_pairs(chunks)
    if not pairs:
        return [source, MODES[source], str(rate), "failed", "-", "-", "-", "-"]
    on = [a for a, _ in pairs]
    signals = median([c.signals for c in on])
    # What the source counts: the thread's CPU time (cpu mode) or wall time.
    clock = median([c.thread_cpu if MODES[source] == "cpu" else c.wall for c in on])

    def per_signal(attr: str) -> str:
        if not signals:
            return "-"
        return f"{median([getattr(a, attr) - getattr(b, attr) for a, b in pairs]) / signals * 1e9:.0f}"

    # Spread: the middle half of the per-pair thread-CPU differences, per signal.
    diffs = sorted((a.thread_cpu - b.thread_cpu) / signals * 1e9 for a, b in pairs) if signals else []
    iqr = f"{diffs[len(diffs) // 4]:.0f}..{diffs[3 * len(diffs) // 4]:.0f}" if diffs else "-"
    return [source, MODES[source], str(rate), f"{signals / clock:.0f}", f"{signals / (clock * rate):.3f}",
            per_signal("thread_cpu"), iqr, per_signal("process_cpu")]


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
    parser.add_argument("--pairs", type=int, default=10, help="armed/unarmed chunk pairs per cost run")
    parser.add_argument("--rates", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--sources", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--no-accuracy", action="store_true", help="skip the two-thread accuracy runs")
    parser.add_argument("--json", help="write the raw runs here")
    args = parser.parse_args(argv)
    if shutil.which("gcc") is None:
        print("signal_floor: gcc not found", file=sys.stderr)
        return 2
    configs = [(s, r) for s in args.sources for r in args.rates]
    kinds = ["cost"] if args.no_accuracy else ["cost", "accuracy"]
    chunks: dict[tuple[str, int], list[Chunk]] = {c: [] for c in configs}
    runs: dict[tuple[str, int], list[Run]] = {c: [] for c in configs}
    failures: dict[str, str] = {}
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as workdir:
        exe = build(workdir)
        for _ in range(args.rounds):
            order = [(kind, c) for kind in kinds for c in configs]
            rng.shuffle(order)  # drifting machine load spreads over every configuration alike
            for kind, (source, rate) in order:
                try:
                    if kind == "cost":
                        chunks[(source, rate)] += run_chunked(exe, source, rate, args.loops, args.pairs)
                    else:
                        runs[(source, rate)].append(run_two_threads(exe, source, rate, args.loops))
                except RuntimeError as exc:
                    failures[f"{source} @{rate} {kind}"] = str(exc)
    print(f"Per-signal cost of each timer mechanism (the handler only counts): one busy thread, "
          f"{args.rounds} rounds x {args.pairs} armed/unarmed chunk pairs, medians of per-pair differences\n")
    print(table(["source", "mode", "rate", "delivered/s", "delivered/asked", "ns/signal thread",
                 "thread IQR", "ns/signal process"], [cost_row(s, r, chunks[(s, r)]) for s, r in configs]))
    if "accuracy" in kinds:
        print(f"\nAccuracy with two busy threads (second does half the work), median of {args.rounds} runs: "
              "delivered/expected per thread, share error of the first thread in percentage points\n")
        print(table(["source", "mode", "rate", "thread A", "thread B", "share error pp"],
                    accuracy_rows(runs, configs)))
    print()
    for source in args.sources:
        print(f"{source}: {NOTES[source]}")
    for label, reason in failures.items():
        print(f"FAILED {label}: {reason.splitlines()[-1] if reason else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"chunks": {f"{s}@{r}": [vars(c) for c in v] for (s, r), v in chunks.items()},
                       "two_threads": {f"{s}@{r}": [vars(x) for x in v] for (s, r), v in runs.items()}}, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
