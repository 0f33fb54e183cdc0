"""The call tree as nodes with totals, for the outputs that draw it (SVG flame graph, terminal tree).

Built from the aggregate's per-stack counts: a node per stack some sample
reached, with its weighted sample count and weight (ns), on the stack
(`count`, `weight_ns`) and at the leaf (`self_count`, `self_weight_ns`).
Children are keyed by frame, so trees can be merged (`fold`).
Everything here is iterative: stacks can be thousands of frames deep.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..model import Profile
from ..model.aggregate import EMPTY_STACK_LABEL, aggregate
from .table import short_path

EMPTY_FRAME = -1  # the key of the "(no frames)" node


@dataclass
class Node:
    frame: int  # profile frame index; EMPTY_FRAME for samples without frames, < -1 for synthetic nodes
    label: str = ""  # synthetic nodes only (the root, a thread)
    count: int = 0
    weight_ns: int = 0
    self_count: int = 0
    self_weight_ns: int = 0
    hidden: int = 0  # frames folded into this one
    children: dict[int, Node] = field(default_factory=dict)

    def child(self, frame: int, label: str = "") -> Node:
        node = self.children.get(frame)
        if node is None:
            node = self.children[frame] = Node(frame, label)
        return node

    def add_self(self, count: int, weight_ns: int) -> None:
        self.self_count += count
        self.self_weight_ns += weight_ns

    def sorted_children(self) -> list[Node]:
        """Children by total, largest first (then by frame, so the order is stable)."""
        return sorted(self.children.values(), key=lambda n: (-n.count, -n.weight_ns, n.frame))


def walk(root: Node) -> Iterator[Node]:
    """Every node below and including `root`, parents before children."""
    todo = [root]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(node.children.values())


def add_up(root: Node) -> Node:
    """Set every node's totals from the self counts below it; returns `root`."""
    nodes = list(walk(root))
    for node in reversed(nodes):  # children before parents
        node.count = node.self_count + sum(c.count for c in node.children.values())
        node.weight_ns = node.self_weight_ns + sum(c.weight_ns for c in node.children.values())
    return root


def build(profile: Profile, tid: int | None = None, root: Node | None = None) -> Node:
    """The call tree of all threads (or of `tid`), under `root` (a new synthetic root by default)."""
    agg = aggregate(profile)
    counts = agg.stack_counts if tid is None else agg.thread_stack_counts(tid)
    totals = agg.stack_totals if tid is None else agg.thread_stack_totals(tid)
    root = root if root is not None else Node(-2, "all")
    prefix, frame = profile.stacks.prefix, profile.stacks.frame
    nodes: dict[int, Node] = {-1: root}
    for stack, count in counts.items():
        weight = totals[stack][1]
        if stack < 0:
            root.child(EMPTY_FRAME, EMPTY_STACK_LABEL).add_self(count, weight)
            continue
        chain = []
        s = stack
        while s not in nodes:
            chain.append(s)
            s = prefix[s]
        for s in reversed(chain):
            nodes[s] = nodes[prefix[s]].child(frame[s])
        nodes[stack].add_self(count, weight)
    return add_up(root)


def fold(root: Node, folded: Callable[[Node], bool]) -> Node:
    """A copy of the tree with every `folded(node)` node merged into its parent.

    A folded node's self time becomes its parent's; its children take its
    place, merged with the parent's own children of the same frame.
    """
    out = Node(root.frame, root.label, self_count=root.self_count, self_weight_ns=root.self_weight_ns)
    work = [(root, out)]
    while work:
        src, dst = work.pop()
        pending = list(src.children.values())
        while pending:
            node = pending.pop()
            if folded(node):
                dst.add_self(node.self_count, node.self_weight_ns)
                dst.hidden += 1 + node.hidden
                pending.extend(node.children.values())
            else:
                copy = dst.child(node.frame, node.label)
                copy.add_self(node.self_count, node.self_weight_ns)
                copy.hidden += node.hidden
                work.append((node, copy))
    return add_up(out)


def node_name(profile: Profile, node: Node) -> str:
    """A frame's function name (one line), or a synthetic node's label."""
    if node.frame < 0:
        return node.label
    return profile.func_name(profile.frame_func(node.frame)).replace("\n", " ").replace("\r", " ")


def node_location(profile: Profile, node: Node, full_path: bool = False) -> str:
    """`file.py:line` (the function's first line at function level), or "" without a file."""
    if node.frame < 0:
        return ""
    func = profile.frame_func(node.frame)
    path = profile.func_file(func)
    if not path:
        return ""
    line = profile.funcs[func].first_line if profile.meta.function_level else profile.frame_line(node.frame)
    shown = path if full_path else short_path(path)
    return f"{shown}:{line}" if line > 0 else shown
