"""`truestack dump PID` reads every thread's Python stack from outside a
running process: deadlocked programs, a thread holding the GIL forever in
C, and the errors a user meets, each with its message and exit status."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import truestack_env

DEADLOCK = '''\
import threading, time
a = threading.Lock()
b = threading.Lock()
has_a = threading.Event()
has_b = threading.Event()

def first():
    n = 42
    s = "hello"
    f = 1.5
    data = b"xy"
    items = [1, "a", None, (2, 3)]
    d = {"k": 7, "neg": -5}
    flag = True
    big = 2 ** 100
    with a:
        has_a.set()
        has_b.wait()
        with b:  # FIRST WAITS
            pass

def second():
    with b:
        has_b.set()
        has_a.wait()
        with a:  # SECOND WAITS
            pass

t1 = threading.Thread(target=first, name="locker-1")
t2 = threading.Thread(target=second, name="locker-2")
t1.start(); t2.start()
has_a.wait(); has_b.wait()
time.sleep(0.3)  # both are past their wait, in the acquire that never returns
print("ready", flush=True)
t1.join()  # MAIN WAITS
'''

SPIN_C = "void spin(void) { volatile unsigned long i = 0; for (;;) i++; }\n"

GIL_HELD = '''\
import ctypes, sys, threading, time
lib = ctypes.PyDLL(sys.argv[1])  # PyDLL: the call keeps the GIL

def waiter():
    count = 0
    while True:
        count += 1  # WAITER RUNS
        time.sleep(0.001)

def spinner():
    marker = 1234567
    lib.spin()  # SPINS HOLDING THE GIL

w = threading.Thread(target=waiter, daemon=True)
w.start()
s = threading.Thread(target=spinner, daemon=True)
print("ready", flush=True)
s.start()  # MAIN WAITS (started, it cannot get the GIL back to return)
s.join()
'''


def line_of(source: str, marker: str) -> int:
    return next(i for i, text in enumerate(source.splitlines(), 1) if marker in text)


def start_target(tmp_path: Path, source: str, *args: str) -> tuple[subprocess.Popen, Path]:
    script = tmp_path / "target.py"
    script.write_text(source)
    proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc, script


def dump(*args: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "truestack", "dump", *args], env=truestack_env(**env),
                          capture_output=True, text=True, timeout=60)
    return proc, time.perf_counter() - start


def blocks(text: str) -> dict[str, str]:
    """Thread blocks of the text output, by their heading line."""
    out = {}
    for block in text.split("\n\n")[1:]:
        heading, _, body = block.partition("\n")
        out[heading] = body.rstrip("\n") + "\n"
    return out


@pytest.fixture
def deadlocked(tmp_path):
    proc, script = start_target(tmp_path, DEADLOCK)
    yield proc, script
    proc.kill()
    proc.wait()


def test_deadlock_shows_every_thread_where_it_waits(deadlocked):
    proc, script = deadlocked
    out, seconds = dump(str(proc.pid))
    assert out.returncode == 0, out.stderr
    assert proc.poll() is None  # still there: nothing was stopped or injected
    assert seconds < 2, seconds
    text = out.stdout
    assert f"Process {proc.pid}: " in text and "3 Python threads" in text, text
    where = {
        "first": line_of(DEADLOCK, "FIRST WAITS"),
        "second": line_of(DEADLOCK, "SECOND WAITS"),
        "<module>": line_of(DEADLOCK, "MAIN WAITS"),
    }
    for func, line in where.items():
        assert f'  File "{script}", line {line}, in {func}\n' in text, (func, text)
    threads = blocks(text)
    assert len(threads) == 3, text
    main = next(h for h in threads if h.startswith(f'Thread {proc.pid} "MainThread"'))
    assert "(waiting" in main, main
    assert "in Thread.join" in threads[main] or "in join" in threads[main], threads[main]  # 3.10: co_name
    # innermost last, like a traceback: the thread's own function comes after threading's bootstrap
    named = {h.split('"')[1]: body for h, body in threads.items() if '"' in h}
    assert set(named) == {"MainThread", "locker-1", "locker-2"}, text  # threading's names, read from outside
    assert "in first" in named["locker-1"] and "in second" in named["locker-2"], text
    worker = next(body for body in threads.values() if "in first" in body)
    assert worker.index("_bootstrap") < worker.index("in first"), worker
    assert "holds the GIL" not in text, text  # a deadlock on locks releases the GIL
    assert "not a consistent read" not in text, text


def test_locals_are_read_not_evaluated(deadlocked):
    proc, _ = deadlocked
    out, seconds = dump("--locals", str(proc.pid))
    assert out.returncode == 0, out.stderr
    assert seconds < 2, seconds
    body = next(b for b in blocks(out.stdout).values() if "in first" in b)
    for expected in ("n = 42", "s = 'hello'", "f = 1.5", "data = b'xy'", "items = [1, 'a', None, (2, 3)]",
                     "d = {'k': 7, 'neg': -5}", "flag = True", f"big = {2 ** 100}"):
        assert f"      {expected}\n" in body, (expected, body)
    second = next(b for b in blocks(out.stdout).values() if "in second" in b)
    assert "n = 42" not in second, second


PREVIEWS = '''\
import threading
ev = threading.Event()
def outer():
    cellv = "captured"
    def inner():
        u = "héllo wörld"
        e = "emoji 🎉"
        neg = -12345678901234567890
        zero = 0
        empty = ()
        one = (1,)
        nested = {"a": [1, {"b": 2}], 3: (4, 5)}
        lst = list(range(100))
        fl = float("inf")
        long_text = "x" * 1000
        unbound_later = None
        del unbound_later
        print("ready", flush=True)
        ev.wait()  # INNER WAITS
        return cellv
    return inner()
outer()
'''


def test_locals_previews_of_every_kind(tmp_path):
    proc, script = start_target(tmp_path, PREVIEWS)
    try:
        time.sleep(0.2)
        out, _ = dump("--locals", "--json", str(proc.pid))
        assert out.returncode == 0, out.stderr
        (thread,) = json.loads(out.stdout)["threads"]
        frames = {f["function"].rsplit(".", 1)[-1]: f for f in thread["frames"] if f["filename"] == str(script)}
        inner, outer = frames["inner"]["locals"], frames["outer"]["locals"]
        assert frames["inner"]["line"] == line_of(PREVIEWS, "INNER WAITS")
        assert inner == {
            "u": "'héllo wörld'", "e": "'emoji 🎉'", "neg": "-12345678901234567890", "zero": "0", "empty": "()",
            "one": "(1,)", "nested": "{'a': [1, {...}], 3: (4, 5)}", "lst": "[0, 1, 2, 3, 4, ... (100 items)]",
            "fl": "inf", "long_text": repr("x" * 200) + "...", "cellv": "'captured'",
        }, inner
        assert outer["cellv"] == "'captured'" and re.fullmatch(r"<function outer\.<locals>\.inner at 0x[0-9a-f]+>", outer["inner"])
    finally:
        proc.kill()
        proc.wait()


def test_json_has_the_same_content(deadlocked):
    proc, script = deadlocked
    text, _ = dump("--locals", str(proc.pid))
    out, seconds = dump("--locals", "--json", str(proc.pid))
    assert out.returncode == 0, out.stderr
    assert seconds < 2, seconds
    data = json.loads(out.stdout)
    assert data["pid"] == proc.pid and data["python"] == "{}.{}".format(*sys.version_info[:2])
    assert len(data["threads"]) == 3
    for thread in data["threads"]:
        assert thread["consistent"] and thread["problem"] is None and thread["state"] == "waiting"
        assert thread["holds_gil"] is False and thread["native_id"] > 0
        for frame in thread["frames"]:
            assert f'  File "{frame["filename"]}", line {frame["line"]}, in {frame["function"]}\n' in text.stdout
            for name, value in frame["locals"].items():
                assert f"      {name} = {value}\n" in text.stdout
    first = next(t for t in data["threads"] if t["frames"][-1]["function"] == "first")
    assert first["frames"][-1]["filename"] == str(script)
    assert first["frames"][-1]["line"] == line_of(DEADLOCK, "FIRST WAITS")
    assert first["frames"][-1]["locals"]["n"] == "42" and first["frames"][-1]["locals"]["s"] == "'hello'"
    main = next(t for t in data["threads"] if t["native_id"] == proc.pid)
    assert main["name"] == "MainThread" and main["frames"][0]["function"] == "<module>"
    assert first["name"] == "locker-1"


def test_elf_symbols_read_the_same_as_our_own(deadlocked):
    # The target runs our interpreter file, so its symbols come from our own addresses; read from its
    # ELF file instead (what a target running another build of Python needs), the dump is the same.
    proc, _ = deadlocked
    own, _ = dump("--json", "--locals", str(proc.pid))
    elf, _ = dump("--json", "--locals", str(proc.pid), TRUESTACK_DUMP_SYMBOLS="elf")
    assert own.returncode == 0 and elf.returncode == 0, own.stderr + elf.stderr
    own_data, elf_data = json.loads(own.stdout), json.loads(elf.stdout)
    assert own_data["symbols_from"] == "same interpreter file" and elf_data["symbols_from"] == "ELF symbols"
    assert own_data["threads"] == elf_data["threads"]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the spinning C function")
def test_a_thread_holding_the_gil_forever_in_c(tmp_path):
    so = tmp_path / "spin.so"
    (tmp_path / "spin.c").write_text(SPIN_C)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-o", str(so), str(tmp_path / "spin.c")], check=True)
    proc, script = start_target(tmp_path, GIL_HELD, str(so))
    try:
        deadline = time.monotonic() + 10
        while True:  # until the spinner is in C with the GIL: then nothing else in the process runs Python again
            out, seconds = dump("--locals", str(proc.pid))
            assert out.returncode == 0, out.stderr
            assert seconds < 2, seconds
            if ("in spinner" in out.stdout and "holds the GIL" in out.stdout) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        threads = blocks(out.stdout)
        assert len(threads) == 3, out.stdout
        holders = [h for h in threads if "holds the GIL" in h]
        assert len(holders) == 1, out.stdout
        spinner = threads[holders[0]]
        assert f'File "{script}", line {line_of(GIL_HELD, "SPINS HOLDING")}, in spinner\n' in spinner, spinner
        assert "      marker = 1234567\n" in spinner, spinner
        assert "(running, holds the GIL)" in holders[0], holders[0]
        waiter = next(b for b in threads.values() if "in waiter" in b)
        assert f'line {line_of(GIL_HELD, "WAITER RUNS") + 1}, in waiter' in waiter, waiter  # in time.sleep
        # MainThread waits for the GIL: a timed wait that wakes every switch interval, so now and then "running".
        main = next(b for h, b in threads.items() if h.startswith(f'Thread {proc.pid} "MainThread" ('))
        assert f'line {line_of(GIL_HELD, "MAIN WAITS")}, in <module>' in main, main
        assert proc.poll() is None  # still running: nothing was stopped or injected
    finally:
        proc.kill()
        proc.wait()


def test_a_running_thread_is_read_or_flagged_never_torn(tmp_path):
    source = "import time\nprint('ready', flush=True)\nx = 0\nwhile True:\n    x = x + 1  # BUSY\n"
    proc, script = start_target(tmp_path, source)
    try:
        for _ in range(5):
            out, _ = dump("--json", str(proc.pid))
            assert out.returncode == 0, out.stderr
            (thread,) = json.loads(out.stdout)["threads"]
            assert thread["state"] in ("running", "waiting"), thread
            if thread["consistent"]:
                assert [f["function"] for f in thread["frames"]] == ["<module>"], thread
                assert thread["frames"][0]["line"] in (4, 5), thread
            else:
                assert "changed while it was read" in thread["problem"], thread
    finally:
        proc.kill()
        proc.wait()


CHURN = '''\
import threading
def gen(n):
    for i in range(n):
        yield i
def rec(n):
    if n == 0:
        return sum(gen(50))
    return rec(n - 1)
def short():
    rec(20)
def spawner():
    while True:
        ts = [threading.Thread(target=short) for _ in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
def busy():
    while True:
        rec(30)
threading.Thread(target=spawner, daemon=True).start()
threading.Thread(target=busy, daemon=True).start()
print("ready", flush=True)
while True:
    rec(10)
'''


def test_a_churning_program_is_read_or_flagged_never_misread(tmp_path):
    """Threads start and end, stacks grow and shrink, generators resume and suspend while dump reads:
    every dump succeeds, and every frame it reports is one the program really has."""
    proc, script = start_target(tmp_path, CHURN)
    known = {"<module>", "gen", "rec", "short", "spawner", "busy"}
    try:
        flagged = 0
        for _ in range(10):
            out, _ = dump("--json", "--locals", str(proc.pid))
            assert out.returncode == 0, out.stderr
            for thread in json.loads(out.stdout)["threads"]:
                flagged += not thread["consistent"]
                for frame in thread["frames"]:
                    if frame["filename"] == str(script):
                        assert frame["function"] in known, (frame, thread)
                        assert 1 <= frame["line"] <= len(CHURN.splitlines()), (frame, thread)
                    else:
                        assert frame["filename"].endswith("threading.py"), (frame, thread)
                        assert frame["line"] > 0, (frame, thread)
                    if frame["function"] == "rec" and thread["consistent"]:
                        assert re.fullmatch(r"\d+", frame["locals"]["n"]), frame
    finally:
        proc.kill()
        proc.wait()


def test_no_such_process():
    out, _ = dump("99999999")
    assert out.returncode == 1
    assert out.stderr == "truestack: error: no such process: 99999999\n"


def test_not_a_python_process():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.1)
        out, _ = dump(str(sleeper.pid))
        assert out.returncode == 1
        assert re.fullmatch(rf"truestack: error: process {sleeper.pid} is not a Python process \(.*sleep.*\)\n",
                            out.stderr), out.stderr
    finally:
        sleeper.kill()
        sleeper.wait()


OLD_PYTHONS = [p for p in ("/root/.pyenv/versions/3.9.18/bin/python3.9", "/root/.pyenv/versions/2.7.18/bin/python2.7")
               if os.access(p, os.X_OK)]


@pytest.mark.parametrize("exe", OLD_PYTHONS or [pytest.param(None, marks=pytest.mark.skip(reason="no CPython < 3.10 here"))])
def test_unsupported_python_version(exe):
    old = subprocess.Popen([exe, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)
        out, _ = dump(str(old.pid))
        assert out.returncode == 1
        version = re.search(r"python(\d\.\d+)$", exe).group(1)
        assert out.stderr == (f"truestack: error: unsupported Python version {version} in process {old.pid} "
                              "(truestack supports CPython 3.10–3.13)\n"), out.stderr
    finally:
        old.kill()
        old.wait()


@pytest.mark.parametrize("args,message", [
    ([], "the following arguments are required: PID"),
    (["notapid"], "invalid int value: 'notapid'"),
    (["1", "--frobnicate"], "unrecognized arguments: --frobnicate"),
])
def test_bad_arguments(args, message):
    out, _ = dump(*args)
    assert out.returncode == 2
    assert out.stderr.startswith("truestack: error: ") and message in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_permission_denied_says_what_to_run():
    # Another user's process, read without CAP_SYS_PTRACE: what a user without sudo meets.
    other = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30"])
    try:
        time.sleep(0.2)
        proc = subprocess.run(["setpriv", "--bounding-set", "-sys_ptrace,-dac_read_search,-dac_override",
                               sys.executable, "-m", "truestack", "dump", str(other.pid)],
                              env=truestack_env(), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1
        err = proc.stderr
        assert err.startswith(f"truestack: error: permission denied reading process {other.pid}: "), err
        assert "sudo truestack dump" in err and "--cap-add SYS_PTRACE" in err and "kernel.yama.ptrace_scope" in err
        assert err.count("\n") == 1, err
    finally:
        other.kill()
        other.wait()


def other_interpreter() -> str | None:
    for version in ("3.10.13", "3.11.7", "3.12.1", "3.13.0"):
        exe = f"/root/.pyenv/versions/{version}/bin/python{version.rsplit('.', 1)[0]}"
        if os.access(exe, os.X_OK) and not version.startswith("{}.{}.".format(*sys.version_info[:2])):
            return exe
    return None


@pytest.mark.skipif(other_interpreter() is None, reason="needs a second CPython 3.10-3.13")
def test_another_python_version_reruns_under_it_or_says_how_to_install(tmp_path):
    exe = other_interpreter()
    script = tmp_path / "other.py"
    script.write_text("import time\nprint('ready', flush=True)\ndef wait():\n    time.sleep(60)\nwait()\n")
    target = subprocess.Popen([exe, "-I", str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout.readline().strip() == "ready"
        out, _ = dump(str(target.pid))
        has_truestack = subprocess.run([exe, "-c", "import truestack._remote"], capture_output=True).returncode == 0
        if has_truestack:  # re-run under the target's interpreter
            assert out.returncode == 0, out.stderr
            assert f'File "{script}", line 4, in wait' in out.stdout, out.stdout
        else:
            assert out.returncode == 1
            assert re.fullmatch(rf"truestack: error: process {target.pid} runs Python 3\.\d+ and this truestack runs "
                                rf"on .*: install truestack for the target's interpreter \(`{re.escape(exe)} -m pip "
                                r"install 'truestack\[dump\]'`\).*\n", out.stderr), out.stderr
    finally:
        target.kill()
        target.wait()
