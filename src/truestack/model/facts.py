"""How a profile was taken, as short labelled facts every output carries.

The engine actually used, the mode, the requested and achieved rate, and
what went wrong (dropped and partial samples, an interrupted run, a biased
engine) are read from the metadata once here, so the summary, the flame
graph header, Firefox's "extra" panel, pprof comments and speedscope's title
all say the same thing.
"""
from __future__ import annotations

from typing import Any

from .profile import Profile


def format_rate(value: Any) -> str:
    try:
        hz = float(value)
    except (TypeError, ValueError):
        return "?"
    return f"{hz / 1000:.3g} kHz" if hz >= 1000 else f"{hz:.4g} Hz"


def partial_counts(profile: Profile) -> dict[str, int]:
    """Partial (incomplete or suspect) samples by reason; reasons never seen are left out."""
    partial = (profile.meta.get("sampler_stats") or {}).get("partial") or {}
    if not isinstance(partial, dict):
        partial = {"unknown": partial}
    return {str(k): int(v) for k, v in partial.items() if int(v)}


def sampling_facts(profile: Profile) -> list[tuple[str, str]]:
    """[(label, value)] in reading order: engine, mode, rate, samples, losses."""
    meta = profile.meta
    stats: dict[str, Any] = meta.get("sampler_stats") or {}
    partial = partial_counts(profile)
    partial_text = str(sum(partial.values()))
    if partial:
        partial_text += " (" + ", ".join(f"{k}: {v}" for k, v in sorted(partial.items())) + ")"
    achieved = stats.get("achieved_rate_hz")
    facts = [
        ("engine", str(meta.get("engine") or stats.get("engine") or "?")
         + (" (biased)" if stats.get("biased") else "")),
        ("mode", str(meta.get("mode") or stats.get("mode") or "?")),
        ("rate", f"{format_rate(meta.get('rate_hz', stats.get('requested_rate_hz')))} requested, "
                 + (f"{format_rate(achieved)} achieved" if achieved else "achieved unknown")),
        ("samples", f"{int(stats.get('samples', profile.sample_count)):,}"),
        ("dropped", f"{int(stats.get('dropped') or 0):,}"),
        ("partial", partial_text),
    ]
    if stats.get("timer"):
        facts.append(("timer", str(stats["timer"])))
    if meta.get("interrupted"):
        facts.append(("interrupted", str(meta["interrupted"])))
    return facts


def facts_line(profile: Profile) -> str:
    """The facts on one line: `engine native-cpu, mode cpu, rate ..., dropped 0, ...`."""
    return ", ".join(f"{label} {value}" for label, value in sampling_facts(profile))
