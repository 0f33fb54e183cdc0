"""The method table from the seed's 240-line profiler.

    method                       samples      %   on top      %
    fib (math_utils.py:4)              9  56.2%        5  31.2%

"samples" counts the samples a function was on the stack in (once per sample,
however deep it recursed), "on top" those it was the leaf of; both are
weighted sample counts and the percentages are of all samples. Above the
table, a header says how the profile was taken (engine, rate, losses).
"""
from __future__ import annotations

import os
from typing import Any, NamedTuple

from ..model import Profile
from ..model.facts import format_rate, partial_counts
from .collapsed import EMPTY_STACK_LABEL, weighted_stack_counts

_MAX_METHOD_WIDTH = 72
_AMBIGUOUS_BASENAMES = {"__init__.py", "__main__.py"}


class MethodRow(NamedTuple):
    method: str
    total: int
    self: int


def short_path(path: str) -> str:
    if not path:
        return ""
    base = os.path.basename(path)
    if base in _AMBIGUOUS_BASENAMES:
        parent = os.path.basename(os.path.dirname(path))
        return f"{parent}/{base}" if parent else base
    return base


def method_label(profile: Profile, func: int) -> str:
    row = profile.funcs[func]
    name, path = profile.strings[row.name], short_path(profile.strings[row.file])
    name = name.replace("\n", " ")
    if not path:
        return name
    return f"{name} ({path}:{row.first_line})" if row.first_line > 0 else f"{name} ({path})"


def method_rows(profile: Profile) -> tuple[list[MethodRow], int]:
    """Rows sorted by total samples (then self, then name), and the total sample count."""
    counts = weighted_stack_counts(profile)
    total_by_func: dict[int, int] = {}
    self_by_func: dict[int, int] = {}
    empty = 0
    frames_func = [row.func for row in profile.frames]
    prefix, frame = profile.stacks.prefix, profile.stacks.frame
    for stack, count in counts.items():
        if stack < 0:
            empty += count
            continue
        leaf = frames_func[frame[stack]]
        self_by_func[leaf] = self_by_func.get(leaf, 0) + count
        seen = set()
        s = stack
        while s >= 0:
            seen.add(frames_func[frame[s]])
            s = prefix[s]
        for func in seen:
            total_by_func[func] = total_by_func.get(func, 0) + count
    # Two functions can share a label (same name, file and first line, different kind): merge them.
    merged: dict[str, list[int]] = {}
    for func, total in total_by_func.items():
        entry = merged.setdefault(method_label(profile, func), [0, 0])
        entry[0] += total
        entry[1] += self_by_func.get(func, 0)
    if empty:
        merged[EMPTY_STACK_LABEL] = [empty, empty]
    rows = [MethodRow(label, t, s) for label, (t, s) in merged.items()]
    rows.sort(key=lambda r: (-r.total, -r.self, r.method))
    return rows, sum(counts.values())


def _fit(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return "…" + text[-(width - 1):]  # keep the end: the file and line tell functions apart


def render_table(profile: Profile, top: int | None = 20) -> str:
    """The top `top` rows (all when None) as aligned text, with a header line."""
    rows, grand_total = method_rows(profile)
    if top is not None:
        rows = rows[:max(top, 0)]
    if not rows:
        return "(no samples)"
    width = min(max(len("method"), *(len(r.method) for r in rows)), _MAX_METHOD_WIDTH)
    num = max(len("samples"), len(str(grand_total)))

    def pct(n: int) -> str:
        return f"{100.0 * n / grand_total:5.1f}%" if grand_total else "    -"

    lines = [f"{'method':<{width}}  {'samples':>{num}}  {'%':>6}  {'on top':>{num}}  {'%':>6}"]
    for r in rows:
        lines.append(f"{_fit(r.method, width):<{width}}  {r.total:>{num}}  {pct(r.total):>6}  "
                     f"{r.self:>{num}}  {pct(r.self):>6}")
    return "\n".join(lines)


def header_lines(profile: Profile, shown_samples: int | None = None) -> list[str]:
    meta = profile.meta
    stats: dict[str, Any] = meta.get("sampler_stats") or {}
    engine = stats.get("engine") or meta.get("engine", "?")
    mode = stats.get("mode") or meta.get("mode", "?")
    taken = stats.get("samples", profile.sample_count)
    duration = stats.get("duration_s") or profile.duration_ns / 1e9
    lines = [f"truestack: {taken} samples in {duration:.2f} s, {mode} mode, engine {engine}"]
    if stats.get("biased") or engine == "safepoint":
        lines.append("  WARNING: biased profile: the safepoint engine sees threads only at eval-breaker "
                     "checks and GIL switches")
    requested = stats.get("requested_rate_hz", meta.get("rate_hz"))
    lines.append(f"  rate: requested {format_rate(requested)}, achieved {format_rate(stats.get('achieved_rate_hz'))}"
                 + (f" ({stats['timer']})" if stats.get("timer") else ""))
    partial = partial_counts(profile)
    partial_text = ", ".join(f"{reason} {count}" for reason, count in sorted(partial.items()))
    lines.append(f"  samples: {taken} taken, {stats.get('dropped', 0)} dropped, "
                 f"{sum(partial.values())} partial" + (f" ({partial_text})" if partial_text else ""))
    in_profile = profile.sample_count if shown_samples is None else shown_samples
    if in_profile != taken:
        lines.append(f"  samples in this output: {in_profile}")
    if meta.get("function_level"):
        lines.append("  lines merged per function (--function-level)")
    if meta.get("idle_excluded"):
        lines.append(f"  {meta['idle_excluded']} idle samples left out (--include-idle keeps them)")
    for note in stats.get("notes") or []:
        lines.append(f"  note: {note}")
    if meta.get("interrupted"):
        lines.append(f"  INTERRUPTED: {meta['interrupted']} — the profile covers the run up to that point")
    return lines


def export(profile: Profile) -> bytes:
    """How the profile was taken (the summary's header), a blank line, the whole table."""
    return ("\n".join(header_lines(profile)) + "\n\n" + render_table(profile, top=None) + "\n").encode()
