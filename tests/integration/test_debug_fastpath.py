"""The debugger's breakpoint fast path (truestack._debughook), run in fresh interpreters.

Each scenario is a small program that drives a Debugger directly and prints
what it saw as JSON; most run twice, on the C fast path and on the Python
path (TRUESTACK_DEBUG_FASTPATH=0), and both must give pdb's answers.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import truestack_env

pytestmark = pytest.mark.timeout(120)

PATHS = ["c", "python"]

PRELUDE = '''
import asyncio, json, sys, threading
from truestack.debugger import fastpath
from truestack.debugger.core import Debugger

STOPS = []
SEEN = []  # the stopped frame's `i`

class Recorder(Debugger):
    messages = []
    def message(self, text):
        self.messages.append(text)
    def user_line(self, frame, stop):
        SEEN.append(frame.f_locals.get("i"))
        STOPS.append([frame.f_code.co_name, frame.f_lineno, stop.reason, stop.breakpoint.id if stop.breakpoint else None])

def line_of(marker):
    with open(__file__) as fh:
        for number, text in enumerate(fh, 1):
            if text.rstrip().endswith("# " + marker):
                return number
    raise LookupError(marker)

def hook_state():
    mod = fastpath.hook
    tool_free = True
    if sys.version_info >= (3, 12):
        tool_free = all(sys.monitoring.get_tool(t) != "truestack-debug" for t in range(6))
    return {"hook": bool(mod and mod.hook_installed()), "gettrace": sys.gettrace() is None,
            "thread_traced": bool(mod and mod.thread_traced()), "tool_free": tool_free}

d = Recorder()
'''


def run(tmp_path, body: str, path: str = "c") -> dict:
    prog = tmp_path / "prog.py"
    prog.write_text(PRELUDE + textwrap.dedent(body))
    env = truestack_env(**({"TRUESTACK_DEBUG_FASTPATH": "0"} if path == "python" else {}))
    result = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True, timeout=100,
                            cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("path", PATHS)
def test_breakpoints_hit_before_and_after_definition_generators_coroutines_threads(tmp_path, path):
    out = run(tmp_path, '''
        def before(x):
            y = x + 1  # BEFORE
            return y

        d.set_break(__file__, line_of("BEFORE"))
        d.set_break(__file__, line_of("AFTER"))
        d.set_break(__file__, line_of("GEN"))
        d.set_break(__file__, line_of("CORO"))
        d.set_break(__file__, line_of("THREAD"))

        def after(x):
            return x * 2  # AFTER

        def gen(n):
            for i in range(n):
                yield i  # GEN

        async def coro(n):
            total = 0
            for i in range(n):
                await asyncio.sleep(0)
                total += i  # CORO
            return total

        def in_thread():
            return 7  # THREAD

        before(1); after(2); list(gen(2)); asyncio.run(coro(2))
        t = threading.Thread(target=in_thread); t.start(); t.join()
        state_with = hook_state()
        d.clear_all_breaks()
        print(json.dumps({"stops": STOPS, "with": state_with, "after": hook_state(), "fast": fastpath.hook is not None}))
    ''', path)
    assert out["fast"] is (path == "c")
    lines = [(name, reason) for name, _line, reason, _bp in out["stops"]]
    assert lines == [("before", "breakpoint"), ("after", "breakpoint"), ("gen", "breakpoint"), ("gen", "breakpoint"),
                     ("coro", "breakpoint"), ("coro", "breakpoint"), ("in_thread", "breakpoint")]
    assert [bp for *_rest, bp in out["stops"]] == [1, 2, 3, 3, 4, 4, 5]
    if path == "c" and sys.version_info < (3, 12):
        assert out["with"]["hook"] and out["with"]["gettrace"]  # breakpoints only: no Python trace function
    after = out["after"]
    assert not after["hook"] and after["gettrace"] and not after["thread_traced"] and after["tool_free"]


@pytest.mark.parametrize("path", PATHS)
def test_thread_started_before_the_breakpoint(tmp_path, path):
    out = run(tmp_path, '''
        def worker(go, done):
            go.wait()
            helper()
            done.set()

        def helper():
            return 3  # HELPER

        go, done = threading.Event(), threading.Event()
        t = threading.Thread(target=worker, args=(go, done)); t.start()
        d.set_break(__file__, line_of("HELPER"))
        go.set(); t.join()
        d.clear_all_breaks()
        print(json.dumps({"stops": STOPS, "after": hook_state()}))
    ''', path)
    if path == "python" and sys.version_info < (3, 12):
        # The fallback's known limit (README, Debugging): settrace reaches only threads started after it.
        assert out["stops"] == [], out
        return
    assert [(n, r) for n, _l, r, _b in out["stops"]] == [("helper", "breakpoint")]
    assert not out["after"]["hook"] and out["after"]["gettrace"]


@pytest.mark.parametrize("path", PATHS)
def test_condition_and_ignore_changed_while_set(tmp_path, path):
    out = run(tmp_path, '''
        def f(i):
            return i  # LINE

        bp = d.set_break(__file__, line_of("LINE"), "i == 2")
        for i in range(5): f(i)
        hits = [bp.hits]
        d.set_condition(bp.id, "i >= 3")
        for i in range(5): f(i)
        hits.append(bp.hits)
        d.set_condition(bp.id, None)
        d.set_ignore(bp.id, 2)
        for i in range(5): f(i)
        hits.append(bp.hits)
        print(json.dumps({"seen": SEEN, "hits": hits, "cond": bp.cond}))
    ''', path)
    assert out["seen"] == [2, 3, 4, 2, 3, 4]
    assert out["hits"] == [1, 3, 8]
    assert out["cond"] is None


@pytest.mark.parametrize("path", PATHS)
def test_counts_when_breakpoints_do_not_shadow_each_other(tmp_path, path):
    out = run(tmp_path, '''
        def f(i):
            a = i  # A
            b = i  # B
            c = i  # C
            return a + b + c

        cond = d.set_break(__file__, line_of("A"), "i % 3 == 0")
        d.set_ignore(cond.id, 2)
        temp = d.set_break(__file__, line_of("B"), "i > 4", temporary=True)
        plain = d.set_break(__file__, line_of("C"))
        d.set_ignore(plain.id, 8)
        d.set_break(__file__, line_of("C"), "undefined_name > 0")  # raises: stops every time, as pdb
        for i in range(10):
            f(i)
        print(json.dumps({"stops": STOPS, "hits": [cond.hits, temp.hits, plain.hits],
                          "left": [b.id for b in d.breaks.all()], "messages": Recorder.messages}))
    ''', path)
    assert out["hits"] == [4, 1, 10]  # cond true at 0, 3, 6, 9; temp once; plain every call
    counts = {}
    for *_rest, bp in out["stops"]:
        counts[bp] = counts.get(bp, 0) + 1
    assert counts == {1: 2, 2: 1, 3: 2, 4: 8}  # cond: 6 and 9 after two ignored; plain: last two; erroring: the rest
    assert out["left"] == [1, 3, 4]  # the temporary went at its stop
    assert sum("error in condition of breakpoint 4" in m and "NameError" in m for m in out["messages"]) == 8


SIMPLE = '''
import math

class Weird:
    def __init__(self, v): self.v = v
    def __eq__(self, other): CALLS.append("eq"); return self.v == other
    def __lt__(self, other): CALLS.append("lt"); return self.v < other
    def __gt__(self, other): CALLS.append("gt"); return self.v > other
    def __le__(self, other): CALLS.append("le"); return self.v <= other
    def __ge__(self, other): CALLS.append("ge"); return self.v >= other
    def __ne__(self, other): CALLS.append("ne"); return self.v != other
    def __mod__(self, k): CALLS.append("mod"); return self.v % k
    __hash__ = None

CALLS = []
g = 5

def probe(v):
    return v  # PROBE

def probe_global(v):
    return v  # PROBE_GLOBAL

CONDITIONS = ["v == 3", "v != 3", "v < 3", "v <= 3", "v > 3", "v >= 3", "3 < v", "-2 >= v", "v == 2.5",
              "v == 'abc'", "v < 'b'", "v % 3 == 1", "v % 2 != 0", "v % 2.5 == 0.5", "v == -1"]
VALUES = [3, 2, 4, -1, -2, 0, 2.5, 3.0, float("nan"), float("inf"), -0.0, 10**30, "abc", "a", "b", "",
          True, False, None, [3], Weird(3), Weird(4)]

def expected(cond, v):
    try:
        return bool(eval(cond, {"g": g}, {"v": v}))
    except Exception:
        return "raised"

mismatches, decided = [], 0
line = line_of("PROBE")
for cond in CONDITIONS:
    bp = d.set_break(__file__, line, cond)
    for v in VALUES:
        STOPS.clear(); Recorder.messages.clear()
        probe(v)
        got = bool(STOPS)
        raised = any("error in condition" in m for m in Recorder.messages)
        want = expected(cond, v)
        got_value = "raised" if raised else got
        if got_value != want and not (want == "raised" and got):
            mismatches.append([cond, repr(v), repr(want), repr(got_value)])
        if want == "raised" and not (got and raised):
            mismatches.append([cond, repr(v), "stop+report", repr((got, raised))])
    d.clear_break(bp.id)

# a name that is not a local: a global lookup, in Python
bp = d.set_break(__file__, line_of("PROBE_GLOBAL"), "g == 5")
STOPS.clear(); probe_global(1); global_stopped = bool(STOPS)
d.clear_break(bp.id)
counters = fastpath.hook.counters() if fastpath.hook else {}
print(json.dumps({"mismatches": mismatches, "weird_calls": len(CALLS), "global": global_stopped,
                  "counters": counters}))
'''


@pytest.mark.parametrize("path", PATHS)
def test_simple_conditions_agree_with_eval(tmp_path, path):
    out = run(tmp_path, SIMPLE, path)
    assert out["mismatches"] == []
    assert out["weird_calls"] > 0  # objects with their own comparisons went through Python
    assert out["global"] is True
    if path == "c":
        counters = out["counters"]
        assert counters["simple"] > 100  # ints, floats and strs were decided in C
        assert counters["named_locals"] > 0  # the rest evaluated against the named locals only


def test_condition_reads_only_named_locals_and_falls_back_for_cells(tmp_path):
    out = run(tmp_path, '''
        from truestack.debugger import fastpath
        def outer(k):
            captured = k
            def inner(v):
                return v + captured  # INNER
            return inner

        def plain(v, w):
            return v + w  # PLAIN

        bp1 = d.set_break(__file__, line_of("PLAIN"), "v + w == 5")
        bp2 = d.set_break(__file__, line_of("INNER"), "v + captured == 5")
        plain(2, 3); plain(1, 1); outer(4)(1); outer(1)(1)
        print(json.dumps({"stops": STOPS, "counters": fastpath.hook.counters()}))
    ''')
    assert [(s[0], s[3]) for s in out["stops"]] == [("plain", 1), ("inner", 2)]
    assert out["counters"]["named_locals"] == 2 and out["counters"]["f_locals"] == 2


def test_only_frames_of_breakpoint_code_pay(tmp_path):
    """Structural, not timed (bench/debugger times it): with a breakpoint
    elsewhere no line event reaches the debugger at all and no trace
    function is set; with one in fib, only fib's own lines do, not those of
    the function fib calls."""
    out = run(tmp_path, '''
        def leaf(n):
            a = n
            b = a
            return b

        def fib(n):
            leaf(n)  # FIB
            return n if n < 2 else fib(n - 1) + fib(n - 2)

        def elsewhere():
            return 0  # ELSEWHERE

        def events():
            return fastpath.hook.counters()["line_events"]

        bp = d.set_break(__file__, line_of("ELSEWHERE"))
        start = events()
        fib(12)
        unrelated = {"events": events() - start, "state": hook_state()}
        d.clear_break(bp.id)
        bp = d.set_break(__file__, line_of("FIB"), "n == -1")
        start = events()
        fib(12)
        in_fib = events() - start
        hook_in_fib = hook_state()["hook"]
        d.clear_break(bp.id)
        print(json.dumps({"unrelated": unrelated, "in_fib": in_fib, "hook_in_fib": hook_in_fib, "after": hook_state()}))
    ''')
    calls = 465  # fib(12) runs fib 465 times, each 2 lines
    assert out["unrelated"]["events"] == 0
    assert out["unrelated"]["state"]["gettrace"] and not out["unrelated"]["state"]["thread_traced"]
    if sys.version_info < (3, 12):
        # 3.11 installs the hook only once code holding a breakpoint starts
        # (entry probes): an installed hook costs every call its inlining there.
        assert out["unrelated"]["state"]["hook"] == (sys.version_info < (3, 11))
        assert out["hook_in_fib"]
        assert out["in_fib"] == 2 * calls  # leaf's 3 lines per call never reach C
    else:
        assert out["in_fib"] == calls + 1  # sys.monitoring: the other line is DISABLEd at its first event
    assert not out["after"]["hook"] and out["after"]["gettrace"] and out["after"]["tool_free"]



@pytest.mark.parametrize("path", PATHS)
def test_a_stop_keeps_its_own_hit_number_when_another_thread_hits_before_it_is_shown(tmp_path, path):
    out = run(tmp_path, '''
        import time

        def work():
            return 1  # LINE

        numbers = {}
        counted_meanwhile = []

        class Holding(Recorder):
            def user_line(self, frame, stop):
                if not numbers:  # the first stop: the other worker counts its hit while this one is shown
                    second.start()
                    deadline = time.monotonic() + 10
                    while bp.hits < 2 and time.monotonic() < deadline:
                        time.sleep(0.01)
                    counted_meanwhile.append(bp.hits)
                numbers[threading.current_thread().name] = stop.hit

        d = Holding()
        bp = d.set_break(__file__, line_of("LINE"))
        first = threading.Thread(target=work, name="first")
        second = threading.Thread(target=work, name="second")
        first.start(); first.join(); second.join()
        d.clear_all_breaks()
        print(json.dumps({"numbers": numbers, "counted_meanwhile": counted_meanwhile}))
    ''', path)
    assert out["counted_meanwhile"] == [2], out
    assert out["numbers"] == {"first": 1, "second": 2}, out
