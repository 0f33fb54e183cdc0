"""A `threading` thread's samples reach the profile (the native engine's thread hook once made
the session drop every one of them as the sampler's own overhead)."""
from __future__ import annotations

from conftest import run_truestack

PROGRAM = """\
import threading, time

def spin(seconds):
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x += 1

def worker_spin():
    spin(0.6)

t = threading.Thread(target=worker_spin, name="worker")
t.start()
spin(0.6)
t.join()
"""


def test_threading_threads_are_in_the_profile_without_truestacks_frames(tmp_script, tmp_path):
    script = tmp_script("threads.py", PROGRAM)
    result = run_truestack("record", "-q", "--rate", "200", "-o", "run.tsp", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    from truestack.model import load

    profile = load(str(tmp_path / "run.tsp"))
    counts = {t.name: len(t) for t in profile.threads.values()}
    assert counts.get("worker", 0) >= 40 and counts.get("MainThread", 0) >= 40, counts
    worker = next(t for t in profile.threads.values() if t.name == "worker")
    stacks = {profile.stacks.frames_of(s)[-1] if s >= 0 else -1 for s in worker.stack}
    leaves = {profile.func_name(profile.frame_func(f)) for f in stacks if f >= 0}
    assert "spin" in leaves, leaves
    files = {profile.func_file(f) for f in range(len(profile.funcs))}
    assert not any("/truestack/" in f for f in files), files
