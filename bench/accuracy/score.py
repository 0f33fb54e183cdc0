"""Score a collapsed-stack profile against the ground truth of the same run.

Collapsed stacks: one `frame;frame;leaf COUNT` line per stack, root first,
each frame `qualname (path:line)` or `qualname (path)` (py-spy's raw format
and truestack's collapsed format both look like this). COUNT may be any
non-negative number (sample count, weighted count, microseconds).

Attribution rule (the same one the truth uses): a sample belongs to the
leaf-most frame on its stack that is a target function; a sample with no
target but with the workload's region function on its stack is "(other)";
anything else (interpreter start-up, the profiler's own threads) is outside
the measured region and ignored. Shares are normalised over the region, so
tools with different sample units compare directly.

Usage: python bench/accuracy/score.py TRUTH.json PROFILE.collapsed [--mode cpu|wall]
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field

OTHER = "(other)"
_FRAME = re.compile(r"^(?P<name>.*?) \((?P<where>.*)\)$")


def parse_collapsed(text: str) -> list[tuple[list[str], float]]:
    """Parse collapsed-stack text; blank and malformed lines are skipped."""
    stacks = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        stack, sep, count = line.rpartition(" ")
        if not sep:
            continue
        try:
            weight = float(count)
        except ValueError:
            continue
        stacks.append((stack.split(";") if stack else [], weight))
    return stacks


def function_name(frame: str) -> str:
    """`Outer.<locals>.fn (path:12)` -> `fn`: compare by the last qualname part,
    because tools disagree on qualname vs co_name (3.10 has no co_qualname)."""
    match = _FRAME.match(frame)
    name = match.group("name") if match else frame
    return name.rsplit(".", 1)[-1].strip()


def profile_shares(stacks: list[tuple[list[str], float]], targets: list[str], region: str) -> tuple[dict[str, float], float]:
    """Weight per category (targets + OTHER) and the total region weight."""
    wanted = set(targets)
    weights = {name: 0.0 for name in targets}
    weights[OTHER] = 0.0
    for frames, weight in stacks:
        names = [function_name(f) for f in frames]
        category = next((n for n in reversed(names) if n in wanted), None)
        if category is None:
            if region not in names:
                continue
            category = OTHER
        weights[category] += weight
    return weights, sum(weights.values())


def truth_shares(truth: dict, mode: str) -> tuple[dict[str, float], float]:
    weights = {name: float(t[mode]) for name, t in truth["targets"].items()}
    weights[OTHER] = float(truth["other_ns"][mode])
    return weights, sum(weights.values())


@dataclass
class Score:
    workload: str
    mode: str
    tv: float | None  # total variation distance in [0, 1]; None when the profile has no region samples
    rows: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (truth %, profile %)
    region_weight: float = 0.0

    def error_pp(self, name: str) -> float:
        truth, measured = self.rows[name]
        return measured - truth

    @property
    def max_error_pp(self) -> float | None:
        if self.tv is None:
            return None
        return max(abs(self.error_pp(n)) for n in self.rows)

    def format(self) -> str:
        lines = [f"{self.workload} ({self.mode}): TV distance "
                 + (f"{self.tv:.3f}" if self.tv is not None else "n/a (no samples in the measured region)")]
        lines.append(f"  {'function':<20} {'truth %':>8} {'profile %':>10} {'error pp':>9}")
        for name, (truth, measured) in self.rows.items():
            lines.append(f"  {name:<20} {truth:8.1f} {measured:10.1f} {measured - truth:+9.1f}")
        return "\n".join(lines)


def score(stacks: list[tuple[list[str], float]], truth: dict, mode: str) -> Score:
    targets = list(truth["targets"])
    t_weights, t_total = truth_shares(truth, mode)
    p_weights, p_total = profile_shares(stacks, targets, truth.get("region", "measured_region"))
    result = Score(truth["workload"], mode, None, region_weight=p_total)
    for name in [*targets, OTHER]:
        t = 100.0 * t_weights[name] / t_total if t_total else 0.0
        p = 100.0 * p_weights[name] / p_total if p_total else 0.0
        result.rows[name] = (t, p)
    if p_total > 0 and t_total > 0:
        result.tv = 0.5 * sum(abs(p - t) for t, p in result.rows.values()) / 100.0
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("truth")
    parser.add_argument("profile")
    parser.add_argument("--mode", choices=("cpu", "wall"), default="cpu")
    args = parser.parse_args(argv)
    try:
        with open(args.truth) as fh:
            truth = json.load(fh)
        with open(args.profile) as fh:
            stacks = parse_collapsed(fh.read())
    except (OSError, ValueError) as exc:
        print(f"score: {exc}", file=sys.stderr)
        return 2
    print(score(stacks, truth, args.mode).format())
    return 0


if __name__ == "__main__":
    sys.exit(main())
