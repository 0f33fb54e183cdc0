"""The end-of-run summary: what the sampler did, the top of the method table, where output went.

Everything is read from the profile's metadata (`sampler_stats` in
particular), so `record` and `report` print the same thing for the same
profile.
"""
from __future__ import annotations

from typing import Any

from ..model import Profile


def render_summary(profile: Profile, top: int = 10, outputs: list[str] | None = None,
                   shown_samples: int | None = None) -> str:
    """Header, method table (top rows), then output lines; ends with a newline."""
    lines = header_lines(profile, shown_samples)
    if top > 0:
        table = method_table(profile, top).rstrip("\n")
        if table:
            lines.append("")
            lines.extend(table.splitlines())
    for out in outputs or []:
        lines.append(f"output: {out}")
    return "\n".join(lines) + "\n"


def _rate(hz: Any) -> str:
    try:
        value = float(hz)
    except (TypeError, ValueError):
        return "?"
    if value >= 1000:
        return f"{value / 1000:.3g} kHz"
    return f"{value:.4g} Hz"


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
    lines.append(f"  rate: requested {_rate(requested)}, achieved {_rate(stats.get('achieved_rate_hz'))}"
                 + (f" ({stats['timer']})" if stats.get("timer") else ""))
    partial: dict[str, int] = stats.get("partial") or {}
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


def method_table(profile: Profile, top: int) -> str:
    """The table exporter's method table, or a minimal one while it is not available."""
    try:
        from ..exporters.table import render_table
    except ImportError:
        return _fallback_table(profile, top)
    return render_table(profile, top=top)


def _fallback_table(profile: Profile, top: int) -> str:
    total = 0
    inclusive: dict[int, int] = {}
    on_top: dict[int, int] = {}
    for stack, (count, _weight) in profile.stack_totals().items():
        total += count
        funcs = [profile.frame_func(f) for f in profile.stack_frames(stack)]
        for func in set(funcs):  # once per sample, even under recursion
            inclusive[func] = inclusive.get(func, 0) + count
        if funcs:
            on_top[funcs[-1]] = on_top.get(funcs[-1], 0) + count
    if not total:
        return "(no samples)\n"
    rows = sorted(inclusive, key=lambda f: (-on_top.get(f, 0), -inclusive[f]))[:top]
    out = [f"{'samples':>8} {'%':>6} {'on top':>8} {'%':>6}  method"]
    for func in rows:
        inc, self_ = inclusive[func], on_top.get(func, 0)
        out.append(f"{inc:>8} {100 * inc / total:>5.1f}% {self_:>8} {100 * self_ / total:>5.1f}%  "
                   f"{profile.func_label(func)}")
    return "\n".join(out) + "\n"
