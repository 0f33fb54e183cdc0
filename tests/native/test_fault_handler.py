"""Our SIGSEGV/SIGBUS handler absorbs the walker's faults and nothing else: a
fault that is not ours reaches the handler installed before ours exactly once,
or kills the process as it would without truestack; faulthandler and
stop/start sequences cannot displace or loop it."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from conftest import truestack_env

PRELUDE = """
import faulthandler, os, sys, time
from truestack import _native
from truestack.engines.native import NativeCpuEngine
def spin(s):
    end = time.thread_time() + s
    while time.thread_time() < end:
        sum(range(100))
"""


def run(body: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(PRELUDE) + textwrap.dedent(body)],
                          env=truestack_env(), capture_output=True, text=True, timeout=120)


def test_walker_faults_are_absorbed_after_faulthandler_is_toggled():
    proc = run("""
        e = NativeCpuEngine(rate_hz=1000)
        e.start()
        faulthandler.enable(); faulthandler.disable(); faulthandler.enable()
        spin(0.2)
        e.drain()  # each drain puts our handler back on top of faulthandler's
        print("probe", _native._probe_guarded_load())
        faulthandler.disable()
        e.drain()
        print("probe", _native._probe_guarded_load())
        e.stop()
        print("alive")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["probe (1, 1)", "probe (1, 1)", "alive"]
    assert "Fatal Python error" not in proc.stderr


def test_a_walker_fault_caught_by_a_handler_installed_mid_walk_is_still_absorbed():
    # faulthandler.enable() on another thread between our pre-walk check and
    # a faulting load: faulthandler gets the fault, prints its report, puts
    # ours back and re-raises. Before, ours took the re-raised signal for a
    # foreign one and the process died of SIGSEGV (CI, 3.13, once).
    proc = run("""
        e = NativeCpuEngine(rate_hz=1000)
        e.start()
        e.stop()  # ours stays installed; no handler puts it back on top from here on
        faulthandler.enable()  # on top of ours, as if it happened mid-walk
        print("probe", _native._probe_guarded_load(), flush=True)
        print("probe", _native._probe_guarded_load(), flush=True)  # faulthandler let go: ours alone
        print("alive")
    """)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    assert proc.stdout.splitlines() == ["probe (1, 1)", "probe (1, 1)", "alive"], proc.stdout
    assert proc.stderr.count("Fatal Python error: Segmentation fault") == 1, proc.stderr[-3000:]


def test_a_sent_sigsegv_is_not_swallowed():
    proc = run("""
        e = NativeCpuEngine(rate_hz=1000)
        e.start()
        import signal
        os.kill(os.getpid(), signal.SIGSEGV)
        print("survived a SIGSEGV", flush=True)
    """)
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stdout, proc.stderr)
    assert "survived" not in proc.stdout


def test_a_foreign_fault_is_reported_once_after_stop_start_cycles():
    proc = run("""
        e = NativeCpuEngine(rate_hz=1000)
        for _ in range(3):  # faulthandler installed on top of ours, then removed, each round
            e.start(); faulthandler.enable(); spin(0.05); e.stop(); e.drain(); faulthandler.disable()
        faulthandler.enable()
        e.start()
        spin(0.05)
        e.drain()
        import ctypes
        ctypes.string_at(0)
        print("survived the fault")
    """)
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stderr[-2000:])
    assert proc.stderr.count("Fatal Python error: Segmentation fault") == 1, proc.stderr[-3000:]
    assert "survived" not in proc.stdout


def test_a_foreign_fault_without_any_previous_handler_dies_of_sigsegv():
    proc = run("""
        e = NativeCpuEngine(rate_hz=1000)
        e.start()
        spin(0.05)
        import ctypes
        ctypes.string_at(0)
        print("survived the fault")
    """)
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stderr[-2000:])
    assert "survived" not in proc.stdout
