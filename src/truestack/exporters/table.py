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

from ..light_typing import NamedTuple
from ..model import Profile
from ..model.aggregate import EMPTY_STACK_LABEL, aggregate
from ..model.facts import header_lines

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
    agg = aggregate(profile)
    # Two functions can share a label (same name, file and first line, different kind): merge them.
    merged: dict[str, list[int]] = {}
    for func, totals in agg.function_totals.items():
        entry = merged.setdefault(method_label(profile, func), [0, 0])
        entry[0] += totals.total
        entry[1] += totals.self
    if agg.empty_stack_count:
        merged[EMPTY_STACK_LABEL] = [agg.empty_stack_count, agg.empty_stack_count]
    rows = [MethodRow(label, t, s) for label, (t, s) in merged.items()]
    rows.sort(key=lambda r: (-r.total, -r.self, r.method))
    return rows, sum(agg.stack_counts.values())


def _fit(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return "…" + text[-(width - 1) :]  # keep the end: the file and line tell functions apart


def render_table(profile: Profile, top: int | None = 20) -> str:
    """The top `top` rows (all when None) as aligned text, with a header line."""
    rows, grand_total = method_rows(profile)
    if top is not None:
        rows = rows[: max(top, 0)]
    if not rows:
        return "(no samples)"
    width = min(max(len("method"), *(len(r.method) for r in rows)), _MAX_METHOD_WIDTH)
    num = max(len("samples"), len(str(grand_total)))

    def pct(n: int) -> str:
        return f"{100.0 * n / grand_total:5.1f}%" if grand_total else "    -"

    lines = [f"{'method':<{width}}  {'samples':>{num}}  {'%':>6}  {'on top':>{num}}  {'%':>6}"]
    for r in rows:
        lines.append(
            f"{_fit(r.method, width):<{width}}  {r.total:>{num}}  {pct(r.total):>6}  {r.self:>{num}}  {pct(r.self):>6}"
        )
    return "\n".join(lines)


def export(profile: Profile) -> bytes:
    """How the profile was taken (the summary's header), a blank line, the whole table."""
    return ("\n".join(header_lines(profile)) + "\n\n" + render_table(profile, top=None) + "\n").encode()
