"""Stress: generators, asyncio, exceptions, deep recursion, code churn,
short-lived threads, a fork, and beside them helper threads that keep up
churn of their own: short-lived threads (at least MIN_THREADS), faulthandler
enable/disable every 50 ms, fork and exec (a child that exits at once, a
`python -c pass`), and sub-interpreters on 3.12+ -- all sampled at a high rate.

Churned code is tagged: every exec'd / replaced / lambda code object k has
its own name or filename, and the workload records the monotonic window in
which k ran. A sample showing code k outside its window means the sampler
attributed a sample to the wrong (freed and reused) code object.

Under TRUESTACK_SANITIZED=1 (ASan build) the helpers pause longer between
rounds; each still runs at least its minimum count.

usage: wl_stress.py MODE RATE SECONDS
"""
import _thread
import asyncio
import faulthandler
import os
import subprocess
import sys
import threading
import time

from wl_common import Collector, emit

mode, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
sys.setrecursionlimit(20000)
windows: dict[str, list[int]] = {}  # tag -> [start_ns, end_ns]
check = {"samples": 0, "partial": 0, "partial_leaf_known": 0, "tagged": 0, "misattributed": 0, "examples": [], "max_depth": 0,
         "threads": set(), "kinds": {}}
TAGGED_PREFIXES = ("churn_", "rep_", "<lam-")


def tag_of(frame):
    if frame.name.startswith("churn_") or frame.name.startswith("rep_"):
        return frame.name
    if frame.name == "<module>":
        return None  # the exec/eval driver code of a churn file, run outside the window
    if frame.file.startswith("<lam-"):
        return frame.file
    if frame.file.startswith("<churn-") or frame.file.startswith("<rep-"):
        return "file:" + frame.file
    return None


pending: list = []


def on_batch(batch):
    # Windows close after the work: check a batch one round later.
    pending.extend(batch)
    now = time.monotonic_ns()
    keep = []
    for s in pending:
        if now - s.time_ns < 300_000_000:
            keep.append(s)
            continue
        verify(s)
    pending[:] = keep


def verify(s):
    check["samples"] += 1
    check["threads"].add(s.thread_name)
    check["max_depth"] = max(check["max_depth"], s.depth)
    if s.partial:
        check["partial"] += 1
        check["kinds"][s.partial] = check["kinds"].get(s.partial, 0) + 1
        if len(s.frames) > 1:  # "[partial stack: ...]" root, then the frames the walker trusted
            check["partial_leaf_known"] += 1
    for f in s.frames:
        t = tag_of(f)
        if t is None:
            continue
        check["tagged"] += 1
        if t.startswith("file:"):  # a churn file must carry its own name
            k = t.split("-")[1].rstrip(">")
            ok = f.name in (f"churn_{k}", f"rep_{k}") or (f.name.endswith(f"churn_{k}") or f.name.endswith(f"rep_{k}"))
        else:
            w = windows.get(t)
            ok = w is not None and w[0] <= s.time_ns and (w[1] == 0 or s.time_ns <= w[1])
        if not ok:
            check["misattributed"] += 1
            if len(check["examples"]) < 5:
                check["examples"].append([f.name, f.file, f.line, s.time_ns, windows.get(t)])


def run_tagged(tag, fn, *args):
    w = windows[tag] = [time.monotonic_ns(), 0]
    try:
        return fn(*args)
    finally:
        w[1] = time.monotonic_ns()


# -- workloads ----------------------------------------------------------------
def gen_pipeline(n):
    def source():
        for i in range(n):
            yield i

    def square(it):
        for x in it:
            yield x * x

    def keep_even(it):
        for x in it:
            if not x & 1:
                yield x

    return sum(keep_even(square(source())))


async def a_leaf(n):
    s = 0
    for i in range(n):
        s += i
        if i % 500 == 0:
            await asyncio.sleep(0)
    return s


async def a_main():
    return sum(await asyncio.gather(*(a_leaf(3000) for _ in range(8))))


def exceptions(n):
    caught = 0
    for i in range(n):
        try:
            try:
                raise ValueError(i)
            except ValueError as e:
                raise KeyError(i) from e
        except KeyError:
            caught += 1
    return caught


def recurse(depth):
    if depth == 0:
        s = 0
        for i in range(30000):
            s += i
        return s
    return recurse(depth - 1) + 0


BODY = "def churn_{k}():\n    s = 0\n    for i in range(300):\n        s += i\n    return s\n"


def base_fn():
    s = 0
    for i in range(300):
        s += i
    return s


churn_counter = [0]


def churn(n):
    for _ in range(n):
        k = churn_counter[0]
        churn_counter[0] += 1
        ns = {}
        exec(compile(BODY.format(k=k), f"<churn-{k}>", "exec"), ns)
        run_tagged(f"churn_{k}", ns[f"churn_{k}"])
        del ns
        extra = {"co_qualname": f"rep_{k}"} if sys.version_info >= (3, 11) else {}
        code = base_fn.__code__.replace(co_name=f"rep_{k}", co_filename=f"<rep-{k}>", **extra)
        fn = type(base_fn)(code, globals())
        run_tagged(f"rep_{k}", fn)
        del fn, code
        lam = eval(compile("\n" * (k % 50) + "lambda: sum(range(400))", f"<lam-{k}>", "eval"))
        run_tagged(f"<lam-{k}>", lam)
        del lam


def short_threads(n):
    done = threading.Semaphore(0)

    def body():
        s = 0
        for i in range(20000):
            s += i
        done.release()

    ts = [threading.Thread(target=body, name=f"short-{i}") for i in range(n)]
    for t in ts:
        t.start()
    for i in range(n):
        _thread.start_new_thread(body, ())
    for t in ts:
        t.join()
    for _ in range(2 * n):
        done.acquire()


def fork_once():
    with fork_lock:  # defined with the helpers below
        pid = os.fork()
        if pid == 0:
            # Child: keep running Python work for a while, then exit.
            try:
                end = time.monotonic() + 0.3
                while time.monotonic() < end:
                    gen_pipeline(2000)
                    churn(2)
                os._exit(0)
            except BaseException:
                os._exit(3)
        return wait_child(pid, "fork")


def background():
    while not stop.is_set():
        gen_pipeline(5000)
        exceptions(200)


# -- helper threads: each repeats its churn until the run is over and it has
# done at least its minimum, counting in `counts` and failures in `errors` ----
SANITIZED = os.environ.get("TRUESTACK_SANITIZED") == "1"
PAUSE = 2.0 if SANITIZED else 1.0  # scales the helpers' pauses
MIN_THREADS, MIN_SUBINTERPS, MIN_EXECS, MIN_TOGGLES = 200, 10, 3, 20
# CPython cannot fork while another thread runs a sub-interpreter (3.12 and
# 3.13 children hang or die in PyOS_AfterFork_Child, with or without
# truestack): forks and sub-interpreters take turns.
fork_lock = threading.Lock()
counts = {"threads_started": 0, "subinterps": 0, "execs": 0, "forks": 0, "faulthandler_toggles": 0,
          "children_stuck_in_asan_allocator": 0}
errors: list[str] = []
# A forked child exits within a second or two, ASan or not.
CHILD_WAIT_S = 30.0


def stack_of(pid):
    """The threads' stacks of a live process, from gdb (run without the ASan runtime preloaded)."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    try:
        proc = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt 12"], env=env,
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(no stack: gdb: {exc!r})"
    return "\n".join(line for line in proc.stdout.splitlines() if line.startswith(("#", "Thread")))


def wait_child(pid, what):
    """The exit status of a forked child; a child still running after CHILD_WAIT_S is killed.

    GCC 12's ASan does not lock its allocator around fork(): a child forked while
    another thread held one of its size-class locks waits for it forever in its
    first malloc or free (reproduced without truestack: 3 of ~2,500 children of a
    3.12 process whose four threads allocate and start threads). Under the sanitizer job such
    a child is counted, and excused only when its stack shows exactly that; any
    other hung child is an error, with its stack."""
    deadline = time.monotonic() + CHILD_WAIT_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.01)
    where = stack_of(pid)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    if SANITIZED and "__sanitizer::FutexWait" in where and "Allocator" in where:
        counts["children_stuck_in_asan_allocator"] += 1
        return 0
    errors.append(f"{what}: the child still ran after {CHILD_WAIT_S:.0f} s; its stack:\n{where[-3000:]}")
    return -9


def churning(key, minimum, pause):
    """Decorator: run the body until stop is set and counts[key] >= minimum."""
    def wrap(body):
        def loop():
            try:
                while not stop.is_set() or counts[key] < minimum:
                    body()
                    time.sleep(pause * PAUSE)
            except BaseException as exc:  # reported, never a silent thread death
                errors.append(f"{key}: {exc!r}")
        return threading.Thread(target=loop, name=f"churn-{key}")
    return wrap


@churning("threads_started", MIN_THREADS, 0.01)
def thread_churn():
    batch = [threading.Thread(target=gen_pipeline, args=(300,), name=f"short-{counts['threads_started'] + i}")
             for i in range(4)]
    for t in batch:
        t.start()
    counts["threads_started"] += len(batch)
    for t in batch:
        t.join()


@churning("faulthandler_toggles", MIN_TOGGLES, 0.05)
def faulthandler_toggle():
    if faulthandler.is_enabled():
        faulthandler.disable()
    else:
        faulthandler.enable()
    counts["faulthandler_toggles"] += 1


@churning("execs", MIN_EXECS, 0.3)
def fork_exec():
    proc = subprocess.run([sys.executable, "-c", "pass"], timeout=60)
    if proc.returncode != 0:
        errors.append(f"exec: `python -c pass` exited with {proc.returncode}")
    counts["execs"] += 1
    with fork_lock:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        status = wait_child(pid, "fork+exit")
    if status != 0:
        errors.append(f"fork: a child that exits at once ended with status {status}")
    counts["forks"] += 1


def subinterpreter_module():
    if sys.version_info >= (3, 13):
        import _interpreters
        return _interpreters
    if sys.version_info >= (3, 12):
        import _xxsubinterpreters
        return _xxsubinterpreters
    return None


SUBINTERPRETERS = subinterpreter_module()


@churning("subinterps", MIN_SUBINTERPS, 0.05)
def subinterpreter_churn():
    with fork_lock:
        interp = SUBINTERPRETERS.create()
        try:
            failure = SUBINTERPRETERS.run_string(interp, "sum(range(1000))")
            if failure is not None:  # 3.13 returns what was raised; 3.12 raises
                errors.append(f"subinterp: {failure}")
        finally:
            SUBINTERPRETERS.destroy(interp)
    counts["subinterps"] += 1


stop = threading.Event()
fork_statuses = []
helpers = [thread_churn, faulthandler_toggle, fork_exec] + ([subinterpreter_churn] if SUBINTERPRETERS else [])
with Collector(mode, rate, on_batch=on_batch, keep=False) as c:
    bg = threading.Thread(target=background, name="bg")
    bg.start()
    for h in helpers:
        h.start()
    end = time.monotonic() + seconds
    forked_at = time.monotonic() + seconds / 2
    rounds = 0
    while time.monotonic() < end:
        gen_pipeline(5000)
        asyncio.run(a_main())
        exceptions(300)
        recurse(2000)
        churn(20)
        if rounds % 5 == 0:
            short_threads(2)
        if not fork_statuses and time.monotonic() > forked_at:
            fork_statuses.append(fork_once())
        rounds += 1
    stop.set()
    bg.join()
    for h in helpers:
        h.join()
    faulthandler.disable()
for s in pending:
    verify(s)
st = c.engine.stats()
check["threads"] = sorted(check["threads"])
emit({**check, **counts, "rounds": rounds, "fork_statuses": fork_statuses, "churned": churn_counter[0],
      "errors": errors, "subinterpreters_supported": SUBINTERPRETERS is not None, "stats": st.as_dict()})
