"""`truestack attach` loads its agent only where that cannot hang the target: never in a thread
stopped inside malloc, never while any thread is inside the dynamic loader (a `dlopen` then
waits on the loader's lock for as long as that thread keeps it). Real targets, the default route
(gdb, `remote/gdb_safepoint.py`), and the malloc case through the ptrace route too
(`remote/ptrace_call.py`, which does not wait for other threads to leave the loader).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest
from conftest import needs_gdb_calls, run_truestack, truestack_env
from test_attach import Target, _load, needs_ptrace

pytestmark = needs_ptrace
needs_gdb = pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed (attach's default route)")

# Its only thread allocates with libc malloc nonstop (2000 bytes: past pymalloc's small-object limit).
ALLOCATES = """\
import os, sys
print("go", os.getpid(), flush=True)
n = 0
while not os.path.exists(os.path.join(sys.argv[1], "stop")):
    b = bytearray(2000)
    n += 1
print("done", n > 0, flush=True)
"""


@pytest.mark.parametrize("route", [pytest.param("gdb", marks=[needs_gdb, needs_gdb_calls]), "ptrace"])
def test_attaching_again_and_again_to_a_program_allocating_in_a_tight_loop(tmp_path, route):
    # Injected wherever ptrace stopped it, about one attach in five deadlocked this target for good.
    t = Target(tmp_path, source=ALLOCATES)
    env = truestack_env(TRUESTACK_INJECTOR=route)
    try:
        for i in range(12):
            result = run_truestack("attach", "--duration", "0.1", "-o", f"run{i}.tsp", str(t.pid), cwd=tmp_path,
                                   timeout=60, env=env)  # fmt: skip
            assert result.returncode == 0, (i, result.stderr)
            assert _load(tmp_path / f"run{i}.tsp").sample_count >= 1
        status, out, err = t.finish()
        assert (status, out, err) == (0, "done True\n", "")
    finally:
        t.kill()


# A library whose constructor blocks: the thread loading it stays inside dlopen, holding the loader's
# lock, for SECONDS; meanwhile the main thread runs Python.
SLOW_LIBRARY = r"""
#include <unistd.h>
__attribute__((constructor)) static void slow(void) { sleep(SECONDS); }
"""
LOADS_SLOWLY = """\
import ctypes, os, sys, threading, time
here = sys.argv[1]
libc = ctypes.CDLL(None)  # its dlopen through ctypes: the GIL released meanwhile (ctypes.CDLL keeps it)
libc.dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
path = os.path.join(here, "slow.so").encode()
loader = threading.Thread(target=libc.dlopen, args=(path, 2), name="loader")
loader.start()
time.sleep(0.3)  # it is inside dlopen now
print("go", os.getpid(), flush=True)
while not os.path.exists(os.path.join(here, "stop")):
    sum(range(10000))
loader.join()
print("done", flush=True)
"""


@needs_gdb
@needs_gdb_calls
def test_a_thread_inside_the_dynamic_loader_is_waited_out_not_joined(tmp_path):
    seconds = 8
    source = SLOW_LIBRARY.replace("SECONDS", str(seconds))
    (tmp_path / "slow.c").write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "slow.so"), str(tmp_path / "slow.c")], check=True)
    t = Target(tmp_path, source=LOADS_SLOWLY)
    try:
        started = time.monotonic()
        env = truestack_env(TRUESTACK_GDB_WINDOW="1")
        refused = run_truestack("attach", "--duration", "0.2", str(t.pid), cwd=tmp_path, env=env, timeout=60)
        assert time.monotonic() - started < seconds - 1, "it waited for the loader instead of giving up"
        assert refused.returncode == 1
        said = f"truestack: error: cannot inject into process {t.pid} safely: no safe point in 1 s ("
        assert refused.stderr.startswith(said), refused.stderr
        assert " is inside dl_" in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
        # Once the library is loaded, the same target takes an attach and runs on unharmed.
        time.sleep(max(0.0, seconds + 0.5 - (time.monotonic() - started)))
        result = run_truestack("attach", "--duration", "0.5", "--rate", "1k", "-o", "run.tsp", str(t.pid),
                               cwd=tmp_path, env=env, timeout=60)  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert _load(tmp_path / "run.tsp").sample_count >= 10
        status, out, err = t.finish()
        assert (status, out, err) == (0, "done\n", "")
    finally:
        t.kill()


@needs_gdb
@needs_gdb_calls
def test_the_injection_route_is_gdb_unless_forced():
    from truestack.remote.inject import GdbInjector, choose

    assert isinstance(choose((sys.version_info.major, sys.version_info.minor)), GdbInjector)


def test_without_gdb_the_route_is_truestacks_own_ptrace_call(monkeypatch):
    from truestack.remote import inject

    monkeypatch.delenv(inject.INJECTOR_ENV, raising=False)
    monkeypatch.setattr(inject.GdbInjector, "available", staticmethod(lambda: False))
    assert isinstance(inject.choose((sys.version_info.major, sys.version_info.minor)), inject.PtraceInjector)


@pytest.mark.parametrize("gdb_says", [None, "Couldn't write extended state status"])
def test_where_gdb_cannot_call_the_route_is_truestacks_own_ptrace_call(monkeypatch, gdb_says):
    from truestack.remote import inject

    monkeypatch.delenv(inject.INJECTOR_ENV, raising=False)
    monkeypatch.setattr(inject.GdbInjector, "available", staticmethod(lambda: True))
    monkeypatch.setattr(inject, "calls_break_the_target", lambda: gdb_says)
    route = inject.choose((sys.version_info.major, sys.version_info.minor))
    assert type(route) is (inject.GdbInjector if gdb_says is None else inject.PtraceInjector)
