"""Profile every ground-truth workload with every profiler; print one table.

Each cell is the total variation distance (0 = the profile's split of time
over the workload's target functions equals the truth, 1 = disjoint) between
one profiled run and the truth that same run measured for itself, in the
tool's mode (CPU time for cpu-mode tools, wall time for wall-mode tools).

    python bench/accuracy/run.py [--quick] [--tools NAME ...] [--workloads NAME ...]
                                 [--rate HZ] [--duration S] [--details] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from score import parse_collapsed, score
from tools import Tool, child_env, run_tool, select_tools

WORKLOAD_DIR = HERE / "workloads"


def workloads() -> dict[str, Path]:
    return {p.stem: p for p in sorted(WORKLOAD_DIR.glob("*.py")) if not p.name.startswith("_")}


def run_one(tool: Tool, script: Path, rate_hz: int, duration: float, workdir: Path) -> dict:
    """Profile one workload with one tool; return a result record."""
    reason = tool.unavailable(sys.executable)
    if reason:
        return {"status": "not installed", "detail": reason}
    truth_path = workdir / f"{script.stem}.{tool.label}.truth.json"
    out_path = workdir / f"{script.stem}.{tool.label}.out"
    env = child_env(ACCURACY_TRUTH=str(truth_path), ACCURACY_DURATION=str(duration))
    started = time.perf_counter()
    for _attempt in range(2):  # one retry: peers occasionally fail to attach on a loaded machine
        status, err = run_tool(tool, sys.executable, str(script), str(out_path), rate_hz, env,
                               timeout=60 + duration * 20)
        if status == 0 and truth_path.exists() and out_path.exists():
            break
    elapsed = time.perf_counter() - started
    if status != 0 or not truth_path.exists() or not out_path.exists():
        return {"status": "failed", "detail": err or f"exit status {status}, no output", "seconds": elapsed}
    truth = json.loads(truth_path.read_text())
    try:
        stacks = parse_collapsed(tool.collapsed(str(out_path), truth))
    except (ValueError, OSError, KeyError) as exc:
        return {"status": "failed", "detail": f"unreadable output: {exc}", "seconds": elapsed}
    result = score(stacks, truth, tool.mode)
    return {
        "status": "ok" if result.tv is not None else "no samples",
        "tv": result.tv,
        "max_error_pp": result.max_error_pp,
        "rows": result.rows,
        "seconds": elapsed,
        "details": result.format(),
    }


def cell(record: dict) -> str:
    if record["status"] == "ok":
        return f"{record['tv']:.3f}"
    return {"not installed": "not inst.", "no samples": "no samples"}.get(record["status"], "FAILED")


def format_table(results: dict[str, dict[str, dict]], tools: list[Tool], names: list[str]) -> str:
    headers = ["workload", *[f"{t.label}" for t in tools]]
    modes = ["(mode)", *[t.mode for t in tools]]
    rows = [[name, *[cell(results[name][t.label]) for t in tools]] for name in names]
    widths = [max(len(r[i]) for r in [headers, modes, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    out = [line(headers), "|" + "|".join(("-" * (w + 1)) + (":" if i else "-") for i, w in enumerate(widths)) + "|",
           line(modes), *[line(r) for r in rows]]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="accuracy of profilers against measured ground truth")
    parser.add_argument("--quick", action="store_true", help="short runs (CI smoke setting)")
    parser.add_argument("--tools", nargs="+", help="tool labels or families (default: all)")
    parser.add_argument("--workloads", nargs="+", help="workload names (default: all)")
    parser.add_argument("--rate", type=int, default=1000, help="sampling rate in Hz for sampling tools (1000)")
    parser.add_argument("--duration", type=float, help="seconds per workload run (2.0; --quick: 0.3)")
    parser.add_argument("--details", action="store_true", help="also print per-function errors of every run")
    parser.add_argument("--json", help="write all results to this file")
    args = parser.parse_args(argv)

    try:
        tools = select_tools(args.tools)
    except ValueError as exc:
        print(f"run.py: {exc}", file=sys.stderr)
        return 2
    available = workloads()
    names = args.workloads or list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        print(f"run.py: unknown workload(s) {', '.join(unknown)}; choose from {', '.join(available)}", file=sys.stderr)
        return 2
    duration = args.duration if args.duration is not None else (0.3 if args.quick else 2.0)

    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="truestack-accuracy-") as tmp:
        for name in names:
            results[name] = {}
            for tool in tools:
                record = run_one(tool, available[name], args.rate, duration, Path(tmp))
                results[name][tool.label] = record
                if args.details and "details" in record:
                    print(f"[{tool.label}] {record['details']}\n", flush=True)
                elif record["status"] == "failed":
                    print(f"[{tool.label}] {name}: failed: {record['detail']}", file=sys.stderr, flush=True)

    print(f"\nAccuracy: total variation distance vs ground truth measured in the same run "
          f"(0 = exact, 1 = disjoint); Python {platform.python_version()}, "
          f"sampling tools at {args.rate} Hz, {duration:g} s per run\n")
    print(format_table(results, tools, names))
    missing = sorted({t.label for t in tools for n in names if results[n][t.label]["status"] == "not installed"})
    if missing:
        print(f"\nnot installed: {', '.join(missing)}")
    failed = sorted({f"{t.label}/{n}" for t in tools for n in names if results[n][t.label]["status"] == "failed"})
    if failed:
        print(f"failed runs: {', '.join(failed)}")
    if args.json:
        doc = {"python": platform.python_version(), "rate_hz": args.rate, "duration_s": duration,
               "tools": {t.label: {"family": t.family, "mode": t.mode, "engine": t.engine} for t in tools},
               "results": {n: {k: {kk: vv for kk, vv in v.items() if kk != "details"} for k, v in r.items()}
                           for n, r in results.items()}}
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
