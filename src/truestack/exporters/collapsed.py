"""Collapsed stacks: one `root;...;leaf count` line per unique stack.

The format flamegraph.pl, inferno and speedscope read. Counts are weighted
sample counts (see `weighted_stack_counts`), so a CPU-mode sample that stood
for three timer intervals counts three times, as it does in the other formats.

The weighting helpers live here because the table and the other exporters
share them; they only read the profile's columns.
"""
from __future__ import annotations

from collections.abc import Iterable

from ..model import Profile

EMPTY_STACK_LABEL = "(no frames)"


def nominal_interval_ns(profile: Profile) -> float | None:
    """The sampling interval the user asked for, or None when the rate is unknown."""
    rate = profile.meta.get("rate_hz")
    try:
        rate = float(rate)
    except (TypeError, ValueError):
        return None
    return 1e9 / rate if rate > 0 else None


def weighted_stack_counts(profile: Profile, threads: Iterable[int] | None = None) -> dict[int, int]:
    """stack -> weighted sample count: round(weight / interval) per sample, at least 1.

    Without a known rate every sample counts once. Rounding is per sample
    so a burst of short samples is not rounded away.
    """
    interval = nominal_interval_ns(profile)
    chosen = profile.threads.values() if threads is None else [profile.threads[t] for t in threads]
    counts: dict[int, int] = {}
    get = counts.get
    for thread in chosen:
        if interval is None:
            for stack in thread.stack:
                counts[stack] = get(stack, 0) + 1
            continue
        inv = 1.0 / interval
        for stack, weight in zip(thread.stack, thread.weight_ns):
            counts[stack] = get(stack, 0) + (int(weight * inv + 0.5) or 1)
    return counts


def sanitize(label: str) -> str:
    """Make a frame label safe inside a `;`-separated, line-oriented record."""
    if ";" in label or "\n" in label or "\r" in label:
        label = label.replace(";", ":").replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return label


def _frame_label(profile: Profile, frame: int, function_level: bool) -> str:
    # Native frames have no file: "time.sleep", not "time.sleep ()".
    if not profile.func_file(profile.frame_func(frame)):
        return profile.func_name(profile.frame_func(frame))
    return profile.frame_label(frame, function_level)


def stack_label_paths(profile: Profile, stacks: Iterable[int]) -> dict[int, str]:
    """stack -> `root;...;leaf` for the given stacks, sharing work between common prefixes."""
    function_level = bool(profile.meta.get("function_level"))
    frame_labels: dict[int, str] = {}
    paths: dict[int, str] = {-1: ""}
    prefix, frame = profile.stacks.prefix, profile.stacks.frame

    def path_of(stack: int) -> str:
        # Walk up to the nearest stack already labelled, then fill in downwards.
        chain = []
        while stack not in paths:
            chain.append(stack)
            stack = prefix[stack]
        for s in reversed(chain):
            f = frame[s]
            label = frame_labels.get(f)
            if label is None:
                label = frame_labels[f] = sanitize(_frame_label(profile, f, function_level))
            parent = paths[prefix[s]]
            paths[s] = f"{parent};{label}" if parent else label
        return paths[chain[0]] if chain else paths[stack]

    out = {}
    for stack in stacks:
        out[stack] = path_of(stack) if stack >= 0 else EMPTY_STACK_LABEL
    return out


def export(profile: Profile) -> bytes:
    counts = weighted_stack_counts(profile)
    paths = stack_label_paths(profile, counts)
    merged: dict[str, int] = {}
    for stack, count in counts.items():  # distinct stacks can share a label (same line, other kind)
        merged[paths[stack]] = merged.get(paths[stack], 0) + count
    lines = sorted(f"{path} {count}" for path, count in merged.items())
    return ("\n".join(lines) + "\n").encode() if lines else b""
