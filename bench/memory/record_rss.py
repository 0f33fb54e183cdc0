"""Extra resident memory of `truestack record`, side by side with a plain run.

    python bench/memory/record_rss.py                  # 1-second script at defaults (target: <= 20 MB extra)
    python bench/memory/record_rss.py --threads 4 --seconds 600   # the 10-minute, 1 kHz, 4-thread run (<= 150 MB)

Both runs execute the same CPU-bound program (`--threads` busy threads for
`--seconds`). The peak is the largest sum over the whole process tree (the
recorder and the program's process), polled every 20 ms, of two measures:
VmRSS, and Pss from /proc/PID/smaps_rollup. The two processes of `record` map
the same interpreter and libraries: RSS counts those shared pages once per
process, PSS divides them among the processes that share them, so PSS is the
memory the machine actually pays and the budget applies to it. The plain run
is measured the same way. Exits 1 over the budget.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from truestack_path import child_env

PROGRAM = """
import sys, threading, time
def busy(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(200))
seconds, threads = float(sys.argv[1]), int(sys.argv[2])
workers = [threading.Thread(target=busy, args=(seconds,)) for _ in range(threads - 1)]
for w in workers:
    w.start()
busy(seconds)
for w in workers:
    w.join()
"""


def field_kb(path: str, name: str) -> int:
    with open(path) as fh:
        return next((int(line.split()[1]) for line in fh if line.startswith(name)), 0)


def tree_memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) summed over pid and its descendants."""
    rss = pss = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            rss += field_kb(f"/proc/{p}/status", "VmRSS:")
            pss += field_kb(f"/proc/{p}/smaps_rollup", "Pss:")
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return rss, pss


def peak_mb(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Peak (RSS, PSS) of the process tree, in MB."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak_rss = peak_pss = 0
    while proc.poll() is None:
        rss, pss = tree_memory_kb(proc.pid)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(0.02)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:4]} exited with {proc.returncode}")
    return peak_rss / 1024, peak_pss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rate", default="1000")
    ap.add_argument("--plain-seconds", type=float, default=None,
                    help="length of the plain run (default: --seconds up to 5; its peak does not grow with time)")
    ap.add_argument("--budget-mb", type=float, default=None, help="default: 20 for a short run, else 150")
    args = ap.parse_args()
    budget = args.budget_mb or (20.0 if args.seconds <= 5 else 150.0)
    env = child_env()
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "prog.py")
        with open(script, "w") as fh:
            fh.write(textwrap.dedent(PROGRAM))
        argv = [script, str(args.seconds), str(args.threads)]
        plain_seconds = args.plain_seconds if args.plain_seconds is not None else min(args.seconds, 5.0)
        plain = peak_mb([sys.executable, script, str(plain_seconds), str(args.threads)], env)
        record = peak_mb([sys.executable, "-m", "truestack", "record", "--rate", args.rate, "-o",
                          os.path.join(tmp, "out.tsp"), *argv], env)
    print(f"{'':28}{'RSS':>9}{'PSS':>9}")
    print(f"{'plain python':28}{plain[0]:8.1f}M{plain[1]:8.1f}M")
    print(f"{'truestack record (2 procs)':28}{record[0]:8.1f}M{record[1]:8.1f}M")
    extra_rss, extra_pss = record[0] - plain[0], record[1] - plain[1]
    print(f"{'extra':28}{extra_rss:8.1f}M{extra_pss:8.1f}M   budget {budget:.0f} MB (PSS)")
    return 0 if extra_pss <= budget else 1


if __name__ == "__main__":
    sys.exit(main())
