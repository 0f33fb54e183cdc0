"""A thread that blocks SIGPROF (signal.pthread_sigmask) is never interrupted by truestack's handler:
the profile says which threads did, instead of showing them as idle or not at all."""

from __future__ import annotations

import pytest
from conftest import native_available, run_truestack

from truestack.model import load

PROGRAM = """
import signal, threading, time
def spin(seconds):
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        sum(range(1000))
def free():  # alive when the run ends, SIGPROF not blocked: not named
    spin(0.3)
    done.set()
    time.sleep(60)
done = threading.Event()
threading.Thread(target=free, name="free-worker", daemon=True).start()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF})
spin(0.4)
done.wait()
"""


@pytest.mark.skipif(not native_available(), reason="the native engine's handler")
@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_the_profile_names_the_threads_that_block_sigprof(tmp_path, mode):
    program, out = tmp_path / "blocker.py", tmp_path / "out.tsp"
    program.write_text(PROGRAM)
    proc = run_truestack("record", "--mode", mode, "--rate", "1k", "-o", str(out), str(program))
    assert proc.returncode == 0, proc.stderr
    notes = [n for n in load(out).meta.sampler_stats.notes if "block SIGPROF" in n]
    assert len(notes) == 1 and notes[0].endswith(": MainThread") and notes[0].startswith("1 thread(s)"), notes
    assert "block SIGPROF" in proc.stderr
