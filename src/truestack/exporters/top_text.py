"""`truestack top` as text: the header line and the function rows of a live snapshot.

The batch mode prints `render_snapshot` every interval (`top -b` style: one
header line starting with `truestack top:`, a column line, then the rows,
then a blank line); the full-screen view draws the same header facts and
rows (`header_facts`, `table_lines`) within the terminal's width.
"""

from __future__ import annotations

from typing import NamedTuple

from ..model.facts import format_rate
from ..model.live import Row, Snapshot
from ..model.meta import ProfileMeta


class Line(NamedTuple):
    """One function: its shares in the window and since the start (percent)."""

    name: str
    location: str
    own: float
    total: float
    cum_own: float
    cum_total: float


def header_facts(snapshot: Snapshot, meta: ProfileMeta, cpu_percent: float | None) -> list[str]:
    """The header's facts, each `label value`: rate, samples, losses, threads, program CPU."""
    stats = meta.sampler_stats
    achieved = stats.achieved_rate_hz if stats else 0.0
    partial = sum(meta.partial_counts.values())
    active = sum(1 for t in snapshot.threads if t.window_ns)
    facts = [
        f"{meta.mode_used} mode",
        f"rate {format_rate(meta.requested_rate_hz)} requested, {format_rate(achieved)} achieved",
        f"samples {snapshot.samples:,} (window {snapshot.window_samples:,})",
        f"dropped {stats.dropped if stats else 0:,}",
        f"partial {partial:,}",
        f"threads {len(snapshot.threads)} ({active} active)",
        "program CPU " + (f"{cpu_percent:.0f}%" if cpu_percent is not None else "?"),
    ]
    if meta.engine_used == "safepoint" or meta.biased:
        facts.append("BIASED (safepoint engine)")
    if snapshot.idle_left_out:
        facts.append(f"idle samples left out {snapshot.idle_left_out:,}")
    return facts


def lines(snapshot: Snapshot, sort: str = "own", thread: int | None = None, scope: str = "window") -> list[Line]:
    """Every function seen, sorted by `sort` in `scope` first, then in the other scope."""
    other = "cumulative" if scope == "window" else "window"
    first = snapshot.rows(scope, sort, thread)
    second = snapshot.rows(other, sort, thread)
    by_func: dict[int, list[Row | None]] = {}
    for r in first:
        by_func[r.func] = [r, None]
    for r in second:
        by_func.setdefault(r.func, [None, None])[1] = r
    order = {r.func: i for i, r in enumerate(first)}
    rank_other = {r.func: i for i, r in enumerate(second)}
    funcs = sorted(by_func, key=lambda f: (order.get(f, len(order)), rank_other.get(f, len(rank_other))))
    out = []
    for func in funcs:
        mine, theirs = by_func[func]
        window, cumulative = (mine, theirs) if scope == "window" else (theirs, mine)
        label = snapshot.labels[func]
        out.append(
            Line(
                label[0],
                label[1],
                window.own if window else 0.0,
                window.total if window else 0.0,
                cumulative.own if cumulative else 0.0,
                cumulative.total if cumulative else 0.0,
            )
        )
    return out


COLUMNS = f"{'OWN%':>6} {'TOTAL%':>6} {'CUM-OWN%':>8} {'CUM-TOT%':>8}  FUNCTION  FILE:LINE"


def table_lines(rows: list[Line], width: int = 0) -> list[str]:
    """The column line and one line per row; cut to `width` (0: no limit), keeping the location."""
    name_width = max((len(r.name) for r in rows), default=8)
    out = [COLUMNS]
    for r in rows:
        numbers = f"{r.own:6.1f} {r.total:6.1f} {r.cum_own:8.1f} {r.cum_total:8.1f}  "
        out.append(fit_row(numbers, r.name, r.location, name_width, width))
    return out


def fit_row(numbers: str, name: str, location: str, name_width: int, width: int = 0) -> str:
    """`numbers`, the name padded to `name_width`, the location; cut to `width` (0: no limit) by
    shortening the name from the left, so the location stays whole."""
    if width:
        name_width = max(min(name_width, width - len(numbers) - len(location) - 2), 0)
    if len(name) > name_width:
        name = "…" + name[-(name_width - 1) :] if name_width > 1 else ""
    text = f"{numbers}{name:<{name_width}}  {location}"
    return text[:width] if width else text


def render_snapshot(
    snapshot: Snapshot,
    meta: ProfileMeta,
    cpu_percent: float | None,
    rows: int = 20,
    sort: str = "own",
    thread: int | None = None,
) -> str:
    """One batch snapshot: `truestack top: <elapsed> s, window <s> s, <facts>`, columns, rows, blank line."""
    header = f"truestack top: {snapshot.elapsed_s:.1f} s, window {snapshot.window_s:.2f} s, " + ", ".join(
        header_facts(snapshot, meta, cpu_percent)
    )
    body = table_lines(lines(snapshot, sort, thread)[: max(rows, 0)])
    return "\n".join([header, *body]) + "\n\n"
