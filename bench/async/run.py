"""`--async` overhead: 10,000 short tasks, plain vs `record` vs `record --async`, cpu and wall mode.

    python bench/async/run.py [--rounds 5] [--rate 1k] [--tasks 10000]

Every round runs every configuration once, in a fresh random order. Two
ratios per configuration, each the median over rounds of (configuration /
plain of the same round): the task part as the program times it itself
(start-up and writing the profile left out) and the whole run as the user
times it (wall clock, and CPU of the process tree from rusage).
"""

from __future__ import annotations

import argparse
import json
import os
import random
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


def run_once(cmd: list[str], tasks: int, out: str) -> dict[str, float]:
    argv = [a.replace("{out}", out) for a in cmd] + [PROGRAM, str(tasks)]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    stdout, _ = proc.communicate()
    elapsed = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"failed: {' '.join(argv)}")
    inner = json.loads(stdout.strip().splitlines()[-1])
    return {"inner_wall": inner["wall"], "inner_cpu": inner["cpu"], "wall": elapsed}


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
        a = statistics.median(r["inner_wall"] for r in results[f"record --async {mode} @{args.rate}"])
        b = statistics.median(r["inner_wall"] for r in results[f"record {mode} @{args.rate}"])
        print(f"--async vs record without it, {mode} mode, task part wall: {a / b:.3f}")


if __name__ == "__main__":
    main()
