"""`truestack validate` end to end: stress programs pass, a broken walker fails.

Each stress program runs for a fixed, short wall time (argv[1] seconds) so the
suite stays quick; the oracle must check enough stacks in both walker layers
for the error rate to mean something.
"""
from __future__ import annotations

import json

import pytest
from conftest import native_available, run_truestack, truestack_env

pytestmark = pytest.mark.skipif(not native_available(), reason="native extension not built")

DURATION = "1.0"
MAX_ERROR = 0.005

THREADS = '''
import sys, threading, time
def leaf(n):
    s = 0
    for i in range(n):
        s += i
    return s
def middle(n):
    return leaf(n) + leaf(n // 2)
def top(n):
    return [middle(n) for _ in range(3)]
def worker(stop):
    while time.monotonic() < stop:
        top(40)
def short_lived():
    middle(30)
stop = time.monotonic() + float(sys.argv[1])
threads = [threading.Thread(target=worker, args=(stop,)) for _ in range(3)]
for t in threads:
    t.start()
while time.monotonic() < stop:
    batch = [threading.Thread(target=short_lived) for _ in range(4)]
    for t in batch:
        t.start()
    for t in batch:
        t.join()
    time.sleep(0.002)
for t in threads:
    t.join()
'''

GENERATORS = '''
import sys, time
def numbers(n):
    for i in range(n):
        yield i * 2
def delegate(n):
    total = yield from numbers(n)
    return total
def echo():
    received = 0
    while True:
        try:
            x = yield received
        except KeyError:
            received = -1
            continue
        received = x + 1
def delegating_echo():
    # throw()/close() link this frame into the chain from C, with no event
    yield from echo()
def pipeline(n):
    return sum(x for x in delegate(n) if x % 3)
stop = time.monotonic() + float(sys.argv[1])
while time.monotonic() < stop:
    pipeline(50)
    e = echo()
    next(e)
    for i in range(20):
        e.send(i)
    e.throw(KeyError)
    e.close()
    d = delegating_echo()
    next(d)
    d.send(1)
    d.throw(KeyError)
    d.close()
    list(zip(numbers(10), numbers(10)))
'''

ASYNCIO = '''
import asyncio, sys, time
async def leaf(i):
    await asyncio.sleep(0)
    return sum(range(i % 50))
async def branch(i):
    a = await leaf(i)
    b = await asyncio.gather(leaf(i + 1), leaf(i + 2))
    return a + sum(b)
async def agen(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i
async def main(seconds):
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        await asyncio.gather(*(branch(i) for i in range(20)))
        async for _ in agen(10):
            pass
        t = asyncio.create_task(asyncio.sleep(10))
        await asyncio.sleep(0)
        t.cancel()
        try:
            await t
        except asyncio.CancelledError:
            pass
asyncio.run(main(float(sys.argv[1])))
'''

EXCEPTIONS = '''
import sys, time
class Boom(Exception):
    pass
def deep_raise(n):
    if n == 0:
        raise Boom(n)
    try:
        return deep_raise(n - 1)
    finally:
        pass
def catcher(n):
    try:
        deep_raise(n)
    except Boom:
        return 1
def reraiser(n):
    try:
        catcher(n)
        deep_raise(n)
    except Boom as exc:
        try:
            raise ValueError from exc
        except ValueError:
            return 2
def gen_with_exc():
    try:
        yield 1
        yield 2
    except Boom:
        yield 3
stop = time.monotonic() + float(sys.argv[1])
while time.monotonic() < stop:
    for n in (1, 5, 20):
        reraiser(n)
    g = gen_with_exc()
    next(g)
    g.throw(Boom)
    try:
        {}["missing"]
    except KeyError:
        pass
'''

RECURSION = '''
import sys, time
sys.setrecursionlimit(10000)
def down(n):
    if n == 0:
        return sum(range(100))
    return down(n - 1) + 1
def ping(n):
    return pong(n - 1) if n else 0
def pong(n):
    return ping(n - 1) if n else 1
stop = time.monotonic() + float(sys.argv[1])
while time.monotonic() < stop:
    down(2000)
    ping(300)
'''

CHURN = '''
import sys, time
def host(x):
    return x + 1
stop = time.monotonic() + float(sys.argv[1])
i = 0
while time.monotonic() < stop:
    i += 1
    ns = {}
    exec(f"def churned_{i % 97}(a):\\n    return sum(range(a)) + {i}\\n", ns)
    ns[f"churned_{i % 97}"](20)
    f = lambda y, k=i: host(y) * k
    f(3)
    code = host.__code__.replace(co_name=f"host_{i % 13}")
    clone = type(host)(code, globals())
    clone(i)
    del ns, f, clone, code
'''

PROGRAMS = {
    "threads": THREADS,
    "generators": GENERATORS,
    "asyncio": ASYNCIO,
    "exceptions": EXCEPTIONS,
    "recursion": RECURSION,
    "churn": CHURN,
}


def validate(tmp_path, source: str, *options: str, env: dict[str, str] | None = None):
    script = tmp_path / "program.py"
    script.write_text(source)
    report = tmp_path / "report.json"
    proc = run_truestack("validate", "--json", "-o", str(report), *options, str(script), DURATION,
                         env=env, timeout=120)
    data = json.loads(report.read_text()) if report.exists() else None
    return proc, data


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_stress_program_error_rate_is_low(tmp_path, name):
    proc, data = validate(tmp_path, PROGRAMS[name])
    assert data is not None, proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["target_exit_status"] == 0
    layers = data["layers"]
    # Enough checks in both walker layers for the rate to mean something.
    assert layers["sync"]["checked"] >= 200, layers
    assert layers["async"]["checked"] >= 50, (layers, data["counters"])
    assert data["error_rate"] < MAX_ERROR, json.dumps(data, indent=1)
    for layer in ("sync", "async"):
        assert layers[layer]["error_rate"] < MAX_ERROR, json.dumps(data, indent=1)
    # The oracle's own ground: the shadow stacks agreed with the frame chain.
    assert layers["shadow"]["error_rate"] < MAX_ERROR, json.dumps(data, indent=1)
    assert data["passed"] is True


@pytest.mark.parametrize("fault,kind", [("drop", "missing"), ("swap", "reordered")])
def test_broken_walker_is_caught(tmp_path, fault, kind):
    env = truestack_env(TRUESTACK_TEST_WALKER_FAULT=f"{fault}:10")
    proc, data = validate(tmp_path, PROGRAMS["threads"], env=env)
    assert data is not None, proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["passed"] is False
    assert data["counters"]["faults_injected"] > 0
    layers = data["layers"]
    assert layers["sync"]["mismatches"].get(kind, 0) > 0, layers
    # Every 10th walk damaged: the async layer sees it too once it has a
    # few hundred samples (P(miss) < 1e-9 at 200).
    if layers["async"]["checked"] >= 200:
        assert layers["async"]["mismatches"].get(kind, 0) > 0, layers
    assert any(e["kind"] == kind and e["fault_injected"] for e in data["examples"])
    # The damage is in the walker's result, not in the oracle's ground.
    assert layers["shadow"]["errors"] == 0


def test_text_report_and_target_exit_status(tmp_path):
    script = tmp_path / "exits.py"
    script.write_text("import sys\ndef f():\n    return sum(range(10))\nfor _ in range(10000):\n    f()\nsys.exit(3)\n")
    proc = run_truestack("validate", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "target exit status 3" in proc.stderr
    assert "sync" in proc.stderr and "async" in proc.stderr
    assert "PASS" in proc.stderr


def test_module_target(tmp_path):
    (tmp_path / "valmod.py").write_text(
        "import sys\ndef g(n):\n    return n * 2\nprint(sum(g(i) for i in range(5000)), sys.argv[1:])\n")
    proc = run_truestack("validate", "--json", "-m", "valmod", "a", "--flag", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out_lines = proc.stdout.splitlines()
    assert out_lines[0] == "24995000 ['a', '--flag']"
    data = json.loads("\n".join(out_lines[1:]))
    assert data["target"] == "-m valmod a --flag"
    assert data["layers"]["sync"]["checked"] > 0


@pytest.mark.parametrize("args,needle", [
    (["validate", "no_such_script.py"], "no such script"),
    (["validate", "--max-error", "-1", "x.py"], "--max-error"),
    (["validate", "--rate", "0", "--sync-every", "0", "x.py"], "nothing to check"),
    (["validate", "--walker-fault", "flip", "x.py"], "unknown walker fault"),
    (["validate"], "no target"),
    (["validate", "-m"], "-m needs a module name"),
    (["validate", "-m", "no_such_module_xyz"], "cannot run module"),
])
def test_usage_errors_are_one_line(tmp_path, args, needle):
    (tmp_path / "x.py").write_text("pass\n")
    proc = run_truestack(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_too_few_checks_is_inconclusive_not_a_pass(tmp_path):
    # A target that dies at once gives the oracle almost nothing to check.
    script = tmp_path / "dies.py"
    script.write_text("raise SystemExit('died before doing any work')\n")
    proc = run_truestack("validate", "--json", str(script), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["verdict"] == "INCONCLUSIVE" and data["passed"] is False
    assert data["errors"] == 0 and data["checked"] < data["min_checks"]
    text = run_truestack("validate", str(script), cwd=tmp_path)
    assert text.returncode == 1 and "INCONCLUSIVE" in text.stderr and "too few checks" in text.stderr


@pytest.mark.parametrize("rate,hz", [("1k", 1000.0), ("500hz", 500.0), ("0", 0.0)])
def test_rate_reads_like_record_rate(tmp_path, rate, hz):
    (tmp_path / "work.py").write_text("def f():\n    return 1\nfor _ in range(2000):\n    f()\n")
    proc = run_truestack("validate", "--json", "--min-checks", "0", "--rate", rate, "work.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["settings"]["async_rate_hz"] == hz


def test_bad_rate_is_the_same_error_as_record(tmp_path):
    (tmp_path / "x.py").write_text("pass\n")
    for command in ("validate", "record"):
        proc = run_truestack(command, "--rate", "fast", "x.py", cwd=tmp_path)
        assert proc.returncode == 2
        assert "invalid rate 'fast'" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
