"""The end-of-run summary: how the profile was taken, the top of the method table, where output went.

Everything is read from the profile's metadata and its aggregate, so
`record`, `report` and the API's at-exit summary print the same thing for
the same profile.
"""

from __future__ import annotations

from ..model import Profile
from ..model.facts import header_lines
from ..model.tasks import task_rows
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
        lines.extend(_task_table(profile, top))
    for out in outputs or []:
        lines.append(f"output: {out}")
    return "\n".join(lines) + "\n"


def _task_table(profile: Profile, top: int) -> list[str]:
    """`--async`: running and awaiting time per task (each as a share of that task's time)."""
    rows = task_rows(profile)
    if not rows:
        return []
    width = min(max(len(r.name) for r in rows[:top]), 48)
    out = ["", f"{'task':<{width}}  {'running':>9} {'awaiting':>9} {'run %':>6} {'await %':>7}  awaiting on"]
    for row in rows[:top]:
        total = (row.running_ns + row.awaiting_ns) or 1
        out.append(
            f"{row.name[:width]:<{width}}  {row.running_ns / 1e9:>8.3f}s {row.awaiting_ns / 1e9:>8.3f}s "
            f"{100 * row.running_ns / total:>5.1f}% {100 * row.awaiting_ns / total:>6.1f}%  {row.awaiting_on}"
        )
    if len(rows) > top:
        out.append(f"(+{len(rows) - top} more tasks)")
    return out
