"""Collapsed stacks: one `root;...;leaf count` line per unique stack.

The format flamegraph.pl, inferno and speedscope read. Counts are weighted
sample counts (`model/aggregate.py`), so a CPU-mode sample that stood for
three timer intervals counts three times, as it does in the other formats.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..model import Profile
from ..model.aggregate import aggregate


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
    """stack -> `root;...;leaf` for the given stacks."""
    function_level = profile.meta.function_level
    return aggregate(profile).stack_labels(stacks, lambda f: sanitize(_frame_label(profile, f, function_level)))


def export(profile: Profile) -> bytes:
    counts = aggregate(profile).stack_counts
    paths = stack_label_paths(profile, counts)
    merged: dict[str, int] = {}
    for stack, count in counts.items():  # distinct stacks can share a label (same line, other kind)
        merged[paths[stack]] = merged.get(paths[stack], 0) + count
    lines = sorted(f"{path} {count}" for path, count in merged.items())
    return ("\n".join(lines) + "\n").encode() if lines else b""
