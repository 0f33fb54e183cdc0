"""Slowdown of programs under each profiler: wall and CPU time, profiled vs not.

For every program, each configuration (unprofiled baseline, truestack at
100 Hz / 1 kHz / 10 kHz in cpu and wall mode, the peers at the same rates,
the tracing peers once) is run REPS times, interleaved (one round visits every
configuration in a fresh random order), as a child process: wall time around
the child, CPU time from its rusage (os.wait4; user + system, including any
sampler process a tool runs, since out-of-process samplers spend CPU too).

Start-up is taken out: every configuration also runs the same program with
1/16 of the work (same imports, same profiler start-up and shutdown; not
zero work, because out-of-process samplers fail on a child that exits before
they attach). With S the full and s the short amount of work, the slope
k = (median T(S) - median T(s)) / (S - s) is the per-unit cost, and the ratio
k_tool / k_baseline is the steady-state slowdown. The intercept difference
T_tool(S) - k_tool*S - (T_base(S) - k_base*S) is the start-up cost, printed
separately.

    python bench/overhead/run.py [--quick] [--tools NAME ...] [--programs NAME ...]
                                 [--rates 100 1000 10000] [--reps N] [--seconds S] [--json PATH]

`--end-to-end` measures instead what users measure, launch to exit with
start-up left in, side by side with py-spy and austin (see end_to_end.py):

    python bench/overhead/run.py --end-to-end [--quick] [--long] [--pairs N] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ACCURACY = HERE.parent / "accuracy"
sys.path.insert(0, str(ACCURACY))

from tools import Tool, child_env, select_tools

PYPERF_BMS = ["nbody", "richards", "json_dumps", "float"]
DEFAULT_TOOLS = ["ts-native-cpu", "ts-native-wall", "py-spy", "austin", "pyinstrument", "yappi-cpu", "cProfile"]


class NotInstalled(RuntimeError):
    pass


@dataclass(frozen=True)
class Program:
    name: str
    script: Path
    scale_var: str  # env var holding the amount of work
    env: tuple[tuple[str, str], ...] = ()

    def environ(self, scale: int, workdir: Path) -> dict[str, str]:
        return child_env(**dict(self.env), **{self.scale_var: str(scale)},
                         ACCURACY_TRUTH=str(workdir / f"{self.name}.truth.json"))


def programs() -> dict[str, Program]:
    found = {"cpu_bound": Program("cpu_bound", HERE / "programs" / "cpu_bound.py", "OVERHEAD_SCALE")}
    for bm in PYPERF_BMS:
        found[f"pyperf_{bm}"] = Program(f"pyperf_{bm}", HERE / "programs" / "pyperformance_bm.py",
                                        "OVERHEAD_SCALE", (("OVERHEAD_BM", bm),))
    for path in sorted((ACCURACY / "workloads").glob("*.py")):
        if not path.name.startswith("_"):
            found[f"acc_{path.stem}"] = Program(f"acc_{path.stem}", path, "ACCURACY_ROUNDS")
    return found


@dataclass(frozen=True)
class Config:
    tool: Tool | None  # None: unprofiled
    rate_hz: int

    @property
    def label(self) -> str:
        if self.tool is None:
            # A second unprofiled configuration (A/A control): its "slowdown"
            # is the noise floor of the machine at the time of the run.
            return "baseline" if self.rate_hz == 0 else "unprofiled (A/A noise)"
        return f"{self.tool.label} @{_rate(self.rate_hz)}" if self.tool.sampling else self.tool.label


def _rate(hz: int) -> str:
    return f"{hz // 1000}k" if hz >= 1000 else str(hz)


def measure(config: Config, program: Program, scale: int, workdir: Path) -> tuple[float, float]:
    """Run once; return (wall seconds, CPU seconds of the child and its waited-for children)."""
    python = sys.executable
    out = str(workdir / "profile.out")
    argv = [python, str(program.script)] if config.tool is None else \
        config.tool.argv(python, str(program.script), out, config.rate_hz)
    # stderr to a file, not a pipe: nobody reads a pipe while we sit in wait4.
    with open(workdir / "stderr.txt", "w+b") as err_file:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=program.environ(scale, workdir), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err_file)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err_file.seek(0)
        err = err_file.read().decode(errors="replace").strip()
    if proc.returncode == 3 and "pyperformance is not installed" in err:
        raise NotInstalled("pyperformance not installed")
    if proc.returncode != 0:
        raise RuntimeError(f"{config.label} on {program.name} exited {proc.returncode}: {err[-300:]}")
    return wall, usage.ru_utime + usage.ru_stime


def calibrate(program: Program, seconds: float, workdir: Path) -> int:
    """Scale such that the unprofiled work (start-up excluded) takes about `seconds`."""
    base = Config(None, 0)
    zero = min(measure(base, program, 0, workdir)[0] for _ in range(2))
    scale = 1
    while True:
        t = measure(base, program, scale, workdir)[0] - zero
        if t >= seconds / 4 or scale >= 1 << 20:
            return max(1, round(scale * seconds / max(t, 1e-3)))
        scale *= 4


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--end-to-end" in argv:
        import end_to_end  # beside this file; its own options

        return end_to_end.main(argv, programs())
    parser = argparse.ArgumentParser(description="profiler overhead: slowdown ratios vs unprofiled")
    parser.add_argument("--quick", action="store_true", help="1 rep, short programs (CI smoke setting)")
    parser.add_argument("--tools", nargs="+", help=f"tool labels or families (default: {' '.join(DEFAULT_TOOLS)})")
    parser.add_argument("--programs", nargs="+", help="program names (default: all; --quick: cpu_bound, acc_straight_line)")
    parser.add_argument("--rates", nargs="+", type=int, help="sampling rates in Hz (default 100 1000 10000)")
    parser.add_argument("--reps", type=int, help="interleaved rounds (default 5; --quick: 1)")
    parser.add_argument("--seconds", type=float, help="unprofiled work per run (default 1.0; --quick: 0.6)")
    parser.add_argument("--stat", choices=sorted(STATS), default="median",
                        help="per-configuration statistic over rounds (median; min resists bursty load from "
                             "other processes, which only ever adds time)")
    parser.add_argument("--json", help="write raw timings and ratios to this file")
    args = parser.parse_args(argv)
    global STAT
    STAT = args.stat

    try:
        tools = select_tools(args.tools or DEFAULT_TOOLS)
    except ValueError as exc:
        print(f"run.py: {exc}", file=sys.stderr)
        return 2
    known = programs()
    names = args.programs or (["cpu_bound", "acc_straight_line"] if args.quick else list(known))
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"run.py: unknown program(s) {', '.join(unknown)}; choose from {', '.join(known)}", file=sys.stderr)
        return 2
    rates = args.rates or [100, 1000, 10000]
    reps = args.reps or (1 if args.quick else 5)
    seconds = args.seconds or (0.6 if args.quick else 1.5)

    configs = [Config(None, 0), Config(None, 1)]
    skipped: dict[str, str] = {}
    for tool in tools:
        reason = tool.unavailable(sys.executable)
        if reason:
            skipped[tool.label] = reason
            continue
        configs += [Config(tool, r) for r in rates] if tool.sampling else [Config(tool, 0)]

    # timings[program][config label] = {"work": [(wall, cpu)], "short": [(wall, cpu)]}
    timings: dict[str, dict[str, dict[str, list[tuple[float, float]]]]] = {}
    failures: dict[str, dict[str, str]] = {}
    scales: dict[str, int] = {}
    rng = random.Random(1)
    with tempfile.TemporaryDirectory(prefix="truestack-overhead-") as tmp:
        workdir = Path(tmp)
        for name in names:
            program = known[name]
            try:
                scales[name] = calibrate(program, seconds, workdir)
            except NotInstalled as exc:
                skipped[name] = str(exc)
                continue
            except RuntimeError as exc:
                failures[name] = {"baseline": str(exc)}
                continue
            timings[name] = {c.label: {"work": [], "short": []} for c in configs}
            failures[name] = {}
            for _ in range(reps):
                order = [(c, kind) for c in configs for kind in ("work", "short")]
                rng.shuffle(order)
                for config, kind in order:
                    if config.label in failures[name]:
                        continue
                    amount = scales[name] if kind == "work" else short_scale(scales[name])
                    for attempt in range(2):  # peers occasionally fail to attach on a loaded machine
                        try:
                            timings[name][config.label][kind].append(measure(config, program, amount, workdir))
                            break
                        except RuntimeError as exc:
                            if attempt:
                                failures[name][config.label] = str(exc)
            print(f"... {name} done (scale {scales[name]})", file=sys.stderr, flush=True)

    ratios = compute_ratios(timings, failures, scales)
    print(f"\nOverhead: steady-state slowdown (profiled / unprofiled, start-up excluded), {STAT} of {reps} "
          f"interleaved runs; Python {platform.python_version()}; ~{seconds:g} s of work per run\n")
    columns = [n for n in names if n in timings]
    print("Wall-time ratio:\n")
    print(format_table(ratios, configs, columns, 0))
    print("\nCPU-time ratio (child rusage, incl. any sampler process):\n")
    print(format_table(ratios, configs, columns, 1))
    print("\nStart-up + shutdown cost, ms wall (intercept vs baseline):\n")
    print(format_table(ratios, configs, columns, 2))
    for label, reason in skipped.items():
        print(f"{label}: {reason}")
    for name, by_config in failures.items():
        for label, reason in by_config.items():
            print(f"FAILED {label} on {name}: {reason.splitlines()[-1] if reason else ''}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "python": platform.python_version(), "stat": STAT, "reps": reps, "seconds": seconds, "scales": scales,
            "timings": timings, "ratios": {p: {c: list(v) for c, v in r.items()} for p, r in ratios.items()},
            "skipped": skipped, "failures": failures}, indent=1))
    return 0


def short_scale(scale: int) -> int:
    # Small, so the slope's denominator S - s stays close to S and the noise of
    # the long run is not amplified; big enough for py-spy/austin to attach.
    return max(1, scale // 16)


STATS = {"median": statistics.median, "min": min}
STAT = "median"


def _line(t: dict[str, list[tuple[float, float]]], big: int, small: int, i: int) -> tuple[float, float]:
    """(slope per unit of work, intercept) of the median (or min) timings, component i."""
    stat = STATS[STAT]
    hi = stat([x[i] for x in t["work"]])
    lo = stat([x[i] for x in t["short"]])
    slope = (hi - lo) / max(big - small, 1)
    return slope, hi - slope * big


def compute_ratios(timings, failures, scales) -> dict[str, dict[str, tuple[float, float, float]]]:
    """program -> config -> (wall ratio, cpu ratio, start-up ms); NaN when not measured."""
    out: dict[str, dict[str, tuple[float, float, float]]] = {}
    for name, by_config in timings.items():
        big = scales[name]
        small = short_scale(big)
        base = by_config["baseline"]
        if not base["work"] or not base["short"] or big == small:
            continue
        b_wall, b_cpu = _line(base, big, small, 0), _line(base, big, small, 1)
        out[name] = {}
        for label, t in by_config.items():
            if not t["work"] or not t["short"] or label in failures.get(name, {}):
                out[name][label] = (float("nan"),) * 3
                continue
            wall, cpu = _line(t, big, small, 0), _line(t, big, small, 1)
            out[name][label] = (wall[0] / max(b_wall[0], 1e-12), cpu[0] / max(b_cpu[0], 1e-12),
                                (wall[1] - b_wall[1]) * 1000)
    return out


def format_table(ratios, configs: list[Config], columns: list[str], index: int) -> str:
    headers = ["profiler", *columns]
    rows = []
    for config in configs:
        if index < 2 and config.label == "baseline":
            continue
        cells = [config.label]
        for name in columns:
            value = ratios.get(name, {}).get(config.label, (float("nan"),) * 3)[index]
            cells.append("-" if value != value else (f"{value:.0f}" if index == 2 else f"{value:.3f}"))
        rows.append(cells)
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    sep = "|" + "|".join(("-" * (w + 1)) + (":" if i else "-") for i, w in enumerate(widths)) + "|"
    return "\n".join([line(headers), sep, *[line(r) for r in rows]])


if __name__ == "__main__":
    sys.exit(main())
