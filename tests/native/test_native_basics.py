"""The extension itself: present, walker output, lifecycle and robustness."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest
from conftest import truestack_env


def test_extension_is_built():
    # Fails (never skips) when the extension was not compiled for this interpreter.
    from truestack import _native  # noqa: F401
    from truestack.engines import native

    assert native._native is not None


def test_walk_current_is_leaf_first_and_matches_frames():
    from truestack import _native

    def inner():
        return _native.walk_current_info(64), sys._getframe()

    def outer():
        return inner()

    (frames, depth, partial), me = outer()
    assert partial is None
    expected = []
    f = me
    while f is not None:
        expected.append((f.f_code, f.f_lineno))
        f = f.f_back
    got = [(code, _native.code_line(code, off)) for code, off, kind in frames]
    assert all(kind == "python" for _, _, kind in frames)
    assert depth == len(expected)
    assert [c for c, _ in got] == [c for c, _ in expected][: len(got)]
    assert got[0][1] == expected[0][1] and got[1][1] == expected[1][1]


def test_walk_current_truncates_but_counts_depth():
    from truestack import _native

    def rec(n):
        return _native.walk_current_info(10) if n == 0 else rec(n - 1)

    frames, depth, partial = rec(300)
    assert len(frames) == 10 and depth >= 301 and partial is None
    assert all(code.co_name == "rec" for code, _, _ in frames)


def run_py(source: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(source)], env=truestack_env(),
                          capture_output=True, text=True, timeout=timeout)


def test_restart_late_signal_and_exit_with_timers_armed():
    r = run_py("""
        import os, signal, time
        from truestack.engines.native import NativeCpuEngine, NativeWallEngine
        def spin(t):
            end = time.monotonic() + t
            while time.monotonic() < end: pass
        counts = []
        for cls, mode in ((NativeCpuEngine, "cpu"), (NativeWallEngine, "wall"), (NativeCpuEngine, "cpu")):
            e = cls(mode, 1000, 64)
            e.start(); spin(0.2); e.stop()
            counts.append(len(e.drain()))
        # A late SIGPROF (ours or anyone's) after stop must be harmless.
        os.kill(os.getpid(), signal.SIGPROF)
        signal.pthread_kill(__import__("threading").get_ident(), signal.SIGPROF)
        print(counts)
        e = NativeCpuEngine("cpu", 5000, 64)
        e.start(); spin(0.1)
        # exit with timers armed and without stop()
    """)
    assert r.returncode == 0, r.stderr
    counts = eval(r.stdout.strip())
    assert all(c > 20 for c in counts), counts


def test_existing_sigprof_handler_is_chained():
    r = run_py("""
        import os, signal, time
        got = []
        signal.signal(signal.SIGPROF, lambda s, f: got.append(s))
        from truestack.engines.native import NativeCpuEngine
        e = NativeCpuEngine("cpu", 1000, 64)
        e.start()
        end = time.monotonic() + 0.2
        while time.monotonic() < end: pass
        os.kill(os.getpid(), signal.SIGPROF)   # not a timer signal: goes to the user's handler
        time.sleep(0.01)
        e.stop()
        print(len(got), len(e.drain()) > 20)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "True"]


def test_segfault_outside_the_walker_still_reaches_faulthandler():
    r = run_py("""
        import faulthandler, ctypes
        faulthandler.enable()
        from truestack.engines.native import NativeCpuEngine
        e = NativeCpuEngine("cpu", 1000, 64); e.start()
        ctypes.string_at(1)
    """)
    assert r.returncode == -signal.SIGSEGV
    assert "Fatal Python error" in r.stderr


def test_threads_are_named_and_thread_module_threads_are_sampled():
    r = run_py("""
        import _thread, threading, time
        from truestack.engines.native import NativeCpuEngine
        def spin(t):
            end = time.monotonic() + t
            while time.monotonic() < end: pass
        e = NativeCpuEngine("cpu", 1000, 64)
        e.start()
        done = threading.Event()
        def raw():
            spin(0.5); done.set()
        _thread.start_new_thread(raw, ())
        t = threading.Thread(target=spin, args=(0.5,), name="named-worker"); t.start()
        samples = []
        while not done.is_set():  # drain as the collector does: _thread threads are found at drains
            time.sleep(0.02); samples += e.drain()
        t.join(); time.sleep(0.05)
        samples += e.drain()
        e.stop(); samples += e.drain()
        leafs = {(s.thread_name, s.frames[-1].name) for s in samples if s.frames}
        print(("named-worker", "spin") in leafs, any(n.startswith("thread-") and f in ("spin", "raw") for n, f in leafs),
              e.stats().extra["threads_registered"])
    """)
    assert r.returncode == 0, r.stderr
    named, raw, registered = r.stdout.split()
    assert named == "True" and raw == "True"
    assert int(registered) <= 2  # dead threads were deregistered


def test_engine_unavailable_without_extension(monkeypatch):
    from truestack.engines import native
    from truestack.engines.base import EngineUnavailable

    monkeypatch.setattr(native, "_native", None)
    with pytest.raises(EngineUnavailable):
        native.NativeCpuEngine("cpu", 100, 64)


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_fork_child_stops_cleanly_parent_continues(mode):
    r = run_py(f"""
        import os, time
        from truestack.engines.native import NativeCpuEngine, NativeWallEngine
        def spin(t):
            end = time.monotonic() + t
            while time.monotonic() < end: pass
        cls = NativeCpuEngine if "{mode}" == "cpu" else NativeWallEngine
        e = cls("{mode}", 2000, 64)
        e.start(); spin(0.1)
        pid = os.fork()
        if pid == 0:
            spin(0.2)
            got = len(e.drain())          # nothing: the parent's samples are not ours
            e.stop()
            e2 = cls("{mode}", 2000, 64)  # the child may start its own session
            e2.start(); spin(0.2); e2.stop()
            os._exit(0 if got == 0 and len(e2.drain()) > 10 else 1)
        _, status = os.waitpid(pid, 0)
        spin(0.2); e.stop()
        print(status, len(e.drain()) > 50)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "True"]


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_interpreter_exit_with_armed_timers_and_busy_threads(mode):
    # The threads spin until after truestack's own exit handler has run (atexit is last in, first
    # out), then end: CPython 3.10 itself can crash at exit while daemon threads still run Python
    # (3 runs in 400 with no truestack loaded at all: a daemon thread taking the freed GIL).
    r = run_py(f"""
        import atexit, threading, time
        spinning = True
        threads = [threading.Thread(target=lambda: spin(), daemon=True) for _ in range(3)]
        def stop_spinning():
            global spinning
            spinning = False
            for t in threads:
                t.join()
        atexit.register(stop_spinning)
        from truestack.engines.native import NativeCpuEngine, NativeWallEngine
        def spin():
            while spinning:
                sum(range(1000))
        for t in threads:
            t.start()
        cls = NativeCpuEngine if "{mode}" == "cpu" else NativeWallEngine
        cls("{mode}", 10000, 64).start()
        time.sleep(0.3)
        print("bye")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "bye"
