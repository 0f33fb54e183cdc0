"""A program that closes every descriptor it did not open (a daemon's `os.closerange`) and opens
files of its own, which take the lowest free numbers: its files stay its own, its exit status
stays its own, and the profile still reaches the recorder (recording/pipe_out.py)."""

from __future__ import annotations

import pytest
from conftest import native_available, run_truestack

from truestack.model import load

DAEMON = """
import atexit, os, sys, time
os.closerange(3, 1 << 16)
# The lowest free numbers: those truestack's pipe and timer had. Written and closed at exit,
# after truestack has stopped its timers.
logs = [open(f"{sys.argv[1]}.{i}", "w", buffering=1) for i in range(16)]
def busy():
    t = time.perf_counter()
    while time.perf_counter() - t < 1.5:  # the timers are checked once a second
        sum(range(1000))
busy()
@atexit.register
def finish():
    for log in logs:
        log.write("mine\\n")
        log.close()
sys.exit(3)
"""


@pytest.mark.skipif(not native_available(), reason="the native engine's timers")
@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_the_program_closing_truestacks_descriptors_keeps_its_files_and_the_profile(tmp_path, mode):
    program, log, out = tmp_path / "daemon.py", tmp_path / "own.log", tmp_path / "out.tsp"
    program.write_text(DAEMON)
    proc = run_truestack("record", "--mode", mode, "-o", str(out), str(program), str(log))
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert [(tmp_path / f"own.log.{i}").read_text() for i in range(16)] == ["mine\n"] * 16  # theirs only
    profile = load(out)
    assert profile.meta.interrupted is None, profile.meta.interrupted  # the stream's end arrived
    notes = profile.meta.sampler_stats.notes
    names = [{profile.func_name(profile.frame_func(f)) for f in profile.stack_frames(row.stack)}
             for row in profile.iter_samples()]
    # Of ~150 at 100 Hz; in cpu mode only from the timer's re-arming on (within ~1 s).
    assert sum("busy" in n for n in names) >= (100 if mode == "wall" else 20), names
    if mode == "cpu":  # its perf event went with the descriptor: armed again, and said
        assert any("descriptors of 1 CPU timer(s)" in n and "1 armed again" in n for n in notes), notes
