"""Entry probes: 3.11's breakpoints without a frame-evaluation hook until one is needed.

On 3.11 any PEP 523 hook costs every Python-to-Python call its inlining
(about 1.6x on call-bound code), so an installed hook makes an *unrelated*
breakpoint expensive. Instead, each code object holding a breakpoint is
swapped for a copy that calls `_debughook.entered()` right after its RESUME:
the first time such code starts running, that call installs the hook (from
then on everything works as on 3.10) and line-traces the frame. Until then
no hook exists and nothing else is paid.

The copy differs from the original only by those few instructions, which
carry no line number (no line event, no traceback line), so its `co_lines()`,
tracebacks, names and behaviour are the original's. Every holder of the
original is redirected: functions (`__code__`), the constants of enclosing
code (a nested `def` or lambda that has not run yet), generators and frames
cannot be (they already run it), which is why a breakpoint in code that is
already running falls back to the hook at once (settrace.py decides).

Only 3.11's bytecode format is handled: 3.10's hook is free and 3.12+ use
sys.monitoring.
"""

from __future__ import annotations

import dis
import gc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Sequence

_OP = dis.opmap
# Code units of inline cache after each opcode (3.11+; this module is not used before).
_CACHES: list[int] = getattr(dis, "_inline_cache_entries", [])
_NO_LOCATION = 15  # 3.11 line-table entry kinds (Objects/locations.md)
_LONG_LOCATION = 14


def supported() -> bool:
    return sys.version_info[:2] == (3, 11)


# -- 3.11 tables -------------------------------------------------------------


def _exception_entries(code: types.CodeType) -> list[tuple[int, int, int, int]]:
    """(start, end, target, depth<<1 | lasti) in code units, end exclusive."""
    out: list[tuple[int, int, int, int]] = []
    if sys.version_info < (3, 11):
        return out
    data = iter(code.co_exceptiontable)

    def varint() -> int:  # big-endian 6-bit groups, bit 6 = more follow
        b = next(data)
        val = b & 63
        while b & 64:
            b = next(data)
            val = (val << 6) | (b & 63)
        return val

    while True:
        try:
            start = varint()
        except StopIteration:
            return out
        size, target, depth_lasti = varint(), varint(), varint()
        out.append((start, start + size, target, depth_lasti))


def _encode_exception_entries(entries: Iterable[tuple[int, int, int, int]]) -> bytes:
    out = bytearray()

    def varint(value: int, first: int) -> None:
        groups = [value & 63]
        value >>= 6
        while value:
            groups.append(value & 63)
            value >>= 6
        for i, group in enumerate(reversed(groups)):
            more = 64 if i < len(groups) - 1 else 0
            out.append(group | more | (first if i == 0 else 0))

    for start, end, target, depth_lasti in entries:
        varint(start, 128)
        varint(end - start, 0)
        varint(target, 0)
        varint(depth_lasti, 0)
    return bytes(out)


Position = tuple[int | None, int | None, int | None, int | None]
SwapConst = Callable[[tuple[object, ...], int, object], None]  # _debughook.swap_const


def _encode_positions(positions: list[Position], first_line: int) -> bytes:
    """A 3.11 line table for one position per code unit (long and no-location entries only)."""
    out = bytearray()

    def uvarint(value: int) -> None:  # little-endian 6-bit groups, bit 6 = more follow
        while value >= 64:
            out.append(64 | (value & 63))
            value >>= 6
        out.append(value)

    line_base = first_line
    i = 0
    while i < len(positions):
        pos = positions[i]
        run = 1
        while run < 8 and i + run < len(positions) and positions[i + run] == pos:
            run += 1
        line, end_line, col, end_col = pos
        if line is None:
            out.append(0x80 | (_NO_LOCATION << 3) | (run - 1))
        else:
            out.append(0x80 | (_LONG_LOCATION << 3) | (run - 1))
            delta = line - line_base
            uvarint((-delta << 1) | 1 if delta < 0 else delta << 1)
            uvarint((end_line if end_line is not None else line) - line)
            uvarint(col + 1 if col is not None else 0)
            uvarint(end_col + 1 if end_col is not None else 0)
            line_base = line
        i += run
    return bytes(out)


# -- the probe ---------------------------------------------------------------


def with_probe(code: types.CodeType, probe: Callable[[], object]) -> types.CodeType:
    """A copy of `code` that calls `probe()` once it starts running (after its first RESUME)."""
    if sys.version_info < (3, 11):
        raise RuntimeError("entry probes are written for 3.11's bytecode")
    raw = code.co_code
    resume = next(i for i in range(0, len(raw), 2) if raw[i] == _OP["RESUME"])
    at = resume // 2 + 1  # in code units
    const = len(code.co_consts)
    call: list[tuple[int, int]] = []
    if const > 255:
        call += [(_OP["EXTENDED_ARG"], const >> 8)]
    call += [(_OP["PUSH_NULL"], 0), (_OP["LOAD_CONST"], const & 255)]
    for op in ("PRECALL", "CALL"):
        call += [(_OP[op], 0)] + [(0, 0)] * _CACHES[_OP[op]]  # CACHE entries are opcode 0
    call += [(_OP["POP_TOP"], 0)]
    inserted = bytes(b for pair in call for b in pair)
    shift = len(call)

    def moved(offset: int) -> int:
        return offset + shift if offset >= at else offset

    # Jumps are relative in 3.11 and none crosses the prelude, so only the
    # exception table's absolute offsets move.
    entries = [(moved(s), moved(e), moved(t), d) for s, e, t, d in _exception_entries(code)]
    positions: list[Position] = list(code.co_positions())
    positions[at:at] = [(None, None, None, None)] * shift
    return code.replace(
        co_code=raw[: at * 2] + inserted + raw[at * 2 :],
        co_consts=(*code.co_consts, probe),
        co_stacksize=max(code.co_stacksize, 2),
        co_linetable=_encode_positions(positions, code.co_firstlineno),
        co_exceptiontable=_encode_exception_entries(entries),
    )


# -- finding and redirecting the holders of a code object -------------------


def _nested(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _nested(const)


def live_code(extra_roots: Iterable[types.CodeType] = ()) -> dict[int, types.CodeType]:
    """Every code object reachable from live functions, running frames and
    suspended generators, with the code nested in them (not yet run defs)."""
    roots: list[types.CodeType] = list(extra_roots)
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType):
            roots.append(obj.__code__)
        elif isinstance(obj, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
            code = getattr(obj, "gi_code", None) or getattr(obj, "cr_code", None) or getattr(obj, "ag_code", None)
            if code is not None:
                roots.append(code)
    for top in sys._current_frames().values():
        frame: types.FrameType | None = top
        while frame is not None:
            roots.append(frame.f_code)
            frame = frame.f_back
    found: dict[int, types.CodeType] = {}
    for root in roots:
        if id(root) in found:
            continue
        for code in _nested(root):
            found.setdefault(id(code), code)
    return found


def running_code() -> set[int]:
    """ids of code objects with a frame: on a thread's stack or suspended in a generator."""
    ids: set[int] = set()
    for top in sys._current_frames().values():
        frame: types.FrameType | None = top
        while frame is not None:
            ids.add(id(frame.f_code))
            frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
            frame = getattr(obj, "gi_frame", None) or getattr(obj, "cr_frame", None) or getattr(obj, "ag_frame", None)
            if frame is not None:
                ids.add(id(frame.f_code))
    return ids


class Redirect:
    """One code object swapped for its probed copy everywhere it can be, and back."""

    def __init__(
        self,
        original: types.CodeType,
        probed: types.CodeType,
        swap_const: SwapConst,
    ) -> None:
        self.original = original
        self.probed = probed
        self._swap_const = swap_const
        self._consts: list[tuple[tuple[object, ...], int]] = []

    def apply(self, functions: Iterable[types.FunctionType], code_objects: Iterable[types.CodeType]) -> None:
        for func in functions:
            if func.__code__ is self.original:
                func.__code__ = self.probed
        for holder in code_objects:
            consts = holder.co_consts
            for i, const in enumerate(consts):
                if const is self.original:
                    self._swap_const(consts, i, self.probed)
                    self._consts.append((consts, i))

    def undo(self) -> None:
        # Functions made since (a nested def, a module imported with probes) hold the copy too.
        for obj in gc.get_objects():
            if isinstance(obj, types.FunctionType) and obj.__code__ is self.probed:
                obj.__code__ = self.original
        for consts, i in self._consts:
            if consts[i] is self.probed:
                self._swap_const(consts, i, self.original)
        self._consts.clear()


class Probes:
    """The code objects currently redirected to their probed copies."""

    def __init__(self, probe: Callable[[], object], swap_const: SwapConst) -> None:
        self._probe = probe
        self._swap_const = swap_const
        self._by_original: dict[int, Redirect] = {}
        self._originals: dict[int, types.CodeType] = {}  # id(probed copy) -> original

    def original(self, code: types.CodeType) -> types.CodeType:
        return self._originals.get(id(code), code)

    def is_probed(self, code: types.CodeType) -> bool:
        return id(code) in self._originals

    def redirect(self, targets: Iterable[types.CodeType]) -> None:
        """Probe exactly `targets` (originals): new ones are redirected, dropped ones restored."""
        wanted = {id(code): code for code in targets}
        for key in [key for key in self._by_original if key not in wanted]:
            self._drop(key)
        if not wanted:
            return
        functions = [obj for obj in gc.get_objects() if isinstance(obj, types.FunctionType)]
        holders = list(live_code().values())
        for key, code in wanted.items():
            redirect = self._by_original.get(key)
            if redirect is None:
                redirect = self._by_original[key] = Redirect(code, with_probe(code, self._probe), self._swap_const)
                self._originals[id(redirect.probed)] = code
            redirect.apply(functions, holders)

    def clear(self) -> None:
        for key in list(self._by_original):
            self._drop(key)
        self.watch_imports()

    def watch_imports(
        self, wants_file: Callable[[str], bool] | None = None, needs: Callable[[types.CodeType], bool] | None = None
    ) -> None:
        """Probe the code objects that `needs` a probe in modules imported from now on
        from files that `wants_file`; no arguments: stop."""
        for finder in [f for f in sys.meta_path if isinstance(f, _ProbingFinder)]:
            sys.meta_path.remove(finder)
        if wants_file is not None and needs is not None:
            rewrite = needs  # bound now: the finder outlives this call
            sys.meta_path.insert(0, _ProbingFinder(wants_file, lambda code: self._probe_tree(code, rewrite)))

    def _probe_tree(self, code: types.CodeType, needs: Callable[[types.CodeType], bool]) -> types.CodeType:
        """`code` (not running yet: a module's, fresh from its loader) with every
        nested code object that `needs` a probe probed, parents rebuilt around them."""
        consts = tuple(
            self._probe_tree(const, needs) if isinstance(const, types.CodeType) else const for const in code.co_consts
        )
        if any(new is not old for new, old in zip(consts, code.co_consts, strict=True)):
            code = code.replace(co_consts=consts)
        if not needs(code):
            return code
        redirect = Redirect(code, with_probe(code, self._probe), self._swap_const)
        self._by_original[id(code)] = redirect
        self._originals[id(redirect.probed)] = code
        return redirect.probed

    def _drop(self, key: int) -> None:
        redirect = self._by_original.pop(key)
        redirect.undo()
        del self._originals[id(redirect.probed)]


class _ProbingFinder:
    """A meta path finder in front of the others: it finds nothing itself, but
    the source or bytecode loader of the spec the others find gets a
    `get_code` that probes the module's code before it runs."""

    def __init__(self, wants_file: Callable[[str], bool], rewrite: Callable[[types.CodeType], types.CodeType]) -> None:
        self._wants_file = wants_file
        self._rewrite = rewrite

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target)
            if spec is None:
                continue
            loader = spec.loader
            if (
                spec.origin
                and self._wants_file(spec.origin)
                and isinstance(loader, (importlib.machinery.SourceFileLoader, importlib.machinery.SourcelessFileLoader))
            ):
                self._probe_loader(loader)
            return spec
        return None

    def _probe_loader(
        self, loader: importlib.machinery.SourceFileLoader | importlib.machinery.SourcelessFileLoader
    ) -> None:
        get_code = loader.get_code
        rewrite = self._rewrite

        def probed_code(name: str) -> types.CodeType | None:
            code = get_code(name)
            return rewrite(code) if code is not None else None

        loader.get_code = probed_code  # type: ignore[assignment]  # this loader instance only
