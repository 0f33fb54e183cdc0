"""Breakpoint conditions, compiled once and taken apart for the C fast path.

A condition is compiled when the breakpoint is set. If it has one of the
shapes people type on hot lines, `name OP constant`, `constant OP name` or
`name % k OP constant` (OP a comparison, the constant an int, float or str),
`simple_form` returns its parts so `truestack._debughook` can decide it from
the fast local without running Python; anything else (and any value that is
not an exact int/float/str at run time) is evaluated from the compiled code.
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass

# CPython's rich-comparison op codes (Py_LT .. Py_GE), as the C side takes them.
OPS: dict[type[ast.cmpop], int] = {ast.Lt: 0, ast.LtE: 1, ast.Eq: 2, ast.NotEq: 3, ast.Gt: 4, ast.GtE: 5}
# `3 < n` is `n > 3`: the op seen from the other side.
MIRRORED = {0: 4, 1: 5, 2: 2, 3: 3, 4: 0, 5: 1}
CO_OPTIMIZED = 0x1  # inspect.CO_OPTIMIZED: the code keeps its locals in fast slots


@dataclass(frozen=True)
class SimpleCondition:
    name: str
    op: int
    constant: int | float | str
    modulus: int | float | None = None


def compile_condition(cond: str) -> types.CodeType:
    """Compile once at set time; SyntaxError for a bad one."""
    return compile(cond, "<condition>", "eval", dont_inherit=True)


def _constant(node: ast.expr) -> int | float | str | None:
    """A literal int/float/str (a negative number included); None otherwise."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _constant(node.operand)
        if isinstance(inner, (int, float)):
            return -inner if isinstance(node.op, ast.USub) else inner
        return None
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, str):
        value: int | float | str = node.value  # type: ignore[assignment]  # narrowed by the type() test
        return value
    return None


def _name_side(node: ast.expr) -> tuple[str, int | float | None] | None:
    """`name` or `name % k` (k a non-zero number): (name, k or None)."""
    if isinstance(node, ast.Name):
        return node.id, None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Name):
        k = _constant(node.right)
        if isinstance(k, (int, float)) and k:
            return node.left.id, k
    return None


def simple_form(cond: str) -> SimpleCondition | None:
    try:
        tree = ast.parse(cond.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(tree, ast.Compare) or len(tree.ops) != 1:
        return None
    op = OPS.get(type(tree.ops[0]))
    if op is None:
        return None
    left, right = tree.left, tree.comparators[0]
    side, constant = _name_side(left), _constant(right)
    if side is None or constant is None:
        side, constant, op = _name_side(right), _constant(left), MIRRORED[op]
    if side is None or constant is None:
        return None
    name, modulus = side
    if modulus is not None and isinstance(constant, str):
        return None
    return SimpleCondition(name, op, constant, modulus)


def names_used(code: types.CodeType) -> set[str]:
    """Every name the condition's code (nested code included) may look up."""
    names = set(code.co_names) | set(code.co_freevars) | set(code.co_varnames)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= names_used(const)
    return names


def fast_slot(code: types.CodeType, name: str) -> int:
    """Fast-local slot of `name` in `code` when it is a plain local (not a
    cell, free or global name there); -1 otherwise."""
    if not code.co_flags & CO_OPTIMIZED or name in code.co_cellvars or name in code.co_freevars:
        return -1
    try:
        return code.co_varnames.index(name)
    except ValueError:
        return -1


def local_refs(code: types.CodeType, cond_code: types.CodeType) -> tuple[tuple[str, int], ...] | None:
    """(name, slot) for the locals of `code` the condition reads, so it can
    be evaluated against those alone; None when it needs frame.f_locals (the
    code keeps locals in a dict, or the condition names a cell/free variable)."""
    if not code.co_flags & CO_OPTIMIZED:
        return None
    closure = set(code.co_cellvars) | set(code.co_freevars)
    refs = []
    for name in sorted(names_used(cond_code)):
        if name in closure:
            return None
        slot = fast_slot(code, name)
        if slot >= 0:
            refs.append((name, slot))
    return tuple(refs)
