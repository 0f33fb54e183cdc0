"""SVG flame graph, py-spy's and flamegraph.pl's: one self-contained SVG file for any browser.

The root is at the bottom, each frame a box as wide as its share of the
(weighted) samples, children sorted by total. Hovering a frame shows its
`<title>` (name, file:line, samples, %, time) and the same on the details
line; clicking one zooms into it, "Reset Zoom" (or Escape) zooms out. The
script and its style are inlined (`assets/flamegraph_svg.js`); nothing is
fetched. The facts line (`model/facts.facts_line`) is the subtitle. Frames
narrower than `MIN_WIDTH_PX` are left out, as flamegraph.pl does.
"""

from __future__ import annotations

import html
import re
import zlib

from ..model import Profile
from ..model.facts import facts_line
from .calltree import Node, build, node_location, node_name
from .flamegraph import read_asset

WIDTH = 1200
PAD = 10
FRAME_HEIGHT = 16
FONT_SIZE = 12
CHAR_WIDTH = FONT_SIZE * 0.59  # flamegraph.pl's estimate of a Verdana character's width
TOP = 66  # title, subtitle and the reset control
BOTTOM = 26  # the details line
MIN_WIDTH_PX = 0.1

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # not allowed in XML 1.0

_STYLE = """
text { font-family: Verdana, sans-serif; font-size: 12px; fill: #000; }  /* FONT_SIZE */
#title { font-size: 17px; }
#subtitle { fill: #555; }
g.f:hover rect { stroke: #000; stroke-width: 0.5; cursor: pointer; }
g.f text { pointer-events: none; }
g.parent rect { opacity: 0.5; }
.hide { display: none; }
#unzoom { cursor: pointer; fill: #0645ad; }
"""


def export(profile: Profile) -> bytes:
    return render(profile).encode("utf-8")


def _esc(text: str) -> str:
    return html.escape(_CONTROL.sub("?", text), quote=True)


def fit_label(label: str, width: float) -> str:
    """The label cut to fit a box `width` px wide (as the page's script does after a zoom)."""
    fit = int((width - 6) // CHAR_WIDTH)
    if fit >= len(label):
        return label
    return "" if fit < 3 else label[: fit - 2] + ".."


def colour(name: str) -> str:
    """flamegraph.pl's "hot" palette, fixed per name."""
    h = zlib.crc32(name.encode("utf-8", "replace"))
    v1, v2, v3 = (h & 0xFF) / 255, ((h >> 8) & 0xFF) / 255, ((h >> 16) & 0xFF) / 255
    return f"rgb({205 + int(50 * v3)},{int(230 * v1)},{int(55 * v2)})"


def layout(root: Node, total: int) -> list[tuple[Node, float, float, int]]:
    """(node, x px, width px, depth) for every frame wide enough to draw, parents first."""
    scale = (WIDTH - 2 * PAD) / total if total else 0.0
    out = []
    todo = [(root, float(PAD), 0)]
    while todo:
        node, x, depth = todo.pop()
        width = node.count * scale
        if width < MIN_WIDTH_PX:
            continue
        out.append((node, x, width, depth))
        for child in node.sorted_children():
            todo.append((child, x, depth + 1))
            x += child.count * scale
    return out


def render(profile: Profile) -> str:
    root = build(profile)
    total = root.count
    root.label = f"all ({total:,} samples)"
    boxes = layout(root, total)
    depth = max((d for _n, _x, _w, d in boxes), default=0)
    height = TOP + (depth + 1) * FRAME_HEIGHT + BOTTOM
    command = " ".join(profile.meta.command)
    title = f"truestack flame graph: {command}" if command else "truestack flame graph"
    script = read_asset("flamegraph_svg.js", "]]>")
    out = [
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>',
        f'<svg version="1.1" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" data-width="{WIDTH}" data-pad="{PAD}" data-char="{CHAR_WIDTH:.3f}">',
        f"<style>{_STYLE}</style>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#f8f8f8"/>',
        f'<text id="title" x="{WIDTH / 2}" y="24" text-anchor="middle">{_esc(title)}</text>',
        f'<text id="subtitle" x="{WIDTH / 2}" y="44" text-anchor="middle">{_esc(facts_line(profile))}</text>',
        f'<text id="unzoom" class="hide" x="{PAD}" y="24">Reset Zoom</text>',
        f'<text id="details" x="{PAD}" y="{height - 8}"> </text>',
        '<g id="frames">',
    ]
    bottom = height - BOTTOM
    for node, x, width, d in boxes:
        name = node_name(profile, node)
        where = node_location(profile, node, full_path=True)
        label = f"{name} ({node_location(profile, node)})" if where else name
        share = 100.0 * node.count / total
        tip = f"{name}" + (f" ({where})" if where else "")
        tip += f"\n{node.count:,} samples, {share:.2f}%, {node.weight_ns / 1e9:.3f} s"
        y = bottom - (d + 1) * FRAME_HEIGHT
        out.append(
            f'<g class="f" data-x="{x:.3f}" data-w="{width:.3f}" data-d="{d}" data-n="{_esc(label)}">'
            f"<title>{_esc(tip)}</title>"
            f'<rect x="{x:.2f}" y="{y}" width="{width:.2f}" height="{FRAME_HEIGHT - 1}" rx="2" '
            f'fill="{colour(name)}"/>'
            f'<text x="{x + 3:.2f}" y="{y + FRAME_HEIGHT - 4}">{_esc(fit_label(label, width))}</text></g>'
        )
    out.append("</g>")
    out.append(f"<script><![CDATA[\n{script}\n]]></script>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
