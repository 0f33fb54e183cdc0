"""The breakpoint table: where breakpoints are and which code objects they touch.

Breakpoints are keyed by canonical file name and line, so they apply to every
code object compiled from that file (including ones not created yet). Backends
ask `code_has_breaks(code)` once per code object to decide whether to trace it;
the C fast path asks `sites_for(code)` instead, once per code object and
breakpoint change, and keeps the answer in the code object (debughook.c).
Each breakpoint's counts and compiled condition live in its `state`, which
both the C and the Python decision update (fastpath.py).
"""

from __future__ import annotations

import importlib
import inspect
import linecache
import os
import sys
import types
from collections.abc import Iterator
from typing import Any

from .conditions import compile_condition, fast_slot, local_refs, simple_form
from .fastpath import State, make_state


class BreakpointError(Exception):
    """A breakpoint request that cannot be honoured (bad file, line or function)."""


_canonic_cache: dict[str, str] = {}


def canonic(filename: str) -> str:
    """Absolute, normalised file name; pseudo-files like '<string>' stay as they are."""
    result = _canonic_cache.get(filename)
    if result is None:
        if filename.startswith("<") and filename.endswith(">"):
            result = filename
        else:
            result = os.path.normcase(os.path.abspath(filename))
        _canonic_cache[filename] = result
    return result


_code_lines_cache: dict[types.CodeType, frozenset[int]] = {}


def code_lines(code: types.CodeType) -> frozenset[int]:
    """Lines that have instructions in this code object (nested functions excluded)."""
    lines = _code_lines_cache.get(code)
    if lines is None:
        lines = frozenset(line for _s, _e, line in code.co_lines() if line is not None)
        _code_lines_cache[code] = lines
    return lines


def _all_code(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _all_code(const)


def executable_lines(filename: str) -> list[int]:
    """Sorted line numbers holding code anywhere in the file (empty if unreadable)."""
    source = "".join(linecache.getlines(filename))
    if not source:
        return []
    try:
        top = compile(source, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return []
    return sorted({line for code in _all_code(top) for line in code_lines(code)})


def first_body_line(code: types.CodeType) -> int:
    """Where a function breakpoint goes: the first line of the body, as pdb does."""
    body = [line for line in code_lines(code) if line > code.co_firstlineno]
    return min(body) if body else code.co_firstlineno


def resolve_file(name: str) -> str:
    """Find the file a user means: a path, or the tail of a loaded module's path."""
    if os.path.exists(name):
        return canonic(name)
    if name.startswith("<") and name.endswith(">"):
        return name
    tail = os.sep + name.lstrip(os.sep)
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and (path == name or path.endswith(tail)):
            return canonic(path)
    for entry in sys.path:
        candidate = os.path.join(entry or os.curdir, name)
        if os.path.exists(candidate):
            return canonic(candidate)
    raise BreakpointError(f"no such file: {name}")


def find_code_in_file(filename: str, qualname: str) -> types.CodeType | None:
    """A function's code found by qualified name in a file's source, for
    functions whose `def` has not run yet (like pdb's `b func` at the start)."""
    source = "".join(linecache.getlines(filename))
    try:
        top = compile(source, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None

    def walk(code: types.CodeType, prefix: str) -> types.CodeType | None:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                name = getattr(const, "co_qualname", prefix + const.co_name)
                if name == qualname:
                    return const
                # 3.10 has no co_qualname: approximate it (classes and functions alike)
                found = walk(const, name + ".")
                if found is not None:
                    return found
        return None

    return walk(top, "")


def resolve_function(
    spec: object, namespace: dict[str, Any] | None = None, filename: str | None = None
) -> types.CodeType:
    """Code object of a function given as an object, 'module:qualname', or a name
    visible in `namespace` (the stopped frame's globals and locals) or defined
    in `filename` (the current file)."""
    obj = spec
    if isinstance(spec, str):
        if ":" in spec:
            modname, _, qualname = spec.partition(":")
            module = sys.modules.get(modname)
            if module is None:
                try:
                    module = importlib.import_module(modname)
                except Exception as exc:
                    raise BreakpointError(f"cannot import module {modname!r}: {exc}") from None
            obj, path = module, qualname
            module_file = getattr(module, "__file__", None)
            if not hasattr(module, qualname.partition(".")[0]) and module_file:
                code = find_code_in_file(module_file, qualname)
                if code is not None:
                    return code
        else:
            head, _, path = spec.partition(".")
            if (namespace is None or head not in namespace) and filename:
                code = find_code_in_file(filename, spec)
                if code is not None:
                    return code
            if namespace is None or head not in namespace:
                raise BreakpointError(f"no function named {head!r} here (use 'module:qualname' or pass the function)")
            obj = namespace[head]
        for part in filter(None, path.split(".")):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                raise BreakpointError(f"no function {spec!r}: {part!r} not found") from None
    obj = inspect.unwrap(obj) if callable(obj) else obj
    if isinstance(obj, (classmethod, staticmethod)):
        obj = obj.__func__
    obj = getattr(obj, "__func__", obj)  # bound methods
    code = getattr(obj, "__code__", None)
    if not isinstance(code, types.CodeType):
        raise BreakpointError(f"{spec!r} is not a Python function (no code to break in)")
    return code


def _condition_state(cond: str | None, temporary: bool) -> State:
    """Compile `cond` once and split off its simple form for the C side."""
    if not cond:
        return make_state(None, -1, None, None, temporary)
    try:
        cond_code = compile_condition(cond)
    except SyntaxError as exc:
        raise BreakpointError(f"bad condition {cond!r}: {exc.msg}") from None
    simple = simple_form(cond)
    if simple is None:
        return make_state(cond_code, -1, None, None, temporary)
    return make_state(cond_code, simple.op, simple.constant, simple.modulus, temporary)


class Breakpoint:
    """One breakpoint. Its counts and condition live in `state` (C-backed
    when truestack._debughook loaded), which the fast path updates."""

    def __init__(
        self, id: int, file: str, line: int, cond: str | None = None, temporary: bool = False, func: str | None = None
    ) -> None:
        self.id = id
        self.file = file  # canonical
        self.line = line
        self.func = func  # label for function breakpoints
        self.cond = cond or None
        self.state = _condition_state(cond, temporary)
        self.simple = simple_form(cond) if cond else None

    def set_condition(self, cond: str | None) -> None:
        """Replace the condition (None: unconditional); counts carry over."""
        old = self.state
        state = _condition_state(cond, old.temporary)
        state.enabled, state.hits, state.ignore = old.enabled, old.hits, old.ignore
        self.cond, self.state = cond or None, state
        self.simple = simple_form(cond) if cond else None

    @property
    def cond_code(self) -> types.CodeType | None:
        return self.state.cond_code

    @property
    def temporary(self) -> bool:
        return self.state.temporary

    @property
    def enabled(self) -> bool:
        return self.state.enabled

    @enabled.setter
    def enabled(self, value: bool) -> None:
        self.state.enabled = bool(value)

    @property
    def hits(self) -> int:
        return self.state.hits

    @property
    def ignore(self) -> int:
        return self.state.ignore

    @ignore.setter
    def ignore(self, value: int) -> None:
        self.state.ignore = max(0, int(value))

    def candidate_for(self, code: types.CodeType) -> tuple[State, Breakpoint, int, tuple[tuple[str, int], ...] | None]:
        """What the C side needs to decide this breakpoint in frames of `code`:
        the fast-local slot of the simple condition's name, and the slots of
        the locals the full condition reads (None: use frame.f_locals)."""
        slot = fast_slot(code, self.simple.name) if self.simple else -1
        cond_code = self.state.cond_code
        refs = local_refs(code, cond_code) if cond_code is not None else ()
        return self.state, self, slot, refs

    def describe(self) -> str:
        where = f"{self.file}:{self.line}"
        parts = [f"{'Temporary breakpoint' if self.temporary else 'Breakpoint'} {self.id} at {where}"]
        if self.func:
            parts.append(f"in {self.func}")
        if self.cond:
            parts.append(f"if {self.cond}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"<Breakpoint {self.id} {self.file}:{self.line}>"


class BreakpointTable:
    def __init__(self) -> None:
        self._next_id = 1
        self._by_id: dict[int, Breakpoint] = {}
        # raw co_filename -> {line: [Breakpoint]}; raw names avoid canonicalising on the hot path
        self._by_file: dict[str, dict[int, list[Breakpoint]]] = {}
        self._raw_names: dict[str, dict[int, list[Breakpoint]] | None] = {}
        self.version = 0  # bumped when a breakpoint is added, removed or its condition changes

    def __bool__(self) -> bool:
        return bool(self._by_id)

    def all(self) -> list[Breakpoint]:
        return sorted(self._by_id.values(), key=lambda b: b.id)

    def get(self, bp_id: int) -> Breakpoint:
        try:
            return self._by_id[int(bp_id)]
        except (KeyError, ValueError, TypeError):
            raise BreakpointError(f"no breakpoint number {bp_id}") from None

    def add(
        self,
        file: str,
        line: int,
        cond: str | None = None,
        temporary: bool = False,
        func: str | None = None,
        exact: bool = False,
    ) -> tuple[Breakpoint, int | None]:
        """Add a breakpoint; returns it and the requested line when it had to move."""
        if cond:
            _condition_state(cond, temporary)  # a bad condition fails before anything changes
        moved_from = None
        if not exact:
            lines = executable_lines(file)
            if not lines:
                raise BreakpointError(f"cannot read Python source of {file}")
            if line not in lines:
                later = [candidate for candidate in lines if candidate > line]
                if not later:
                    raise BreakpointError(f"no code at or after line {line} in {file}")
                moved_from, line = line, later[0]
        bp = Breakpoint(self._next_id, file, line, cond, temporary, func)
        self._next_id += 1
        self._by_id[bp.id] = bp
        self._by_file.setdefault(file, {}).setdefault(line, []).append(bp)
        self._raw_names.clear()
        self.version += 1
        return bp, moved_from

    def set_condition(self, bp_id: int, cond: str | None) -> Breakpoint:
        bp = self.get(bp_id)
        bp.set_condition(cond)
        self.version += 1
        return bp

    def remove(self, bp_id: int) -> Breakpoint:
        bp = self.get(bp_id)
        del self._by_id[bp.id]
        at_line = self._by_file[bp.file][bp.line]
        at_line.remove(bp)
        if not at_line:
            del self._by_file[bp.file][bp.line]
            if not self._by_file[bp.file]:
                del self._by_file[bp.file]
        self._raw_names.clear()
        self.version += 1
        return bp

    def clear(self) -> None:
        for bp_id in list(self._by_id):
            self.remove(bp_id)

    def lines_in(self, co_filename: str) -> dict[int, list[Breakpoint]] | None:
        """Breakpoints of a file by line, looked up by a code object's raw file name."""
        try:
            return self._raw_names[co_filename]
        except KeyError:
            lines = self._by_file.get(canonic(co_filename))
            self._raw_names[co_filename] = lines
            return lines

    def code_has_breaks(self, code: types.CodeType) -> bool:
        lines = self.lines_in(code.co_filename)
        return bool(lines) and not code_lines(code).isdisjoint(lines or ())

    def sites_for(self, code: types.CodeType) -> dict[int, list[tuple[Any, ...]]] | None:
        """The breakpoints on `code`'s lines, as the C side's classify callback
        hands them over: {line: [candidate_for(code), ...]}, None if none."""
        lines = self.lines_in(code.co_filename)
        if not lines:
            return None
        hit = code_lines(code).intersection(lines)
        if not hit:
            return None
        return {line: [bp.candidate_for(code) for bp in lines[line]] for line in hit}
