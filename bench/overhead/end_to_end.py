"""Overhead as users measure it: `time <profiler> prog.py` vs `time python prog.py`.

Launch to exit, nothing taken out: each workload (scaled so the plain run
takes --seconds, ~2 s) runs plain, under `truestack record` (cpu @100, cpu
@1k, wall @1k; default output format, i.e. the HTML flame graph, into a temp
dir), under `py-spy record` and under `austin` at matching rates (a peer that
is not installed is a column saying so). Rounds visit every configuration in
a fresh random order; each round's run of a configuration is paired with the
same round's plain run. Per workload and configuration: median wall ratio,
its spread over the pairs (min-max), median CPU ratio (child's rusage,
including its waited-for children: py-spy and austin are the parent of the
Python they profile, so both sides are counted).

Then truestack's fixed cost (an empty script: `record -o x.tsp` and the
default HTML output, ms over plain Python) and the per-sample cost split of
`record` at 1 kHz on the first workload, from the profile's sampler stats
and per-thread CPU read by `_e2e_probe.py`.

    python bench/overhead/run.py --end-to-end [--quick] [--long] [--pairs N] [--seconds S]
                                              [--programs NAME ...] [--tools truestack py-spy austin]
                                              [--fixed-pairs N] [--json PATH]
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
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))  # signal_floor, when imported from elsewhere than run.py

from tools import child_env, find_binary, rate_arg
from truestack_path import make_importable

PROBE = HERE / "_e2e_probe.py"
PERF_SETTLE_S = 1.3  # pause before each empty-script run (see measure_fixed_cost)
QUICK_PROGRAMS = ["cpu_bound"]
DEFAULT_PROGRAMS = ["cpu_bound", "acc_straight_line", "acc_threads"]


@dataclass(frozen=True)
class Config:
    label: str
    family: str  # plain | truestack | py-spy | austin
    mode: str = "cpu"
    rate_hz: int = 0

    def argv(self, python: str, script: str, out_dir: Path, output: str = "") -> list[str]:
        """The command a user would type; outputs land in out_dir."""
        if self.family == "plain":
            return [python, script]
        if self.family == "truestack":
            out = out_dir / (output or "profile.html")  # .html: record's default flame graph
            return [*truestack_command(python), "record", "--mode", self.mode, "--rate", rate_arg(self.rate_hz),
                    "-o", str(out), script]
        if self.family == "py-spy":
            idle = ["--idle"] if self.mode == "wall" else []
            return [find_binary("py-spy", python) or "py-spy", "record", "-r", str(self.rate_hz),
                    "-o", str(out_dir / "profile.svg"), *idle, "--", python, script]
        if self.family == "austin":
            sleepless = ["-s"] if self.mode == "cpu" else []
            # -t 3s: austin gives up on an interpreter not up within 100 ms (a loaded machine).
            return [find_binary("austin", python) or "austin", "-i", f"{1_000_000 // self.rate_hz}us", "-t", "3s",
                    *sleepless, "-o", str(out_dir / "profile.austin"), python, script]
        raise ValueError(self.family)

    def unavailable(self, python: str) -> str | None:
        if self.family in ("py-spy", "austin") and find_binary(self.family, python) is None:
            return "not installed"
        return None


CONFIGS = [
    Config("plain", "plain"),
    Config("truestack cpu @100", "truestack", "cpu", 100),
    Config("truestack cpu @1k", "truestack", "cpu", 1000),
    Config("truestack wall @1k", "truestack", "wall", 1000),
    Config("py-spy @100", "py-spy", "cpu", 100),
    Config("py-spy @1k", "py-spy", "cpu", 1000),
    Config("py-spy --idle @1k", "py-spy", "wall", 1000),
    Config("austin -s @100", "austin", "cpu", 100),
    Config("austin -s @1k", "austin", "cpu", 1000),
    Config("austin @1k", "austin", "wall", 1000),
]


def truestack_command(python: str) -> list[str]:
    """`truestack` as users type it when the script is installed next to python; else python -m."""
    script = Path(python).parent / "truestack"
    return [str(script)] if script.exists() else [python, "-m", "truestack"]


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float


def run_child(argv: list[str], env: dict[str, str], cwd: Path) -> Timing:
    """Launch to exit: wall around the child, CPU from its rusage (incl. its waited children)."""
    with open(cwd / "stderr.txt", "w+b") as err_file:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err_file)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            err_file.seek(0)
            raise RuntimeError(f"exit {code}: {err_file.read().decode(errors='replace').strip()[-300:]}")
    return Timing(wall, usage.ru_utime + usage.ru_stime)


def workload_env(program, scale: int, workdir: Path) -> dict[str, str]:
    # program: run.Program (not imported: run.py imports this module)
    return program.environ(scale, workdir)


def calibrate(program, seconds: float, workdir: Path) -> int:
    """Scale at which the plain run takes about `seconds` launch to exit."""
    argv = [sys.executable, str(program.script)]
    start_up = min(run_child(argv, workload_env(program, 0, workdir), workdir).wall for _ in range(2))
    scale = 1
    while True:
        # min of two: load from other jobs only ever adds time, and one slow
        # run here mis-scales every run after it (seen: 0.7 s and 5.4 s for 2 s asked).
        t = min(run_child(argv, workload_env(program, scale, workdir), workdir).wall for _ in range(2)) - start_up
        if t >= min(seconds, 2.0) / 4 or scale >= 1 << 22:
            return max(1, round(scale * (seconds - start_up) / max(t, 1e-3)))
        scale *= 4


def interleave(configs: list[Config], rounds: int, run, rng: random.Random) -> dict[str, list[Timing | None]]:
    """rounds x every config in a fresh random order; a failed run is None (kept, so pairs stay aligned)."""
    out: dict[str, list[Timing | None]] = {c.label: [] for c in configs}
    for _ in range(rounds):
        order = list(configs)
        rng.shuffle(order)
        for config in order:
            out[config.label].append(run_twice(run, config))
    return out


def run_twice(run, config: Config) -> Timing | None:
    # austin now and then fails to find the interpreter in a child started on
    # a loaded machine; one failure is the peer's luck, two are reported.
    for attempt in range(2):
        try:
            return run(config)
        except RuntimeError as exc:
            print(f"  {config.label}{' (retried)' if attempt else ''}: {exc}", file=sys.stderr)
    return None


def pair_ratios(runs: list[Timing | None], plain: list[Timing | None], attr: str) -> list[float]:
    return [getattr(r, attr) / getattr(p, attr) for r, p in zip(runs, plain) if r is not None and p is not None]


def ratio_cell(ratios: list[float]) -> str:
    if not ratios:
        return "failed"
    return f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]"


def format_table(headers: list[str], rows: list[list[str]], left: int = 2) -> str:
    """Markdown table; the first `left` columns are names (left-aligned), the rest numbers."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    sep = "|" + "|".join("-" * (w + 1) + ("-" if i < left else ":") for i, w in enumerate(widths)) + "|"
    return "\n".join([line(headers), sep, *[line(r) for r in rows]])


# -- the three measurements -------------------------------------------------------------------------

def measure_workloads(programs: list, configs: list[Config], skipped: dict[str, str], pairs: int, seconds: float,
                      workdir: Path, rng: random.Random) -> tuple[list[list[str]], dict]:
    rows: list[list[str]] = []
    raw: dict = {}
    live = [c for c in configs if c.label not in skipped]
    for program in programs:
        scale = calibrate(program, seconds, workdir)
        env = workload_env(program, scale, workdir)
        script = str(program.script)
        runs = interleave(live, pairs, lambda c, script=script, env=env: run_child(
            c.argv(sys.executable, script, workdir), env, workdir), rng)
        plain = runs["plain"]
        base = statistics.median([t.wall for t in plain if t]) if any(plain) else float("nan")
        raw[program.name] = {"scale": scale, "runs": {k: [vars(t) if t else None for t in v] for k, v in runs.items()}}
        for config in configs:
            if config.family == "plain":
                rows.append([program.name, f"plain ({base:.2f} s)", "1.000", "1.000"])
            elif config.label in skipped:
                rows.append([program.name, config.label, skipped[config.label], "-"])
            else:
                rows.append([program.name, config.label, ratio_cell(pair_ratios(runs[config.label], plain, "wall")),
                             ratio_cell(pair_ratios(runs[config.label], plain, "cpu"))])
        print(f"... {program.name} done (scale {scale}, plain {base:.2f} s)", file=sys.stderr, flush=True)
    return rows, raw


def measure_fixed_cost(pairs: int, workdir: Path, rng: random.Random) -> tuple[list[list[str]], dict]:
    """An empty script: what `record` costs before and after the program runs."""
    empty = workdir / "empty.py"
    empty.write_text("")
    configs = [Config("plain", "plain"), Config("record -o x.tsp", "truestack", "cpu", 100),
               Config("record (default .html)", "truestack", "cpu", 100)]
    outputs = {"record -o x.tsp": "x.tsp", "record (default .html)": ""}
    env = child_env()

    def run(config: Config) -> Timing:
        # The first task-bound perf event of a perf-idle system costs 6-12 ms of kernel set-up, and the
        # kernel keeps it ~1 s after the last event closes: back to back, a run would skip what a
        # user's single run pays. A pause before each run makes every run a first one.
        time.sleep(PERF_SETTLE_S)
        return run_child(config.argv(sys.executable, str(empty), workdir, outputs.get(config.label, "")), env, workdir)

    runs = interleave(configs, pairs, run, rng)
    rows = []
    for config in configs[1:]:
        walls = [(r.wall - p.wall) * 1000 for r, p in zip(runs[config.label], runs["plain"]) if r and p]
        cpus = [(r.cpu - p.cpu) * 1000 for r, p in zip(runs[config.label], runs["plain"]) if r and p]
        if not walls:
            rows.append([config.label, "failed", "-", "-"])
            continue
        rows.append([config.label, f"{statistics.median(walls):.0f}", f"{min(walls):.0f}-{max(walls):.0f}",
                     f"{statistics.median(cpus):.0f}"])
    plain_ms = statistics.median([t.wall for t in runs["plain"] if t]) * 1000 if any(runs["plain"]) else float("nan")
    return rows, {"plain_ms": plain_ms, "runs": {k: [vars(t) if t else None for t in v] for k, v in runs.items()}}


def measure_split(program, seconds: float, pairs: int, workdir: Path, rng: random.Random,
                  floor: dict[str, str]) -> tuple[list[list[str]], dict]:
    """Per-sample cost of record at 1 kHz, split by where it is spent.

    kernel delivery: signal_floor's measurement on this machine (`floor`), the
    core's own estimate (`signal_delivery_ns`, calibrated
    at start with self-sent signals, floor 10 us) and, independently, the main
    thread's extra CPU per signal minus the handler's share; handler: the
    core's `handler_ns` / signals; collector: the truestack-collector thread's
    CPU / samples; other threads: the native control thread (wall ticks,
    CPU budget); supervisor: the `record` parent process receiving the
    streamed profile; total: the extra CPU of all of these over the workload
    / samples (start-up and shutdown excluded: they are the fixed cost).
    """
    # At least ~1 s: the collector drains every 50 ms and a busy machine
    # shrinks a calibrated workload (its start-up measured slow).
    make_importable()
    from truestack.model import load  # the bench interpreter's truestack, the one being measured

    scale = calibrate(program, seconds, workdir)
    configs = [Config("plain", "plain"), Config("cpu @1k", "truestack", "cpu", 1000),
               Config("wall @1k", "truestack", "wall", 1000)]
    probes: dict[str, list[dict]] = {c.label: [] for c in configs}

    def run(config: Config) -> Timing:
        probe_out = workdir / "probe.json"
        env = {**workload_env(program, scale, workdir), "E2E_TARGET": str(program.script),
               "E2E_PROBE_OUT": str(probe_out)}
        timing = run_child(config.argv(sys.executable, str(PROBE), workdir, "split.tsp"), env, workdir)
        probe = json.loads(probe_out.read_text())
        probe["cpu_s"] = timing.cpu  # launch to exit, for the record; the split uses the probe's deltas
        if config.family == "truestack":
            stats = load(str(workdir / "split.tsp")).meta.sampler_stats
            probe.update(samples=stats.samples, timer=stats.timer, **{k: stats.extra.get(k, 0) for k in (
                "signals", "handler_ns", "signal_delivery_ns", "remote_samples")})
        probes[config.label].append(probe)
        return timing

    interleave(configs, pairs, run, rng)
    plain_main = statistics.median([p["main_ns"] for p in probes["plain"]])
    plain_workload = statistics.median([workload_ns(p) for p in probes["plain"]])
    plain_parent = statistics.median([p["parent_ns"] for p in probes["plain"]])  # the bench, waiting: ~0
    rows = []
    for config in configs[1:]:
        got = probes[config.label]

        def per(values: list[float], counts: list[float]) -> str:
            ok = [v / n for v, n in zip(values, counts) if n]
            return f"{statistics.median(ok) / 1000:.1f}" if ok else "-"

        signals = [p["signals"] for p in got]
        samples = [p["samples"] for p in got]
        handler = per([p["handler_ns"] for p in got], signals)
        delivered = per([p["main_ns"] - plain_main - p["handler_ns"] for p in got], signals)
        rows.append([config.label, got[0]["timer"] if got else "-", f"{statistics.median(samples):.0f}",
                     f"{statistics.median([p['signal_delivery_ns'] for p in got]) / 1000:.1f}", floor[config.mode],
                     delivered, handler,
                     per([p["collector_ns"] for p in got], samples), per([p["other_ns"] for p in got], samples),
                     per([p["parent_ns"] - plain_parent for p in got], samples),
                     per([workload_ns(p) + p["parent_ns"] - plain_workload - plain_parent for p in got], samples)])
    return rows, {"program": program.name, "scale": scale, "probes": probes}


def floor_delivery(quick: bool) -> dict[str, str]:
    """Kernel cost per signal on the signalled thread, µs, from signal_floor's chunked runs at 10 kHz
    (the rate that resolves it best): perf for cpu mode, tgkill for wall mode. "-" without gcc."""
    import shutil

    import signal_floor  # beside this file

    if shutil.which("gcc") is None:
        return {"cpu": "-", "wall": "-"}
    runs, loops = (1, 30_000_000) if quick else (3, 100_000_000)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        exe = signal_floor.build(tmp)
        for mode, source in (("cpu", "perf"), ("wall", "tgkill")):
            try:
                chunks = [c for _ in range(runs) for c in signal_floor.run_chunked(exe, source, 10000, loops, 10)]
            except RuntimeError:
                out[mode] = "-"
                continue
            row = signal_floor.cost_row(source, 10000, chunks)
            out[mode] = f"{float(row[5]) / 1000:.1f}" if row[5].lstrip("-").isdigit() else "-"
    return out


def workload_ns(probe: dict) -> int:
    """CPU of every thread over the workload (start-up and shutdown excluded)."""
    return probe["main_ns"] + probe["collector_ns"] + probe["other_ns"]


# -- entry point ------------------------------------------------------------------------------------

def main(argv: list[str] | None, programs: dict) -> int:
    parser = argparse.ArgumentParser(prog="run.py --end-to-end", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--end-to-end", action="store_true")
    parser.add_argument("--quick", action="store_true", help="CI smoke setting: cpu_bound, 0.3 s, 2 pairs")
    parser.add_argument("--long", action="store_true", help="~20 s programs (the 20-second target)")
    parser.add_argument("--programs", nargs="+", help=f"default {' '.join(DEFAULT_PROGRAMS)}")
    parser.add_argument("--pairs", type=int, help="interleaved rounds (default 5; --quick 2)")
    parser.add_argument("--fixed-pairs", type=int, help="rounds of the empty-script runs (default 15; --quick 3)")
    parser.add_argument("--seconds", type=float, help="plain run, launch to exit (default 2; --long 20)")
    parser.add_argument("--tools", nargs="+", choices=["truestack", "py-spy", "austin"],
                        help="profilers to compare (default: all three; plain always runs)")
    parser.add_argument("--json", help="write raw timings here")
    args = parser.parse_args(argv)
    configs = [c for c in CONFIGS if c.family == "plain" or c.family in (args.tools or [c.family])]
    names = args.programs or (QUICK_PROGRAMS if args.quick else DEFAULT_PROGRAMS)
    unknown = [n for n in names if n not in programs]
    if unknown:
        print(f"run.py: unknown program(s) {', '.join(unknown)}; choose from {', '.join(programs)}", file=sys.stderr)
        return 2
    pairs = args.pairs or (2 if args.quick else 5)
    fixed_pairs = args.fixed_pairs or (3 if args.quick else 15)
    seconds = args.seconds or (0.3 if args.quick else 20.0 if args.long else 2.0)
    skipped = {c.label: r for c in configs if (r := c.unavailable(sys.executable))}
    rng = random.Random(1)
    report: dict = {"python": platform.python_version(), "pairs": pairs, "seconds": seconds,
                    "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    with tempfile.TemporaryDirectory(prefix="truestack-e2e-") as tmp:
        workdir = Path(tmp)
        rows, report["workloads"] = measure_workloads([programs[n] for n in names], configs, skipped, pairs,
                                                      seconds, workdir, rng)
        fixed_rows, report["fixed"] = measure_fixed_cost(fixed_pairs, workdir, rng)
        floor = floor_delivery(args.quick)
        split_rows, report["split"] = measure_split(programs[names[0]], min(max(seconds, 1.0), 2.0), pairs,
                                                    workdir, rng, floor)
    print(f"\nEnd-to-end overhead (launch to exit), profiled / plain, median [min-max] of {pairs} interleaved pairs; "
          f"Python {platform.python_version()}; ~{seconds:g} s plain; {report['started']}\n")
    print(format_table(["workload", "configuration", "wall ratio", "CPU ratio"], rows))
    print(f"\nFixed cost of `truestack record` on an empty script, {fixed_pairs} interleaved pairs "
          f"(plain python {report['fixed']['plain_ms']:.0f} ms)\n")
    print(format_table(["command", "wall ms over plain", "spread ms", "CPU ms over plain"], fixed_rows, left=1))
    print(f"\nPer-sample cost split, µs, record at 1 kHz on {names[0]} (medians of {pairs} interleaved runs)\n")
    print(format_table(["config", "timer", "samples", "delivery (core est.)", "delivery (signal_floor)",
                        "delivery (measured)", "handler",
                        "collector", "other threads", "supervisor", "total per sample"], split_rows))
    for label, reason in skipped.items():
        print(f"{label}: {reason}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0
