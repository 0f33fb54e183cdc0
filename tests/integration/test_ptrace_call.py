"""The ptrace route's call (`remote/ptrace_call.py`) on real processes built here: the thread it
borrows comes back with every register as it was (vector registers included), a system call it
was blocked in goes on as if nothing happened, and a thread inside the C library's own code is
never the one called in.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from test_attach import needs_ptrace

from truestack.remote import ptrace_call

HERE = Path(__file__).parent / "ptrace_targets"

pytestmark = [
    needs_ptrace,
    pytest.mark.skipif(not ptrace_call.available(), reason="the ptrace route is for x86-64 Linux"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the targets"),
]


def _has_avx2() -> bool:
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def _build(tmp_path: Path, source: str, *flags: str, name: str = "") -> str:
    out = tmp_path / (name or Path(source).stem)
    subprocess.run(["gcc", "-O1", *flags, "-o", str(out), str(HERE / source)], check=True)
    return str(out)


@pytest.fixture
def library(tmp_path) -> str:
    return _build(tmp_path, "loaded.c", "-shared", "-fPIC", name="libloaded.so")


def _started(argv: list[str], cwd: Path, **kwargs) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=cwd, **kwargs)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("go "), first
    return proc, int(first.split()[1])


@pytest.mark.skipif(not _has_avx2(), reason="the target checks AVX2 registers")
def test_the_borrowed_thread_keeps_its_vector_registers(tmp_path, library):
    keeper = _build(tmp_path, "vector_keeper.c", "-mavx2")
    for attempt in range(4):  # pyinjector's call changed them in 8 runs of 10
        work = tmp_path / f"run{attempt}"
        work.mkdir()
        proc, pid = _started([keeper, "2"], work)
        time.sleep(0.05)  # inside its checking loop
        ptrace_call.load_library(pid, library)
        out, _ = proc.communicate(timeout=30)
        assert (work / "loaded").exists(), "the call did not run"
        assert (proc.returncode, out) == (0, "vector registers kept\n"), attempt


@pytest.mark.parametrize("call", ["read", "nanosleep"])
def test_a_blocking_system_call_goes_on_after_the_call(tmp_path, library, call):
    blocked = _build(tmp_path, "blocked.c")
    proc, pid = _started([blocked, call], tmp_path, stdin=subprocess.PIPE)
    time.sleep(0.3)  # blocked in it now
    ptrace_call.load_library(pid, library)
    assert (tmp_path / "loaded").exists(), "the call did not run"
    assert proc.poll() is None, "the system call ended at the call"
    out, _ = proc.communicate(input="x" if call == "read" else None, timeout=30)
    if call == "read":
        assert out.splitlines()[-1] == "read 1 ok x"
    else:
        words = out.splitlines()[-1].split()
        assert words[:3] == ["nanosleep", "0", "ok"], out
        assert float(words[3]) >= 2.99, out  # the whole sleep, not cut at the call


def test_a_thread_inside_the_c_library_is_not_called_in():
    maps = ptrace_call._Maps(os.getpid())
    start, end = maps.libc[0]
    regs = ptrace_call._Regs()
    regs.rip, regs.orig_rax = start + (end - start) // 2, (1 << 64) - 1  # running libc code
    assert maps.unsafe_reason(regs) == "inside the C library"
    regs.orig_rax = 202  # blocked in futex: waiting for a lock, holding none
    assert maps.unsafe_reason(regs) is None
    regs.orig_rax = 9  # mmap: malloc makes it with its arena lock held
    assert maps.unsafe_reason(regs) == "inside the C library"
    regs.rip = maps.loader[0][0]
    assert maps.unsafe_reason(regs) == "inside the dynamic loader"
    regs.rip, regs.orig_rax = 0x1000, (1 << 64) - 1  # anywhere else: Python's own code
    assert maps.unsafe_reason(regs) is None


def test_an_ended_process_is_said_so(tmp_path, library):
    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(ptrace_call.PtraceCallError, match="no such process"):
        ptrace_call.load_library(proc.pid, library)
