"""--native: one stack, root to leaf, from a sample's Python frames and C frames.

Each C frame of the interpreter's eval loop (`_PyEval_EvalFrameDefault`) is
replaced by the Python frames it was running; the walker recorded where each
such C call's frames end (`segments`: 3.10 runs one Python frame per call,
3.11 flags the first frame of a call `is_entry`, 3.12+ push a
`FRAME_OWNED_BY_CSTACK` entry frame per call). Other C frames stay where
they are. Interpreter plumbing (calls through vectorcall, `cfunction_call`,
the interpreter's start-up chain…) is hidden unless `native_all`.

The Python frames always come out whole and in their order, whatever the C
side holds: calls and segments are paired from the root when the C stack
was unwound to its end (a call just entered at the leaf may not have pushed
its entry frame yet), from the leaf when its root end is missing; Python
frames left unpaired go next to the nearest paired ones (or at the root when
the C stack has no eval call at all).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import Any, cast

from ..identity_memo import MISSING, IdentityMemo
from ..samples import Frame, FrameKind
from .base import EngineUnavailable
from .native_symbols import Symbolizer

_CHAIN_CACHE = 50_000  # chains of return addresses kept symbolized
_MERGE_CACHE = 50_000  # merged stacks kept (each holds its Python half)
NATIVE_DEPTH = 128  # C return addresses kept per --native sample
NO_LIBUNWIND = (
    "--native needs truestack built with libunwind: install libunwind-dev (Debian/Ubuntu) "
    "or libunwind-devel (Fedora/RHEL), then reinstall truestack"
)

_NATIVE = FrameKind.NATIVE.value
_START_MODULES = ("libc.so", "ld-linux")
_EVAL = re.compile(r"_PyEval_EvalFrameDefault(\.cold.*)?$")

# CPython internals between a call and the code it runs: hidden by default.
_PLUMBING = re.compile(
    r"(_?PyEval_|_?PyObject_(Vectorcall|Call|FastCall|MakeTpCall)|_?PyVectorcall|_PyFunction_Vectorcall"
    r"|method_vectorcall|cfunction_(vectorcall|call)|vectorcall_|slot_tp_call|slot_tp_init|type_call"
    r"|object_vacall|call_function|do_call_core|_PyObject_Call_Prepend|function_code_fastcall"
    r"|_?PyRun_|run_mod|run_eval_code_obj|pyrun_|pymain_|Py_RunMain|Py_BytesMain|main$|__libc_start_"
    r"|_start$|thread_run|pythread_wrapper|start_thread|__?clone|gen_send_ex|gen_iternext|_PyGen_"
    r"|builtin_exec|exec_code|_PyEval_Vector|partial_vectorcall|partial_call|context_run"
    r"|method_vectorcall_|_Py_call_|PyObject_Call|_PyCFunction"
    # CPython 3.12+'s perf trampolines (python -X perf): one per call from C into the eval loop
    r"|py::|py_trampoline_)"
)


_PLAIN, _EVAL_CALL, _PLUMBING_CALL = 0, 1, 2
_CLASS_OF: dict[str, int] = {}  # function name -> class: the regexes run once per name


def _class_of(name: str) -> int:
    c = _CLASS_OF.get(name)
    if c is None:
        c = _CLASS_OF[name] = _EVAL_CALL if _EVAL.match(name) else _PLUMBING_CALL if _PLUMBING.match(name) else _PLAIN
    return c


def is_eval_loop(frame: Frame) -> bool:
    return _class_of(frame.name) == _EVAL_CALL


def is_plumbing(frame: Frame) -> bool:
    return _class_of(frame.name) == _PLUMBING_CALL


def _groups(python: Sequence[Frame | None], segments: Sequence[int]) -> list[list[Frame]]:
    """Python frames (leaf first, None for a dropped shim) cut into one run per eval-loop C call."""
    groups, prev, size = [], 0, len(python)
    # On 3.10 every Python frame is a call of its own: this runs once per frame of most merges.
    whole = None not in python
    for end in segments:
        end = size if end > size else prev if end < prev else end
        run = python[prev:end]
        groups.append(cast("list[Frame]", list(run)) if whole else [f for f in run if f is not None])
        prev = end
    if prev < size:  # frames past the last recorded call: they belong to the root-most one
        rest = [f for f in python[prev:] if f is not None]
        if groups:
            groups[-1].extend(rest)
        else:
            groups.append(rest)
    return groups


def interleave(
    python: Sequence[Frame | None],
    segments: Sequence[int] | None,
    native: Sequence[Frame],
    complete: bool,
    show_all: bool = False,
) -> list[Frame]:
    """Leaf-first Python and native frames → one leaf-first list (see the module docstring)."""
    classes = [_CLASS_OF.get(f.name) or _class_of(f.name) for f in native]
    if segments is None:  # eval calls unknown (too many): Python at the root, C at the leaf
        groups, evals = [[f for f in python if f is not None]], []
    else:
        groups, evals = _groups(python, segments), [i for i, c in enumerate(classes) if c == _EVAL_CALL]
    root_extra: list[Frame] = []
    n = min(len(evals), len(groups))
    if complete:  # root-most call ↔ root-most run
        pairs = list(zip(evals[len(evals) - n :], groups[len(groups) - n :], strict=True))
        leaf_extra = [f for g in groups[: len(groups) - n] for f in g]
        if pairs:
            pairs[0] = (pairs[0][0], leaf_extra + pairs[0][1])
        else:
            root_extra = leaf_extra
    else:  # the root end is missing: leaf-most call ↔ leaf-most run
        pairs = list(zip(evals[:n], groups[:n], strict=True))
        root_extra = [f for g in groups[n:] for f in g]
    paired = dict(pairs)
    out: list[Frame] = []
    for i, frame in enumerate(native):
        if i in paired:
            out.extend(paired[i])
        elif show_all or classes[i] == _PLAIN:  # an unpaired eval call shows as plumbing does
            out.append(frame)
    out.extend(root_extra)
    if not show_all:  # the process's or thread's start in an unsymbolized libc (__libc_start_call_main, clone3)
        while out and out[-1].kind == _NATIVE and os.path.basename(out[-1].file).startswith(_START_MODULES):
            out.pop()
    return out


class NativeStacks:
    """A native engine's --native side: symbolize each drained sample's C frames and interleave them."""

    depth = NATIVE_DEPTH  # C return addresses the handler keeps per sample

    def __init__(self, show_all: bool) -> None:
        self.show_all = show_all
        self.symbols = Symbolizer()
        self._chains: dict[tuple[int, ...], tuple[Frame, ...]] = {}  # return addresses -> their frames
        # id of a drained address tuple -> (it, its leaf frame, its callers' frames)
        self._by_ips: dict[int, tuple[tuple[int, ...], Frame, tuple[Frame, ...]]] = {}
        # (ids of the Python half, the C leaf, the C callers, ...) -> (those three, the merged stack)
        self._merged: dict[tuple[Any, ...], tuple[Any, Any, Any, tuple[Frame, ...]]] = {}
        # a Python half -> the first equal one drained; and each drained one -> that one
        self._halves: dict[tuple[Frame | None, ...], tuple[Frame | None, ...]] = {}
        self._halves_by_id: IdentityMemo[tuple[Frame | None, ...], tuple[Frame | None, ...]] = IdentityMemo(
            _MERGE_CACHE
        )
        self.missing: dict[str, int] = {}  # reason -> samples whose C frames are missing or incomplete
        self.samples = 0

    @classmethod
    def wanted(cls, native: bool, native_all: bool, core: Any) -> NativeStacks | None:
        """The --native side of an engine, None without --native; EngineUnavailable when `core` (the
        _native module) was built without libunwind."""
        if not (native or native_all):
            return None
        if not getattr(core, "NATIVE_UNWIND", 0):
            raise EngineUnavailable(NO_LIBUNWIND)
        return cls(native_all)

    def sample_stack(
        self, raw: Any, with_root: Callable[[tuple[Frame, ...], str | None, bool], tuple[Frame, ...]]
    ) -> tuple[Frame, ...]:
        """A drained sample's whole stack, root first: its Python frames (`raw.frames`, shims as
        None; one object per equal stack, `python_half`) merged with its C
        frames, under `with_root(frames, partial, cut at max_depth)`. Each distinct merge is made
        once: a hot loop repeats both halves, so most samples cost a few dict lookups."""
        python = self.python_half(raw.frames)
        self.count(raw)
        leaf, callers = self.c_frames(raw)
        key = (id(python), id(leaf), id(callers), raw.segments, raw.native_missing, raw.partial, raw.depth)
        known = self._merged.get(key)
        if known is not None and known[0] is python and known[1] is leaf and known[2] is callers:
            return known[3]
        kept = len(python) - python.count(None)  # Python frames: what the true depth is compared with
        frames = with_root(self.merge(python, raw, leaf, callers), raw.partial, raw.depth > kept)
        if len(self._merged) >= _MERGE_CACHE:
            self._merged.clear()
        # The value holds what the key names by id, so no id in it can be reused while it is here.
        self._merged[key] = (python, leaf, callers, frames)
        return frames

    def python_half(self, python: tuple[Frame | None, ...]) -> tuple[Frame | None, ...]:
        """One object per equal Python half. The drain's cache makes one tuple per stack of
        instructions, so a loop whose lines repeat at moving instructions hands over equal tuples
        that are not the same object: on 3.10, where every Python call is a long C chain to merge
        again, 1,800 Python halves in 3,200 samples of bench/overhead's cpu_bound were 107 stacks."""
        same: tuple[Frame | None, ...] = self._halves_by_id.get(python)
        if same is not MISSING:
            return same
        first = self._halves.get(python)
        if first is None:
            if len(self._halves) >= _MERGE_CACHE:
                self._halves.clear()
            first = self._halves[python] = python
        self._halves_by_id.put(python, first)
        return first

    def forget_merges(self) -> None:
        """Lets go of the merged stacks (and the Python halves they hold) and of the drained
        address tuples: the run is over."""
        self._merged.clear()
        self._by_ips.clear()
        self._halves.clear()
        self._halves_by_id.clear()

    def count(self, raw: object) -> None:
        """Counts the sample, and why its C frames are missing if they are (the notes)."""
        if getattr(raw, "native", None) is None:
            return
        self.samples += 1
        why: str | None = getattr(raw, "native_missing", None)
        if why is not None:
            self.missing[why] = self.missing.get(why, 0) + 1

    def c_frames(self, raw: object) -> tuple[Frame | None, tuple[Frame, ...]]:
        """The sample's C frames, symbolized: (the interrupted function's, its callers' leaf first),
        (None, ()) without native data. Every frame is one object per function (the symbolizer
        interns them), and the callers' tuple one object per chain of return addresses: a hot loop
        repeats its chains while the interrupted instruction moves, so both halves compare by
        identity."""
        ips: tuple[int, ...] | None = getattr(raw, "native", None)
        if not ips:
            return None, ()
        # The drain hands equal address arrays over as one tuple (_csrc/wordcache.c): a hot loop's
        # samples find theirs by identity, without slicing or hashing up to 128 ints each.
        known = self._by_ips.get(id(ips))
        if known is not None and known[0] is ips:
            return known[1], known[2]
        frame = self.symbols.frame
        key = ips[1:]
        callers = self._chains.get(key)
        if callers is None:
            if len(self._chains) > _CHAIN_CACHE:
                self._chains.clear()
            callers = self._chains[key] = tuple(frame(ip, False) for ip in key)
        leaf = frame(ips[0], True)
        if len(self._by_ips) >= _CHAIN_CACHE:
            self._by_ips.clear()
        self._by_ips[id(ips)] = (ips, leaf, callers)  # holds ips: its id is not reused meanwhile
        return leaf, callers

    def merge(
        self, python_root_first: Sequence[Frame | None], raw: object, leaf: Frame | None, callers: tuple[Frame, ...]
    ) -> tuple[Frame, ...]:
        """The sample's Python frames and its C frames (`c_frames`) in one stack, root first."""
        if leaf is None:
            return tuple(f for f in python_root_first if f is not None)
        python = python_root_first[::-1]
        complete = getattr(raw, "native_missing", None) is None
        merged = interleave(python, getattr(raw, "segments", None), (leaf, *callers), complete, self.show_all)
        return tuple(reversed(merged))

    @staticmethod
    def counters(delta: Callable[[str], int]) -> dict[str, Any]:
        """Which unwinder unwound the samples (the profile's `extra`): the handler's own, from the
        modules' CFI, or libunwind, for samples the former hands over (see _csrc/cfi.c)."""
        return {"native_unwinder": {"cfi": delta("native_cfi_unwound"), "libunwind": delta("native_libunwind_unwound")}}

    def notes(self) -> list[str]:
        out = []
        if self.missing:
            parts = ", ".join(f"{n} {reason}" for reason, n in sorted(self.missing.items()))
            missing = sum(self.missing.values())
            out.append(f"native frames missing or cut short in {missing} of {self.samples} samples ({parts})")
        out.extend(f"native symbols unavailable: {e}" for e in self.symbols.errors)
        return out


__all__ = ["NativeStacks", "interleave", "is_eval_loop", "is_plumbing"]
