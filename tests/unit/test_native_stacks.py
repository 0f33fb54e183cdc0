"""--native interleaving (engines/native_stacks.py) on made-up stacks: the rules, and that Python frames always survive."""
from __future__ import annotations

import random

from truestack.engines.native_stacks import interleave
from truestack.samples import Frame


def py(name: str) -> Frame:
    return Frame(name, "prog.py", 1, 1)


def c(name: str, module: str = "/usr/lib/libfoo.so") -> Frame:
    return Frame(name, module, 0, 0, "native")


EVAL = c("_PyEval_EvalFrameDefault", "/usr/lib/libpython3.12.so")


def names(frames: list[Frame]) -> list[str]:
    return [f.name for f in frames]


def test_each_eval_call_is_replaced_by_the_python_frames_it_ran():
    # leaf first: compare ran in the inner eval call, caller/<module> in the outer one
    python = [py("compare"), py("caller"), py("<module>")]
    native = [c("_CallPythonObject"), EVAL, c("qsort"), c("cfunction_call"), EVAL, c("main")]
    out = interleave(python, [1, 3], native, complete=True)
    assert names(out) == ["_CallPythonObject", "compare", "qsort", "caller", "<module>"]


def test_native_all_keeps_plumbing_and_shows_unpaired_eval_calls():
    python = [py("f")]
    native = [c("deflate"), EVAL, c("_PyObject_Vectorcall"), EVAL]
    out = interleave(python, [1], native, complete=True, show_all=True)
    assert names(out) == ["deflate", "_PyEval_EvalFrameDefault", "_PyObject_Vectorcall", "f"]
    assert names(interleave(python, [1], native, complete=True)) == ["deflate", "f"]


def test_a_call_just_entered_at_the_leaf_does_not_shift_the_pairing():
    # the leaf eval call has not pushed its entry frame yet: pair from the root
    python = [py("inner"), py("outer")]
    native = [EVAL, c("qsort"), EVAL, c("x"), EVAL]
    out = interleave(python, [1, 2], native, complete=True)
    assert names(out) == ["qsort", "inner", "x", "outer"]


def test_an_incomplete_c_stack_pairs_from_the_leaf_and_puts_the_rest_at_the_root():
    python = [py("inner"), py("outer"), py("<module>")]
    native = [c("deflate"), EVAL]  # cut short: the outer calls are missing
    out = interleave(python, [1, 2, 3], native, complete=False)
    assert names(out) == ["deflate", "inner", "outer", "<module>"]


def test_no_eval_call_or_unknown_segments_put_python_at_the_root():
    python = [py("f"), py("g")]
    native = [c("deflate"), c("compress")]
    assert names(interleave(python, [1, 2], native, complete=True)) == ["deflate", "compress", "f", "g"]
    assert names(interleave(python, None, [c("deflate"), EVAL], complete=True)) == ["deflate", "f", "g"]


def test_process_start_in_an_unsymbolized_libc_is_hidden():
    python = [py("f")]
    native = [EVAL, c("libc.so.6+0x27200", "/usr/lib/x86_64-linux-gnu/libc.so.6")]
    assert names(interleave(python, [1], native, complete=True)) == ["f"]


def test_python_frames_always_come_out_whole_and_in_order():
    rng = random.Random(7)
    for _ in range(2000):
        n = rng.randrange(0, 8)
        python: list[Frame | None] = [py(f"p{i}") for i in range(n)]
        if n and rng.random() < 0.2:
            python[rng.randrange(n)] = None  # a dropped shim
        cuts = sorted(rng.randrange(0, n + 1) for _ in range(rng.randrange(0, 5)))
        native = [rng.choice([EVAL, c("a"), c("cfunction_call"), c("b")]) for _ in range(rng.randrange(0, 10))]
        segments = None if rng.random() < 0.1 else cuts
        for complete in (True, False):
            for show_all in (True, False):
                out = interleave(python, segments, native, complete, show_all)
                assert [f for f in out if f.kind == "python"] == [f for f in python if f is not None]


def test_equal_python_halves_drained_as_different_tuples_are_merged_once(monkeypatch):
    # The drain's cache makes one tuple per stack of instructions: the same lines at other
    # instructions come as an equal tuple that is another object. Merging each again cost 3.10,
    # whose every Python call is a long C chain, ~30 us a sample.
    from types import SimpleNamespace

    from truestack.engines import native_stacks

    symbols = {0x10: c("deflate"), 0x20: EVAL, 0x30: c("qsort")}
    stacks = native_stacks.NativeStacks(show_all=False)
    stacks.symbols = SimpleNamespace(frame=lambda ip, leaf: symbols[ip])
    merges = []
    real = native_stacks.interleave
    monkeypatch.setattr(native_stacks, "interleave", lambda *a, **k: merges.append(1) or real(*a, **k))
    ips = (0x10, 0x20, 0x30)
    out = []
    for _ in range(3):
        python = tuple([py("<module>"), py("f")])  # root first, a new tuple each time
        raw = SimpleNamespace(frames=python, native=ips, segments=(1,), native_missing=None, partial=None, depth=2)
        out.append(stacks.sample_stack(raw, lambda frames, partial, cut: frames))
    assert names(out[0]) == ["qsort", "<module>", "f", "deflate"]
    assert out[0] == out[1] == out[2]
    assert len(merges) == 1
