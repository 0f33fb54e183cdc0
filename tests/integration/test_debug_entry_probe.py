"""3.11's entry probes (debugger/entry_probe.py): code holding a breakpoint is
swapped for a copy that installs the frame-evaluation hook when it starts,
so an unrelated breakpoint costs nothing (an installed hook costs every
Python-to-Python call its inlining on 3.11).

The copies must behave exactly like the originals, so the first test runs a
zoo of code shapes through `with_probe` and compares; the others drive the
debugger in fresh interpreters.
"""

from __future__ import annotations

import sys

import pytest
from test_debug_fastpath import run

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="entry probes exist for 3.11's bytecode only"),
]


def test_a_probed_copy_behaves_like_its_original(tmp_path):
    out = run(
        tmp_path,
        """
        import asyncio, dis, traceback
        from truestack.debugger import entry_probe

        def gen(a):
            try:
                yield a
                raise ValueError("x")
            except ValueError:
                yield -1
            finally:
                yield 99

        def loop(n):
            while True:  # the loop head is the first instruction after RESUME
                n -= 1
                if n < 0:
                    return n

        def closure(x):
            def inner(y):
                return x + y
            x += 1
            return inner(1)

        async def coro(n):
            await asyncio.sleep(0)
            return [i * n for i in range(3)]

        def raises():
            a = 1
            return a / 0

        many = "def many():\\n    return [" + ", ".join(f"{i}.5" for i in range(300)) + "]\\n"
        exec(many)

        def results(f):
            if f is gen:
                return list(gen(5))
            if f is loop:
                return loop(3)
            if f is closure:
                return closure(2)
            if f is coro:
                return asyncio.run(coro(2))
            if f is many:
                return sum(many())
            try:
                raises()
            except ZeroDivisionError as exc:
                return [(fs.lineno, fs.line) for fs in traceback.extract_tb(exc.__traceback__)][-1]

        calls = []
        report = {}
        for f in (gen, loop, closure, coro, raises, many):
            code = f.__code__
            before = results(f)
            f.__code__ = entry_probe.with_probe(code, lambda: calls.append(1))
            n = len(calls)
            after = results(f)
            probed = f.__code__
            report[f.__name__] = {
                "same_result": before == after,
                "probe_calls": len(calls) - n,
                "same_lines": list(code.co_lines()) != list(probed.co_lines())
                and sorted({l for *_, l in code.co_lines() if l is not None})
                == sorted({l for *_, l in probed.co_lines() if l is not None}),
                "same_positions": [p for p in code.co_positions() if p[0] is not None]
                == [p for p in probed.co_positions() if p[0] is not None],
                "first_line": probed.co_firstlineno == code.co_firstlineno,
            }
        print(json.dumps(report))
    """,
    )
    assert set(out) == {"gen", "loop", "closure", "coro", "raises", "many"}
    for name, facts in out.items():
        assert facts == {
            "same_result": True,
            "probe_calls": 1,
            "same_lines": True,
            "same_positions": True,
            "first_line": True,
        }, name


def test_no_hook_until_breakpoint_code_starts_then_stops_at_the_line(tmp_path):
    """A breakpoint in a nested def that has not run yet (its code is a
    constant of the running module code), and one in a function defined
    before: no hook while neither runs; each stops at its line; clearing
    the breakpoints gives every function its own code object back."""
    out = run(
        tmp_path,
        """
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)

        def defined_before(x):
            return x + 1  # BEFORE

        original_before = defined_before.__code__
        d.set_break(__file__, line_of("LATER"))
        d.set_break(__file__, line_of("BEFORE"))
        fib(15)
        idle = hook_state()

        def make():
            def later(v):
                return v * 2  # LATER
            return later

        later = make()
        not_yet = hook_state()
        later(3)
        after_later = hook_state()
        defined_before(1)
        for bp in d.breaks.all():
            d.clear_break(bp.id)
        print(json.dumps({
            "idle": idle, "not_yet": not_yet, "after_later": after_later, "end": hook_state(),
            "stops": STOPS,
            "restored": defined_before.__code__ is original_before
            and not any(callable(c) for c in make().__code__.co_consts),
            "counters": fastpath.hook.counters(),
        }))
    """,
    )
    assert not out["idle"]["hook"] and not out["not_yet"]["hook"]
    assert out["after_later"]["hook"]
    assert [(s[0], s[2]) for s in out["stops"]] == [("later", "breakpoint"), ("defined_before", "breakpoint")]
    assert out["restored"]
    assert out["counters"]["probe_installs"] == 1
    assert not out["end"]["hook"] and out["end"]["gettrace"]


def test_a_breakpoint_in_a_module_not_imported_yet_is_probed_at_import(tmp_path):
    """The module's code is probed as it is loaded (a meta path finder in
    front of the others): no hook until its function runs, then a stop at
    the line; after the last breakpoint is cleared the finder is gone."""
    (tmp_path / "later_mod.py").write_text("def g(x):\n    return x - 1  # G\n\ndef other():\n    return 0\n")
    out = run(
        tmp_path,
        """
        import os
        from truestack.debugger import entry_probe
        mod_file = os.path.join(os.path.dirname(__file__), "later_mod.py")
        bp = d.set_break(mod_file, 2)
        at_set = hook_state()
        import later_mod
        probed = any(callable(c) for c in later_mod.g.__code__.co_consts)
        other_probed = any(callable(c) for c in later_mod.other.__code__.co_consts)
        after_import = hook_state()
        later_mod.other()
        after_other = hook_state()
        later_mod.g(5)
        after_g = hook_state()
        d.clear_break(bp.id)
        finders = [type(f).__name__ for f in sys.meta_path if isinstance(f, entry_probe._ProbingFinder)]
        print(json.dumps({"at_set": at_set, "after_import": after_import, "after_other": after_other,
                          "after_g": after_g, "probed": probed, "other_probed": other_probed,
                          "restored": not any(callable(c) for c in later_mod.g.__code__.co_consts),
                          "finders": finders, "stops": STOPS}))
    """,
    )
    assert not out["at_set"]["hook"] and not out["after_import"]["hook"] and not out["after_other"]["hook"]
    assert out["probed"] and not out["other_probed"]
    assert out["after_g"]["hook"]
    assert [(s[0], s[1]) for s in out["stops"]] == [("g", 2)]
    assert out["restored"] and out["finders"] == []


def test_a_breakpoint_in_code_already_running_uses_the_hook(tmp_path):
    """A frame already running cannot be probed: the hook is installed at
    once (it traces the thread from the frame's next call), and the
    breakpoint still hits."""
    out = run(
        tmp_path,
        """
        i = 0
        d.set_break(__file__, line_of("RUNNING"))
        running = hook_state()
        for i in range(2):
            i = i  # RUNNING
        print(json.dumps({"running": running, "stops": STOPS}))
    """,
    )
    assert out["running"]["hook"]
    assert [s[0] for s in out["stops"]] == ["<module>", "<module>"]
