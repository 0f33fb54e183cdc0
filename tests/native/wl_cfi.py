"""--native's fast unwinder (the modules' CFI, read in the handler) against
libunwind, in the handler itself: with _native._cfi_check on, every sample the
fast path unwinds is unwound by libunwind too and any difference counted.

Phases, each with its counts: `mixed` (a deep Python recursion calling C
functions, with two threads in other C code), `late` (a C extension first
loaded after sampling started: the drain must take a new module snapshot),
`callback` (ctypes qsort calling back into Python through libffi closures),
`reload` (a thread loading and unloading a module all the while: snapshots
go stale and are taken again, modules vanish from under them).

usage: wl_cfi.py MODE SECONDS_PER_PHASE
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import sys
import threading
import time
import zlib

from wl_common import Collector, emit

from truestack import _native

DATA = bytes(range(256)) * 256
RELOAD_CHECKED = 150  # the reload phase's checked samples wanted (the test's floor is 80)


def mixed_leaf(until: float) -> None:
    while time.perf_counter() < until:
        sorted(range(300), key=lambda x: -x)
        zlib.compress(DATA)
        json.dumps({"k": list(range(200))})


def down(depth: int, until: float) -> None:
    if depth:
        return down(depth - 1, until)
    return mixed_leaf(until)


def hashing(until: float) -> None:
    while time.perf_counter() < until:
        hashlib.sha256(DATA).digest()
        zlib.crc32(DATA)


def mixed(seconds: float) -> None:
    until = time.perf_counter() + seconds
    threads = [threading.Thread(target=hashing, args=(until,)) for _ in range(2)]
    for t in threads:
        t.start()
    down(30, until)
    for t in threads:
        t.join()


def late(seconds: float) -> None:
    import _decimal  # not loaded before: its module appears after the first snapshot

    until = time.perf_counter() + seconds
    ctx = _decimal.Context(prec=400)
    while time.perf_counter() < until:
        ctx.divide(_decimal.Decimal(1), _decimal.Decimal(7)).sqrt(ctx)


def callback(seconds: float) -> None:
    libc = ctypes.CDLL(None)
    cmp_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))

    def compare(a, b):
        return a[0] - b[0]

    cmp = cmp_type(compare)
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        arr = (ctypes.c_int * 300)(*range(300, 0, -1))
        libc.qsort(arr, 300, ctypes.sizeof(ctypes.c_int), cmp)


def reload(seconds: float) -> None:
    import _ctypes
    import _decimal
    import glob
    import os

    with open("/proc/self/maps") as f:
        mapped = f.read()
    dynload = os.path.dirname(_decimal.__file__)
    path = next(p for p in sorted(glob.glob(os.path.join(dynload, "*.so"))) if p not in mapped)  # not loaded yet
    until = time.perf_counter() + seconds

    def churn() -> None:
        while time.perf_counter() < until:
            _ctypes.dlclose(_ctypes.dlopen(path, os.RTLD_NOW))

    t = threading.Thread(target=churn)
    t.start()
    down(30, until)
    t.join()


def counts(engine) -> dict:
    extra = engine.stats().extra
    checked, mismatched, first = _native._cfi_check(True)
    return {"checked": checked, "mismatched": mismatched, "first_mismatch": [hex(x) for x in first],
            **extra["native_unwinder"], "snapshots": _native.stats()["native_cfi_snapshots"]}


def main(mode: str, seconds: float) -> None:
    assert "_decimal" not in sys.modules
    _native._cfi_check(True)
    mixed(0.05)  # whatever the C code loads on first use (OpenSSL's providers) is loaded before the start
    out = {}
    with Collector(mode, 1000, native=True, keep=False) as c:
        before = counts(c.engine)
        for phase in (mixed, late, callback, reload):
            phase(seconds)
            time.sleep(0.12)  # a drain between phases: the late module's snapshot is taken there
            now = counts(c.engine)
            # reload: few of its samples are checked (most land in the loader, or while a snapshot is
            # stale), fewer still on a loaded machine: it goes on until enough are, for up to 5 more s.
            for _ in range(10 if phase is reload else 0):
                if now["checked"] - before["checked"] >= RELOAD_CHECKED:
                    break
                phase(0.5)
                time.sleep(0.12)
                now = counts(c.engine)
            out[phase.__name__] = {k: now[k] - before[k] if isinstance(now[k], int) else now[k] for k in now}
            before = now
    emit(out)


main(sys.argv[1], float(sys.argv[2]))
