"""Interactive flame graph: one self-contained HTML file (no network access needed).

The page's script and style live in ``assets/`` and are inlined at export. The
data is one JSON document in a ``<script type="application/json">`` element:

    strings  every function name and file path, once
    funcs    flat [name string, file string, first line] triples
    frames   flat [func, line, kind] triples
    parents  per call-tree node (node 0 is the implicit root, not listed):
             node index minus its parent's index, so it is mostly small
    nframe   per call-tree node: its frame
    threads  per thread: tid, name, and its non-zero self totals as
             delta-encoded node indices with parallel sample counts and
             weights (ns); the page sums them up the tree itself

The call tree is the profile's stack prefix tree restricted to stacks that
some thread reached, so one tree serves every thread and the merged view.
"""

from __future__ import annotations

import html
import json
import os
import re

from ..model import Profile
from ..model.aggregate import aggregate
from ..model.facts import sampling_facts, warnings
from ..model.tables import KINDS

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

DATA_VERSION = 1
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


def export(profile: Profile) -> bytes:
    data = json_for_html(build_data(profile))
    parts = {
        "title": html.escape(_title(profile)),
        "header": _header_html(profile),
        "css": read_asset("flamegraph.css", "</style"),
        "js": read_asset("flamegraph.js", "</script"),
        "data": data,
    }
    template = read_asset("flamegraph.html", None)
    # One pass over the template only, so placeholder-like text inside the data stays as it is.
    page = _PLACEHOLDER.sub(lambda m: parts[m.group(1)], template)
    return page.encode("utf-8")


def json_for_html(obj: Any) -> str:
    """JSON that can sit inside a <script> element: no '<', '>', '&' or line separators appear raw."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    # Outside string literals JSON never contains these characters, so escaping them everywhere is exact.
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def build_data(profile: Profile) -> dict[str, Any]:
    """The embedded document (see the module docstring)."""
    agg = aggregate(profile)
    per_thread = {tid: agg.thread_stack_totals(tid) for tid in profile.threads}
    prefix = profile.stacks.prefix
    order, node_of = agg.call_tree.order, agg.call_tree.node_of

    frame_of: dict[int, int] = {}
    func_of: dict[int, int] = {}
    string_of: dict[int, int] = {}
    strings: list[str] = []
    funcs: list[int] = []
    frames: list[int] = []

    def string(idx: int) -> int:
        out = string_of.get(idx)
        if out is None:
            out = string_of[idx] = len(strings)
            strings.append(profile.strings[idx])
        return out

    def frame(idx: int) -> int:
        out = frame_of.get(idx)
        if out is None:
            row = profile.frames[idx]
            func = func_of.get(row.func)
            if func is None:
                f = profile.funcs[row.func]
                func = func_of[row.func] = len(funcs) // 3
                funcs.extend((string(f.name), string(f.file), f.first_line))
            out = frame_of[idx] = len(frames) // 3
            frames.extend((func, row.line, row.kind))
        return out

    parents = [i - node_of[prefix[stack]] for i, stack in enumerate(order, 1)]
    nframe = [frame(profile.stacks.frame[stack]) for stack in order]

    threads = []
    for tid, totals in per_thread.items():
        nodes = sorted((node_of[s], c, w) for s, (c, w) in totals.items())
        deltas, last = [], 0
        for node, _c, _w in nodes:
            deltas.append(node - last)
            last = node
        thread = profile.threads[tid]
        threads.append(
            {
                "tid": tid,
                "name": thread.name,
                "samples": len(thread),
                "nodes": deltas,
                "counts": [c for _n, c, _w in nodes],
                "weights": [w for _n, _c, w in nodes],
            }
        )
    return {
        "version": DATA_VERSION,
        "kinds": list(KINDS),
        "mode": profile.meta.mode or (profile.meta.sampler_stats.mode if profile.meta.sampler_stats else ""),
        "functionLevel": profile.meta.function_level,
        "strings": strings,
        "funcs": funcs,
        "frames": frames,
        "parents": parents,
        "nframe": nframe,
        "threads": threads,
    }


def read_asset(name: str, forbidden: str | None) -> str:
    # The module's own loader reads it, as `pkgutil.get_data` would (a zip install included),
    # without importing pkgutil (which imports typing) or importlib.resources (pathlib, urllib,
    # ipaddress): a tenth of `record`'s start-up, for one file read.
    get_data = getattr(__spec__.loader, "get_data", None)
    if get_data is None:
        raise FileNotFoundError(f"asset {name}: the installation's loader cannot read package data")
    data: bytes = get_data(os.path.join(os.path.dirname(__file__), "assets", name))
    text = data.decode("utf-8")
    if forbidden and forbidden in text.lower():  # would end the inline element early
        raise ValueError(f"asset {name} contains {forbidden!r}")
    return text


def _title(profile: Profile) -> str:
    command = _command(profile)
    return f"truestack flame graph: {command}" if command else "truestack flame graph"


def _command(profile: Profile) -> str:
    return " ".join(profile.meta.command)


def _header_html(profile: Profile) -> str:
    meta = profile.meta
    stats = meta.sampler_stats
    # "samples" is what this page shows; an interrupted run gets its own banner below.
    items = [
        (label, f"{profile.sample_count:,}" if label == "samples" else value)
        for label, value in sampling_facts(profile)
        if label not in ("timer", "interrupted")
    ]
    if stats and stats.duration_s:
        items.append(("duration", f"{stats.duration_s:.3g} s"))
    if meta.python_version:
        items.append(("python", meta.python_version.split()[0]))
    if meta.function_level:
        items.append(("lines", "merged per function"))
    out = [
        f'<div class="ts-cmd" id="ts-command">{html.escape(_command(profile) or "(command unknown)")}</div>',
        '<dl class="ts-meta" id="ts-meta">',
    ]
    for key, value in items:
        out.append(f'<div><dt>{html.escape(key)}</dt><dd data-key="{html.escape(key)}">{html.escape(value)}</dd></div>')
    out.append("</dl>")
    for text in warnings(profile):
        cls = "ts-warn ts-biased" if text.startswith("Biased") else "ts-warn"
        out.append(f'<div class="{cls}" role="alert">{html.escape(text)}</div>')
    return "\n".join(out)
