"""How each profiler is driven and how its output becomes collapsed stacks.

Shared by bench/accuracy/run.py and bench/overhead/run.py. Every tool runs the
workload as a child process of the interpreter running the bench; peers are
looked up next to that interpreter first (a venv's bin/), then on PATH.
"""
from __future__ import annotations

import json
import pstats
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
from truestack_path import child_env


def find_binary(name: str, python: str) -> str | None:
    beside = Path(python).parent / name
    if beside.exists():
        return str(beside)
    return shutil.which(name)


def rate_arg(rate_hz: int) -> str:
    return f"{rate_hz // 1000}k" if rate_hz >= 1000 and rate_hz % 1000 == 0 else str(rate_hz)


@dataclass(frozen=True)
class Tool:
    label: str  # column name in the tables
    family: str  # truestack | py-spy | austin | pyinstrument | yappi | cProfile
    mode: str  # which truth it is scored against: cpu | wall
    sampling: bool = True  # False for tracing profilers (no rate)
    engine: str = ""  # truestack engine
    options: tuple[str, ...] = ()  # more truestack record options (--native)

    # -- availability ----------------------------------------------------
    def unavailable(self, python: str) -> str | None:
        """None when the tool can run, else a short reason ("not installed")."""
        return _availability(self.family, self.engine, python, self.options)

    # -- command line ------------------------------------------------------
    def argv(self, python: str, script: str, out: str, rate_hz: int) -> list[str]:
        f = self.family
        if f == "truestack":
            # Wall mode must count sleeping/blocked threads too (record leaves them out by default).
            idle = ["--include-idle"] if self.mode == "wall" else []
            return [python, "-m", "truestack", "record", "--engine", self.engine, "--mode", self.mode,
                    "--rate", rate_arg(rate_hz), *idle, *self.options, "-f", "collapsed", "-o", out, "-q", script]
        if f == "py-spy":
            idle = ["--idle"] if self.mode == "wall" else []
            return [find_binary("py-spy", python) or "py-spy", "record", "-r", str(rate_hz), "-f", "raw",
                    "-o", out, *idle, "--", python, script]
        if f == "austin":
            sleepless = ["-s"] if self.mode == "cpu" else []
            # -t: austin gives up if the interpreter is not up within 100 ms,
            # which happens on a loaded 2-core machine.
            return [find_binary("austin", python) or "austin", "-i", f"{max(1, 1_000_000 // rate_hz)}us",
                    "-t", "3s", *sleepless, "-o", out, python, script]
        if f == "pyinstrument":
            return [python, "-m", "pyinstrument", "-i", f"{1.0 / rate_hz:g}", "-r", "json", "-o", out, script]
        if f == "yappi":
            return [python, "-m", "yappi", "-c", self.mode, "-f", "pstat", "-o", out, script]
        if f == "cProfile":
            return [python, "-m", "cProfile", "-o", out, script]
        raise ValueError(f"unknown tool family {f}")

    # -- output ----------------------------------------------------------
    def collapsed(self, out: str, truth: dict | None) -> str:
        f = self.family
        if f in ("truestack", "py-spy"):
            return Path(out).read_text()
        if f == "austin":
            return austin_to_collapsed(Path(out).read_text())
        if f == "pyinstrument":
            return pyinstrument_to_collapsed(json.loads(Path(out).read_text()))
        if f in ("yappi", "cProfile"):
            if truth is None:
                raise ValueError("tracing profiles are reduced to targets: truth needed")
            return pstats_to_collapsed(out, truth)
        raise ValueError(f"unknown tool family {f}")


ALL_TOOLS = [
    Tool("ts-native-cpu", "truestack", "cpu", engine="native"),
    Tool("ts-native-wall", "truestack", "wall", engine="native"),
    Tool("ts-native-cpu+c", "truestack", "cpu", engine="native", options=("--native",)),
    Tool("ts-safept-cpu", "truestack", "cpu", engine="safepoint"),
    Tool("ts-safept-wall", "truestack", "wall", engine="safepoint"),
    Tool("py-spy", "py-spy", "cpu"),
    Tool("py-spy-idle", "py-spy", "wall"),
    Tool("austin-s", "austin", "cpu"),
    Tool("austin", "austin", "wall"),
    Tool("pyinstrument", "pyinstrument", "wall"),
    Tool("yappi-cpu", "yappi", "cpu", sampling=False),
    Tool("yappi-wall", "yappi", "wall", sampling=False),
    Tool("cProfile", "cProfile", "wall", sampling=False),
]

FAMILIES = sorted({t.family for t in ALL_TOOLS})


def select_tools(names: list[str] | None) -> list[Tool]:
    """Pick tools by label or family name ("truestack" selects all four)."""
    if not names:
        return list(ALL_TOOLS)
    labels = {t.label for t in ALL_TOOLS}
    # A name that is a label picks that configuration only ("py-spy" is both a
    # label and a family: it means the cpu-like default, not --idle too).
    chosen = [t for t in ALL_TOOLS if t.label in names or (t.family in names and t.family not in labels)]
    unknown = [n for n in names if not any(n in (t.label, t.family) for t in ALL_TOOLS)]
    if unknown:
        raise ValueError(f"unknown tool(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(sorted(set(FAMILIES) | {t.label for t in ALL_TOOLS}))}")
    return chosen


_AVAIL_CACHE: dict[tuple[str, str, str], str | None] = {}


def _availability(family: str, engine: str, python: str, options: tuple[str, ...] = ()) -> str | None:
    if "--native" in options:
        check = "import sys, truestack._native as n; sys.exit(0 if n.NATIVE_UNWIND else 1)"
        if subprocess.run([python, "-c", check], capture_output=True).returncode != 0:
            return "not built with libunwind (--native)"
    key = (family, engine, python)
    if key not in _AVAIL_CACHE:
        _AVAIL_CACHE[key] = _check(family, engine, python)
    return _AVAIL_CACHE[key]


def _check(family: str, engine: str, python: str) -> str | None:
    def runs(argv: list[str]) -> bool:
        try:
            return subprocess.run(argv, capture_output=True, timeout=60, env=child_env()).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    if family == "truestack":
        if not runs([python, "-m", "truestack", "record", "--help"]):
            return "not installed"
        if engine == "native" and not runs([python, "-c", "import truestack._native, truestack.engines.native"]):
            return "not installed (no native extension)"
        return None
    if family in ("py-spy", "austin"):
        return None if find_binary(family, python) else "not installed"
    module = {"pyinstrument": "pyinstrument", "yappi": "yappi", "cProfile": "cProfile"}[family]
    return None if runs([python, "-c", f"import {module}"]) else "not installed"


# -- converters ------------------------------------------------------------

_AUSTIN_FRAME = re.compile(r"^(?P<path>.*):(?P<name>[^:]+):(?P<line>\d+)$")


def austin_to_collapsed(text: str) -> str:
    """Austin 3 lines: `P<pid>;T<iid>:<tid>;path:function:line;... METRIC`."""
    out: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        stack, _, metric = line.rpartition(" ")
        try:
            weight = float(metric.split(",")[0])
        except ValueError:
            continue
        frames = []
        for part in stack.split(";"):
            m = _AUSTIN_FRAME.match(part)
            if m is None:  # P<pid>, T<tid> and anything unparseable
                continue
            frames.append(f"{m.group('name')} ({m.group('path')}:{m.group('line')})")
        if frames:
            out[";".join(frames)] += weight
    return "".join(f"{stack} {weight:g}\n" for stack, weight in out.items())


def pyinstrument_to_collapsed(doc: dict) -> str:
    """pyinstrument's JSON is a call tree with inclusive seconds per node;
    each node's self time becomes one collapsed line (in microseconds)."""
    out: dict[str, float] = defaultdict(float)
    root = doc.get("root_frame")
    stack = [(root, [])] if root else []
    while stack:
        node, path = stack.pop()
        frame = f"{node.get('function', '?')} ({node.get('file_path', '?')}:{node.get('line_no', 0)})"
        here = [*path, frame]
        children = node.get("children") or []
        own = float(node.get("time", 0.0)) - sum(float(c.get("time", 0.0)) for c in children)
        if own > 0:
            out[";".join(here)] += own * 1e6
        stack.extend((c, here) for c in children)
    return "".join(f"{s} {w:.0f}\n" for s, w in out.items() if w >= 0.5)


def pstats_to_collapsed(path: str, truth: dict) -> str:
    """Reduce a tracing profile to the targets, in collapsed form.

    Tracing profilers give inclusive time (ct) per function and per caller
    edge, not stacks. Each target T becomes one line weighted by its ct minus
    the ct of targets nested in it (found by walking callers up to the
    nearest target, through builtins like next()); the region's time outside
    top-level targets of the region thread becomes the "(other)" line.
    Weights are in microseconds.
    """
    stats = pstats.Stats(path).stats  # type: ignore[attr-defined]
    targets = set(truth["targets"])
    region = truth.get("region", "measured_region")

    def short(key: tuple) -> str:
        return str(key[2]).rsplit(".", 1)[-1]

    ct: dict[str, float] = defaultdict(float)
    nested_in: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for key, (_cc, _nc, _tt, cum, callers) in stats.items():
        name = short(key)
        if name not in targets and name != region:
            continue
        ct[name] += cum
        if name not in targets:
            continue
        for caller, edge in callers.items():
            edge_ct = edge[3] if isinstance(edge, tuple) else 0.0
            owner = _nearest_target(stats, caller, targets, short, region)
            if owner is not None and owner != name:
                nested_in[owner][name] += edge_ct
    lines = []
    top_level_region = 0.0
    for name in targets:
        inner = sum(nested_in[name].values())
        own = max(0.0, ct[name] - inner)
        if own > 0:
            lines.append(f"{region} (-);{name} (-) {own * 1e6:.0f}")
        is_nested = any(name in d for d in nested_in.values())
        if truth["targets"][name].get("in_region_thread", True) and not is_nested:
            top_level_region += ct[name]
    other = max(0.0, ct[region] - top_level_region)
    if other > 0:
        lines.append(f"{region} (-) {other * 1e6:.0f}")
    return "\n".join(lines) + "\n"


def _nearest_target(stats: dict, key: tuple, targets: set[str], short, region: str) -> str | None:
    """First target found walking up the caller graph from key (breadth first).

    The walk stops at the region function: above it there is nothing to find,
    and shared builtins (exec, the script's own <module>) would otherwise link
    unrelated call paths.
    """
    seen = set()
    frontier = [key]
    while frontier:
        nxt = []
        for k in frontier:
            if k in seen:
                continue
            seen.add(k)
            name = short(k)
            if name in targets:
                return name
            if name == region:
                continue
            entry = stats.get(k)
            if entry is not None:
                nxt.extend(entry[4].keys())
        frontier = nxt
        if len(seen) > 200:
            break
    return None


def run_tool(tool: Tool, python: str, script: str, out: str, rate_hz: int, env: dict[str, str],
             timeout: float) -> tuple[int, str]:
    """Run one profiled child; return (exit status, stderr tail)."""
    try:
        proc = subprocess.run(tool.argv(python, script, out, rate_hz), env=env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f}s"
    except OSError as exc:
        return -1, str(exc)
    tail = (proc.stderr or "").strip().splitlines()[-1:] if proc.returncode else []
    return proc.returncode, tail[0] if tail else ""


if __name__ == "__main__":
    for t in ALL_TOOLS:
        print(f"{t.label:16} {t.unavailable(sys.executable) or 'ok'}")
