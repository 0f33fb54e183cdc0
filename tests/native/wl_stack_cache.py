"""The drain's stack cache, held to the stacks the program itself records.

Each leaf records the stack it runs under, from sys._getframe (qualname,
first line, and the caller's line for every frame but the leaf), and when it
ran, so every sample taken in a leaf is checked against the stack that ran
at that very time. Recursion through
two call sites gives hundreds of distinct stacks (cache misses as well as
hits); exec'd functions that die right after running give frames whose code
is gone by the drain. The cache is emptied once midway, as it is when full.

With `native`, samples carry their C frames too (--native): the Python
frames of each are checked the same way, the C frames left out.

usage: wl_stack_cache.py MODE SECONDS [native]
"""
import bisect
import sys
import time

from wl_common import Collector, emit

from truestack import _native

RAN: list[tuple] = []  # (start ns, end ns, stack): stack as (qualname, first_line, line or None for the leaf)


def record_stack() -> tuple:
    f, out = sys._getframe(1), []
    while f is not None:
        code = f.f_code
        out.append((getattr(code, "co_qualname", code.co_name), code.co_firstlineno, f.f_lineno))
        f = f.f_back
    out.reverse()
    return (*out[:-1], (out[-1][0], out[-1][1], None))


def leaf(n):
    stack = record_stack()
    start = time.monotonic_ns()
    deadline = time.perf_counter() + 0.0004
    while time.perf_counter() < deadline:
        n += 1
    RAN.append((start, time.monotonic_ns(), stack))
    return n


def down(depth, n):
    if depth == 0:
        return leaf(n)
    if n % 2:
        return down(depth - 1, n // 2)
    return down(depth - 1, n // 2 + 1)


def churn(i):
    # A fresh code object per call, dropped once it has run.
    namespace = {"leaf": leaf}
    exec(compile(f"def churned_{i % 7}(n):\n    return leaf(n)\n", f"<churn {i}>", "exec"), namespace)
    namespace[f"churned_{i % 7}"](i)


def main(mode, seconds, native=False):
    code = leaf.__code__
    base_refs = sys.getrefcount(code)
    with Collector(mode, 2000, inline=True, native=native) as c:
        end = time.monotonic() + seconds
        cleared, i = False, 0
        while time.monotonic() < end:
            down(i % 9, i * 7919)
            churn(i)
            i += 1
            c.poll()
            if not cleared and time.monotonic() > end - seconds / 2:
                _native.stack_cache_clear()
                cleared = True
    counts = c.engine.stats().extra["stack_cache"]
    native_side = c.engine._stacks  # None without --native
    drained = len(c.samples)
    unwound = native_side.samples - sum(native_side.missing.values()) if native_side else 0
    starts = [r[0] for r in RAN]
    samples, wrong, by_value = [], [], {}
    with_c = 0
    for s in c.samples:
        at = bisect.bisect_right(starts, s.time_ns) - 1
        python = [f for f in s.frames if f.kind != "native"]
        with_c += len(python) < len(s.frames)
        names = [f.name for f in python]
        if at < 0 or s.time_ns > RAN[at][1] or "leaf" not in names:
            continue  # not inside a leaf's timed loop
        samples.append(s)
        got = tuple((f.name, f.first_line, f.line) for f in python[names.index("main") - 1:names.index("leaf") + 1])
        if (*got[:-1], (got[-1][0], got[-1][1], None)) != RAN[at][2]:  # the leaf's line moves; its callers' do not
            wrong.append(got)
        by_value.setdefault(s.frames, set()).add(id(s.frames))
    seen, reused = set(), 0  # samples handed an object an earlier sample was handed: the cache's hits
    for s in c.samples:
        reused += id(s.frames) in seen
        seen.add(id(s.frames))
    del c
    emit({
        "reused": reused,
        "with_c_frames": with_c,
        "drained": drained,
        "unwound": unwound,  # samples that carried a complete C chain
        "samples": len(samples),
        "distinct_stacks": len(by_value),
        "stack_objects": sum(len(ids) for ids in by_value.values()),
        "churned": sum(1 for s in samples if any(f.name.startswith("churned_") for f in s.frames)),
        "wrong": [list(map(list, w)) for w in wrong[:5]],
        "n_wrong": len(wrong),
        "counts": counts,
        "counts_after_stop": list(_native.stack_cache_counts()),
        "refs_added": sys.getrefcount(code) - base_refs,
    })


main(sys.argv[1], float(sys.argv[2]), sys.argv[3:] == ["native"])
