"""The call tree in the terminal, pyinstrument-style: where the time went, hottest path first.

    100.0%  self 0.0%  1.230 s  <module>  main.py:3
    └─ 95.1%  self 4.9%  1.170 s  run  main.py:10
       ├─ 60.2%  self 60.2%  0.740 s  fib  math_utils.py:5
       └─ 30.0%  self 30.0%  0.370 s  parse  main.py:40  [3 library frames]

Percentages are of all (weighted) samples, times are the samples' weights.
Children are sorted by total. Library frames (the standard library,
site-packages, dist-packages, frozen modules) are folded into their caller,
their time becoming its self time, unless `show_all`. Nodes under
`min_percent` of the total are left out; `limit` caps the children shown
per node (below the threads). With more than one thread, each thread is a top-level node.
"""

from __future__ import annotations

import re
import sys
import sysconfig
from dataclasses import dataclass

from ..model import Profile
from ..model.facts import header_lines
from .calltree import Node, build, fold, node_location, node_name

_LIBRARY_PATH = re.compile(r"[/\\](?:site-packages|dist-packages)[/\\]|[/\\]lib[/\\]python\d\.\d+t?[/\\]|^<frozen ")


def _prefixes() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        dirs.add(sysconfig.get_path("stdlib", vars={"installed_base": prefix, "base": prefix}) or "")
    return tuple(d.rstrip("/\\") + "/" for d in dirs if d)


LIBRARY_PREFIXES = _prefixes()


def is_library_path(path: str) -> bool:
    """Is `path` the standard library's or an installed package's (site-/dist-packages)?"""
    return bool(path) and (path.startswith(LIBRARY_PREFIXES) or _LIBRARY_PATH.search(path) is not None)


@dataclass(frozen=True)
class TreeOptions:
    min_percent: float = 1.0
    limit: int | None = None  # children shown per node
    show_all: bool = False  # keep library frames
    color: bool = False  # ANSI colours


_RESET, _BOLD, _DIM = "\x1b[0m", "\x1b[1m", "\x1b[2m"
_RED, _YELLOW, _GREEN, _CYAN = "\x1b[31m", "\x1b[33m", "\x1b[32m", "\x1b[36m"


def _heat(percent: float) -> str:
    return _RED if percent >= 50 else _YELLOW if percent >= 20 else _GREEN if percent >= 10 else _CYAN


def tree_root(profile: Profile, show_all: bool = False) -> Node:
    """The tree to show: one node per thread when there are several, library frames folded unless `show_all`."""
    if len(profile.threads) > 1:
        root = Node(-2, "all")
        for i, (tid, thread) in enumerate(profile.threads.items()):
            build(profile, tid, root.child(-3 - i, f"thread {thread.name} ({tid})"))
        root.count = sum(c.count for c in root.children.values())
        root.weight_ns = sum(c.weight_ns for c in root.children.values())
    else:
        root = build(profile)
    if show_all:
        return root

    def library(node: Node) -> bool:
        return node.frame >= 0 and is_library_path(profile.func_file(profile.frame_func(node.frame)))

    return fold(root, library)


def render_tree(profile: Profile, options: TreeOptions | None = None) -> str:
    """The tree as text, one node a line; ends with a newline."""
    opts = options or TreeOptions()
    root = tree_root(profile, opts.show_all)
    total = root.count
    if not total:
        return "(no samples)\n"
    floor = total * opts.min_percent / 100.0
    lines: list[str] = []
    # (node, prefix for its line, prefix for its children's lines)
    # Threads (the top level) are all shown; `limit` is for the children of frames.
    todo: list[tuple[Node | str, str, str]] = [(c, "", "") for c in reversed(_shown(root, floor, None))]
    while todo:
        item, lead, indent = todo.pop()
        if isinstance(item, str):  # the "N more" line
            lines.append(lead + (_DIM + item + _RESET if opts.color else item))
            continue
        lines.append(lead + _line(profile, item, total, opts.color))
        kids: list[Node | str] = list(_shown(item, floor, opts.limit))
        dropped = [c for c in item.sorted_children() if c.count >= floor and c.count > 0][len(kids) :]
        if dropped:
            kids.append(f"… {len(dropped)} more ({100.0 * sum(c.count for c in dropped) / total:.1f}%)")
        for i in reversed(range(len(kids))):
            last = i == len(kids) - 1
            todo.append((kids[i], indent + ("└─ " if last else "├─ "), indent + ("   " if last else "│  ")))
    if not lines:
        return f"(every node is under {opts.min_percent:g}% of the samples)\n"
    return "\n".join(lines) + "\n"


def _shown(node: Node, floor: float, limit: int | None) -> list[Node]:
    kids = [c for c in node.sorted_children() if c.count >= floor and c.count > 0]
    return kids if limit is None else kids[: max(limit, 0)]


def _line(profile: Profile, node: Node, total: int, color: bool) -> str:
    pct, self_pct = 100.0 * node.count / total, 100.0 * node.self_count / total
    name, where = node_name(profile, node), node_location(profile, node)
    hidden = f"  [{node.hidden} library frame{'s' if node.hidden != 1 else ''}]" if node.hidden else ""
    numbers = f"{pct:.1f}%  self {self_pct:.1f}%  {node.weight_ns / 1e9:.3f} s"
    if not color:
        return f"{numbers}  {name}" + (f"  {where}" if where else "") + hidden
    return (
        f"{_heat(pct)}{numbers}{_RESET}  {_BOLD}{name}{_RESET}"
        + (f"  {_DIM}{where}{_RESET}" if where else "")
        + (f"{_DIM}{hidden}{_RESET}" if hidden else "")
    )


def render(profile: Profile, options: TreeOptions | None = None) -> str:
    """How the profile was taken (the summary's header), a blank line, the tree."""
    return "\n".join(header_lines(profile)) + "\n\n" + render_tree(profile, options)


def export(profile: Profile, options: TreeOptions | None = None) -> bytes:
    """The whole report (default options: no colour, 1 % floor, library frames folded)."""
    return render(profile, options).encode()
