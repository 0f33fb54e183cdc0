"""The breakpoint decision: C (truestack._debughook) when it loaded, else Python.

Both sides implement pdb's bdb.effective() on a breakpoint's state: an
enabled breakpoint whose condition holds (or has none) stops unless its
ignore count is still running down; a condition that raises stops (the
error is reported) and keeps a temporary breakpoint. One difference from
pdb, kept from truestack's earlier releases: `hits` counts the reaches where
the condition held (pdb counts every reach), so a never-true condition on a
hot line changes no state at all.

`decide_in_python` is the reference and the fallback; the C module, when
present, makes the same decision without Python for simple conditions (see
conditions.py) and without materialising frame.f_locals for the rest.
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

hook: types.ModuleType | None
if os.environ.get("TRUESTACK_DEBUG_FASTPATH") == "0":  # the Python path on purpose (tests, comparisons)
    hook = None
    UNAVAILABLE = "truestack._debughook disabled (TRUESTACK_DEBUG_FASTPATH=0); breakpoints use the slower Python path"
else:
    try:
        from .. import _debughook as hook
    except ImportError as exc:  # not compiled, or built for another interpreter
        hook = None
        UNAVAILABLE = f"truestack._debughook not available ({exc}); breakpoints use the slower Python path"
    else:
        UNAVAILABLE = ""
said_unavailable = False  # the fallback is announced once per process
owner: object = None  # the Debugger the C module's callbacks point at
breaks_version = -1  # its BreakpointTable.version the C records were built from


class State(Protocol):
    """What both decision paths read and update (the C BreakState or PyBreakState)."""

    enabled: bool
    temporary: bool
    hits: int
    ignore: int

    @property
    def cond_code(self) -> types.CodeType | None: ...


@dataclass(eq=False)
class PyBreakState:
    """The C BreakState's fields, for when the C module is missing."""

    cond_code: types.CodeType | None = None
    op: int = -1
    constant: object = None
    modulus: object = None
    temporary: bool = False
    enabled: bool = True
    hits: int = 0
    ignore: int = 0


def make_state(cond_code: types.CodeType | None, op: int, constant: object, modulus: object, temporary: bool) -> State:
    if hook is not None:
        state: State = hook.BreakState(cond_code, op, constant, modulus, temporary)
        return state
    return PyBreakState(cond_code, op, constant, modulus, temporary)


def decide_in_python(
    frame: types.FrameType,
    candidates: Sequence[tuple[State, Any]],
    report: Callable[[Any, BaseException], None],
) -> tuple[Any, bool, int] | None:
    """(breakpoint, delete_ok, its hit count now) of the first candidate that stops, or None."""
    for state, bp in candidates:
        if not state.enabled:
            continue
        raised = False
        if state.cond_code is not None:
            try:
                if not eval(state.cond_code, frame.f_globals, frame.f_locals):
                    continue
            except BaseException as exc:  # as pdb: any failure stops, keeping a temporary breakpoint
                report(bp, exc)
                raised = True
        state.hits += 1
        hit_no = state.hits  # this stop's own count, before another thread adds one
        if not raised and state.ignore > 0:
            state.ignore -= 1
            continue
        return bp, not raised, hit_no
    return None
