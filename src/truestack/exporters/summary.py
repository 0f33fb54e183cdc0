"""The end-of-run summary: how the profile was taken, the top of the method table, where output went.

Everything is read from the profile's metadata and its aggregate, so
`record`, `report` and the API's at-exit summary print the same thing for
the same profile.
"""

from __future__ import annotations

from ..model import Profile
from ..model.facts import header_lines
from .table import render_table


def render_summary(
    profile: Profile, top: int = 10, outputs: list[str] | None = None, shown_samples: int | None = None
) -> str:
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
