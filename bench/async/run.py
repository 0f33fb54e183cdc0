"""`--async` overhead: 10,000 short tasks, plain vs `record` vs `record --async`, cpu and wall mode.

    python bench/async/run.py [--rounds 5] [--rate 1k] [--tasks 10000]

Every round runs every configuration once, in a fresh random order. Two
ratios per configuration, each the median over rounds of (configuration /
plain of the same round): the task part as the program times it itself
(start-up and writing the profile left out) and the whole run as the user
times it (wall clock, and CPU of the process tree from rusage). Then, for the
`--async` runs, the tracker's own CPU time as each profile's note counts it, as
a share of the task part: on this kind of VM the steadier of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "short_tasks.py")


def configurations(rate: str) -> dict[str, list[str]]:
    rec = [sys.executable, "-m", "truestack", "record", "-q", "--rate", rate]
    return {
        "plain": [sys.executable],
        f"record cpu @{rate}": [*rec, "--mode", "cpu", "-o", "{out}"],
        f"record --async cpu @{rate}": [*rec, "--mode", "cpu", "--async", "-o", "{out}"],
        f"record wall @{rate}": [*rec, "--mode", "wall", "-o", "{out}"],
        f"record --async wall @{rate}": [*rec, "--mode", "wall", "--async", "-o", "{out}"],
    }


TRACKER_NOTE = re.compile(r"--async: .* collector spent ([\d.]+) ms CPU on them \(GIL held\), ([\d.]+) ms of it freeing")


def tracker_cost_ms(profile_path: str) -> tuple[float, float] | None:
    """The tracker's CPU time and the part of it spent freeing tasks, from the profile's --async note.

    A steadier figure than the end-to-end ratios: it is the run's own count, not a difference
    between two runs on a VM whose speed moves by tens of percent."""
    from truestack.model import load

    notes = load(profile_path).meta.sampler_stats.notes
    found = next((m for m in map(TRACKER_NOTE.search, notes) if m), None)
    return (float(found.group(1)), float(found.group(2))) if found else None


def run_once(cmd: list[str], tasks: int, out: str) -> dict[str, float]:
    argv = [a.replace("{out}", out) for a in cmd] + [PROGRAM, str(tasks)]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    stdout, _ = proc.communicate()
    elapsed = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(argv)}")
    inner = json.loads(stdout.strip().splitlines()[-1])
    result = {"inner_wall": inner["wall"], "inner_cpu": inner["cpu"], "wall": elapsed}
    if "--async" in cmd:
        cost = tracker_cost_ms(out)
        if cost is None:
            raise SystemExit(f"no --async note in the profile of: {' '.join(argv)}")
        result["tracker_ms"], result["free_ms"] = cost
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rate", default="1k")
    ap.add_argument("--tasks", type=int, default=10_000)
    args = ap.parse_args()
    configs = configurations(args.rate)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.tsp")
        for _ in range(args.rounds):
            order = list(configs)
            random.shuffle(order)
            for name in order:
                before = os.times()
                r = run_once(configs[name], args.tasks, out)
                after = os.times()  # the waited-for process tree (recorder and program)
                r["cpu_total"] = (
                    after.children_user + after.children_system - before.children_user - before.children_system
                )
                results[name].append(r)

    def ratio(name: str, key: str) -> float:
        return statistics.median(r[key] / p[key] for r, p in zip(results[name], results["plain"]))

    plain = results["plain"]
    print(
        f"{args.tasks} short tasks, {args.rounds} interleaved rounds, median ratios to plain "
        f"(plain: task part {statistics.median(r['inner_wall'] for r in plain):.3f} s wall)"
    )
    print("| configuration | task part wall | task part CPU | whole run wall | whole run CPU |")
    print("|---|---:|---:|---:|---:|")
    for name in configs:
        cells = " | ".join(f"{ratio(name, k):.3f}" for k in ("inner_wall", "inner_cpu", "wall", "cpu_total"))
        print(f"| {name} | {cells} |")
    for mode in ("cpu", "wall"):
        runs = results[f"record --async {mode} @{args.rate}"]
        a = statistics.median(r["inner_wall"] for r in runs)
        b = statistics.median(r["inner_wall"] for r in results[f"record {mode} @{args.rate}"])
        print(f"--async vs record without it, {mode} mode, task part wall: {a / b:.3f}")
        share = statistics.median(r["tracker_ms"] / 10 / r["inner_wall"] for r in runs)
        freeing = statistics.median(r["free_ms"] / 10 / r["inner_wall"] for r in runs)
        print(
            f"  the tracker's CPU time (collector, GIL held), median of its runs: "
            f"{statistics.median(r['tracker_ms'] for r in runs):.1f} ms = {share:.2f} % of the task part's wall time, "
            f"{freeing:.2f} % of it freeing finished tasks (the program's own deallocation, moved)"
        )


if __name__ == "__main__":
    main()
