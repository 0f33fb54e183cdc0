"""Running shell input inside a stopped frame.

The code runs in one merged namespace (scratch names < helpers < globals <
locals), so locals shadow globals as in the frame's own code and closures,
lambdas and comprehensions typed in the shell can see the locals. Afterwards
every changed name is written back where it came from: locals into the frame
(PyFrame_LocalsToFast before 3.13, the write-through f_locals proxy on 3.13),
globals into the module, new names into a scratch dict kept for the session.

`locals()`, `vars()` and `dir()` typed in the shell show the frame's own
names (and the session's), as under pdb: not the shell's helpers, which live
in the merged namespace only. `globals()` is the frame's module dict.
"""

from __future__ import annotations

import builtins
import ctypes
import sys
import types
from typing import Any

_MISSING = object()


def write_locals(frame: types.FrameType, changes: dict[str, Any]) -> None:
    if not changes:
        return
    if sys.version_info >= (3, 13):
        proxy = frame.f_locals
        for name, value in changes.items():
            proxy[name] = value
        return
    snapshot = frame.f_locals  # refreshes the dict from the fast locals first
    snapshot.update(changes)
    ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))


class FrameNamespace:
    """The merged namespace for one piece of shell input, and its write-back."""

    def __init__(self, frame: types.FrameType, helpers: dict[str, Any], scratch: dict[str, Any]) -> None:
        self.frame = frame
        self.scratch = scratch
        self.glob = frame.f_globals
        loc = frame.f_locals
        self.module_level = loc is self.glob
        self.loc = dict(loc)
        ns: dict[str, Any] = dict(scratch)
        ns.update(helpers)
        shims = self._introspection()
        ns.update(shims)
        self.hidden = (helpers.keys() | shims.keys()) - self.glob.keys() - self.loc.keys()
        ns.update(self.glob)
        ns.update(self.loc)
        self.ns = ns
        self.before = dict(ns)

    def _introspection(self) -> dict[str, Any]:
        """`locals`, `vars`, `dir` and `globals` that see the frame, not the merged namespace."""

        def frame_locals() -> dict[str, Any]:
            if self.module_level:
                return {n: v for n, v in self.ns.items() if n not in self.hidden}
            seen = self.loc.keys() | self.scratch.keys()
            return {n: v for n, v in self.ns.items() if n in seen or n not in self.before}

        def frame_vars(*obj: Any) -> dict[str, Any]:
            return builtins.vars(*obj) if obj else frame_locals()

        def frame_dir(*obj: Any) -> list[str]:
            return builtins.dir(*obj) if obj else sorted(frame_locals())

        def frame_globals() -> dict[str, Any]:
            return self.glob

        return {"locals": frame_locals, "vars": frame_vars, "dir": frame_dir, "globals": frame_globals}

    def commit(self, ns: dict[str, Any] | None = None) -> None:
        """Write changed names back where they came from (see module docstring)."""
        ns = self.ns if ns is None else ns
        glob, loc, scratch, before = self.glob, self.loc, self.scratch, self.before
        local_changes = {}
        for name, value in ns.items():
            if before.get(name, _MISSING) is value:
                continue
            if name in loc and not self.module_level:
                local_changes[name] = value
                loc[name] = value
            elif name in glob or self.module_level:
                glob[name] = value
            else:
                scratch[name] = value
        for name in before.keys() - ns.keys():
            if name in glob and name not in loc:
                del glob[name]
            scratch.pop(name, None)
        write_locals(self.frame, local_changes)
        self.before = dict(ns)


def run_in_frame(code: types.CodeType, frame: types.FrameType, helpers: dict[str, Any], scratch: dict[str, Any]) -> Any:
    """exec/eval `code` as if typed in `frame`; returns the value for 'eval' code."""
    view = FrameNamespace(frame, helpers, scratch)
    try:
        return eval(code, view.ns)
    finally:
        view.commit()
