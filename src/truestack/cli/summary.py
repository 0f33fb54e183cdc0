"""The end-of-run summary: what the sampler did, the top of the method table, where output went.

Everything is read from the profile's metadata (`sampler_stats` in
particular), so `record` and `report` print the same thing for the same
profile.
"""
from __future__ import annotations

from ..exporters.table import header_lines, render_table
from ..model import Profile


def render_summary(profile: Profile, top: int = 10, outputs: list[str] | None = None,
                   shown_samples: int | None = None) -> str:
    """Header, method table (top rows), then output lines; ends with a newline."""
    lines = header_lines(profile, shown_samples)
    if top > 0:
        table = render_table(profile, top=top).rstrip("\n")
        if table:
            lines.append("")
            lines.extend(table.splitlines())
    for out in outputs or []:
        lines.append(f"output: {out}")
    return "\n".join(lines) + "\n"
