"""Threads, asyncio and Ctrl-C under the debugger, driven through the real CLI."""
from __future__ import annotations

import re
import sys

import pytest
from test_debug_support import DebugSession, line_of, write

pytestmark = pytest.mark.timeout(60)

BACKENDS = ["default", "settrace"] if sys.version_info >= (3, 12) else ["default"]


def _env(backend: str) -> dict[str, str]:
    from conftest import truestack_env

    return truestack_env(**({"TRUESTACK_DEBUG_BACKEND": "settrace"} if backend == "settrace" else {}))


THREADS = """
import threading


def work(k):
    total = 0
    for i in range(3):
        total += i * k  # BODY
    return total


def main():
    results = {}
    threads = [threading.Thread(target=lambda k=k: results.__setitem__(k, work(k)), name=f"worker-{k}")
               for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("done", sorted(results.items()))


main()
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_breakpoint_in_worker_threads(tmp_path, backend):
    prog = write(tmp_path, "thr.py", THREADS)
    s = DebugSession(["thr.py"], tmp_path, env=_env(backend))
    s.wait_prompt()
    s.cmd(f"b thr.py:{line_of(prog, 'BODY')} if i == 1")
    out = s.cmd("c")
    # each stop shows its own hit number: the two workers count hits 1 and 2
    # in the order they reached the line, which need not be the order they
    # get the shell in
    stop = re.search(r"\[breakpoint 1, hit ([12]), thread '(worker-[12])'\]", out)
    assert stop, out
    first_hit, first = int(stop.group(1)), stop.group(2)
    k = int(first[-1])
    assert s.cmd("p i, k").strip() == f"(1, {k})"
    assert s.cmd("threading.current_thread().name").strip() == repr(first)
    other = "worker-2" if first == "worker-1" else "worker-1"
    other_stop = f"[breakpoint 1, hit {3 - first_hit}, thread '{other}']"
    out = s.cmd("n")  # stepping stays in this thread...
    if other_stop in out:
        # ...but the other worker was waiting for the shell and got it first
        out = s.cmd("c")
        assert f"[next, thread '{first}']" in out
        s.cmd("total = 1000")
    else:
        assert f"[next, thread '{first}']" in out
        s.cmd("total = 1000")
        out = s.cmd("c")  # the other worker was waiting its turn
        assert other_stop in out
    out = s.last("c")
    totals = {1: 3, 2: 6}
    totals[k] = 1000 + 2 * k
    assert f"done {sorted(totals.items())}" in out
    assert s.exitstatus() == 0


ASYNC = """
import asyncio


async def helper():
    await asyncio.sleep(0.01)
    return 5


async def other():
    for _ in range(3):
        await asyncio.sleep(0)


async def main():
    x = 1  # START
    y = await helper()  # AWAIT
    z = x + y  # AFTER
    await asyncio.sleep(0.01)
    print("z is", z)


async def both():
    await asyncio.gather(main(), other())


asyncio.run(both())
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_asyncio_next_over_await(tmp_path, backend):
    prog = write(tmp_path, "aio.py", ASYNC)
    s = DebugSession(["aio.py"], tmp_path, env=_env(backend))
    s.wait_prompt()
    s.cmd("b main")
    out = s.cmd("c")
    assert f"aio.py:{line_of(prog, 'START')} in main()  [breakpoint 1, hit 1]" in out
    out = s.cmd("n")
    assert f"aio.py:{line_of(prog, 'AWAIT')} in main()  [next]" in out
    out = s.cmd("n")  # over the await: the loop runs other tasks, we stop in main again
    assert f"aio.py:{line_of(prog, 'AFTER')} in main()  [next]" in out
    assert s.cmd("p x, y").strip() == "(1, 5)"
    out = s.last("c")
    assert "z is 6" in out
    assert s.exitstatus() == 0


def test_ctrl_c_stops_running_program(tmp_path):
    write(tmp_path, "spin.py", """
        import time

        counter = 0
        while True:
            counter += 1
            time.sleep(0.01)
            if counter == 50:
                print("spinning", flush=True)
    """)
    s = DebugSession(["--no-stop", "spin.py"], tmp_path)
    s.child.expect_exact("spinning")
    s.child.sendintr()
    out = s.wait_prompt()
    assert "Interrupted" in out and "spin.py:" in out and "[interrupt]" in out
    assert s.cmd("counter >= 50").strip() == "True"
    s.last("q")
    assert s.exitstatus() == 0
