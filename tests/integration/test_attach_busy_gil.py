"""`truestack attach` to programs whose GIL is hard to get from another thread.

A thread waiting for the GIL is woken each time the holder releases it; if the holder takes it back
before the waiter runs (a loop with a short system call in it), the waiter goes back to waiting with
a fresh timeout and never asks the holder to let go: CPython can starve it for seconds. Attach's
agent used to need the GIL from a thread of its own hundreds of times (each import's file reads) and
gave up after 10 s on about one attach in four to such a loop. Its code now runs in the main thread
(a pending call), and the agent's own thread takes over only when the main thread is blocked in C.
"""
from __future__ import annotations

import pytest
from test_attach import Target, _load, attach, needs_ptrace

pytestmark = needs_ptrace

# The main thread releases the GIL and takes it back every ~0.3 ms (the stat of os.path.exists), and
# reports its threads (names and OS tasks) when asked. It does not import threading: then 3 attaches
# in 4 gave up (the agent's thread was also the one importing it).
RELEASES_OFTEN = """\
import os, sys
here = sys.argv[1]
stop = os.path.join(here, "stop")
print("go", os.getpid(), flush=True)
checks = 0
while not os.path.exists(stop):
    sum(range(10000))
    if os.path.exists(os.path.join(here, "check%d" % checks)):
        threading = sys.modules.get("threading")
        names = sorted(t.name for t in threading.enumerate()) if threading else ["MainThread"]
        print("threads", names, len(os.listdir("/proc/self/task")), flush=True)
        checks += 1
print("done", flush=True)
"""

# The main thread is blocked in C (a join) for the whole attach: no pending call runs there.
MAIN_BLOCKED = """\
import os, sys, threading
here = sys.argv[1]
def work():
    # Looks for the stop file only every ~50 ms: a thread releasing the GIL every 0.3 ms starves
    # the agent's thread on this path too (the test above is that case, with the main thread).
    n = 0
    while n % 2000 or not os.path.exists(os.path.join(here, "stop")):
        sum(range(3000))
        n += 1
worker = threading.Thread(target=work, name="worker")
worker.start()
print("go", os.getpid(), flush=True)
worker.join()
print("done", flush=True)
"""


def _threads(t: Target, n: int) -> str:
    (t.dir / f"check{n}").write_text("")
    return t.proc.stdout.readline()


def test_attaching_again_and_again_to_a_main_thread_that_releases_the_gil_all_the_time(tmp_path):
    t = Target(tmp_path, source=RELEASES_OFTEN)
    try:
        before = _threads(t, 0)
        assert before.startswith("threads ['MainThread'] "), before
        for i in range(4):
            result = attach("--duration", "0.3", "--rate", "1k", "-o", f"run{i}.tsp", str(t.pid), cwd=tmp_path)
            assert result.returncode == 0, (i, result.stderr)
            profile = _load(tmp_path / f"run{i}.tsp")
            assert profile.sample_count >= 50, (i, profile.sample_count)
            files = {profile.func_file(f) for f in range(len(profile.funcs))}
            assert not any("/truestack/" in f for f in files), files  # its start ran in the main thread
            # Detached: no thread of truestack's left, in threading's view or the kernel's.
            assert _threads(t, i + 1) == before, i
        status, out, err = t.finish()
        assert (status, out, err) == (0, "done\n", "")
    finally:
        t.kill()


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_attaching_while_the_main_thread_is_blocked_in_c(mode, tmp_path):
    t = Target(tmp_path, source=MAIN_BLOCKED)
    try:
        result = attach("--duration", "0.5", "--mode", mode, "-o", "run.tsp", str(t.pid), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        profile = _load(tmp_path / "run.tsp")
        threads = {th.name: len(th) for th in profile.threads.values()}
        assert threads.get("worker", 0) >= 20, threads
        assert not any(name.startswith("truestack") for name in threads), threads
        status, out, err = t.finish()
        assert (status, out, err) == (0, "done\n", "")
    finally:
        t.kill()
