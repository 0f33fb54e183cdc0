"""A program that replaces itself with another (`os.exec*`) under `record`: the other program
runs, its exit status is the run's, and the profile covers the run up to the exec
(recording/exec_guard.py). Before, a SIGPROF pending across the exec ended the new image."""

from __future__ import annotations

import pytest
from conftest import native_available, run_truestack

from truestack.model import load

EXECER = """
import os, sys, time
t = time.perf_counter()
while time.perf_counter() - t < 0.3:
    sum(range(1000))
os.{call}(sys.executable, [sys.executable, "-c", "print('the new image ran'); raise SystemExit(7)"]{env})
"""


@pytest.mark.skipif(not native_available(), reason="the native engine's timers")
@pytest.mark.parametrize("mode", ["cpu", "wall"])
@pytest.mark.parametrize("call", ["execv", "execve"])
def test_the_program_execed_runs_with_its_exit_status_and_the_profile_ends_at_the_exec(tmp_path, mode, call):
    program, out = tmp_path / "execer.py", tmp_path / "out.tsp"
    program.write_text(EXECER.format(call=call, env=", dict(os.environ)" if call == "execve" else ""))
    for _attempt in range(3):  # it failed most runs, not every run: a few runs each
        proc = run_truestack("record", "--mode", mode, "--rate", "1k", "-o", str(out), str(program))
        assert proc.returncode == 7, proc.stderr
        assert "the new image ran" in proc.stdout, proc.stderr
        meta = load(out).meta
        assert meta.interrupted and f"os.{call}" in meta.interrupted, meta.interrupted
        assert meta.sampler_stats.samples >= 100, meta.sampler_stats.samples


FAILING = """
import os, sys, time
def busy(seconds):
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        sum(range(1000))
busy(0.2)
for bad in (lambda: os.execv(sys.executable, []), lambda: os.execv("/nonexistent/x", ["x"]),
            lambda: os.execvp("surely-no-such-program", ["surely-no-such-program"]),
            lambda: os.execv(sys.executable, [sys.executable, "a\\0b"]),
            lambda: os.execve(sys.executable, [sys.executable], {"A=B": "1"}),
            lambda: os.execve(sys.executable, [sys.executable], {"": "1"}),
            lambda: os.execve(sys.executable, [sys.executable], {"A": "\\0"})):
    try:
        bad()
    except (OSError, ValueError):
        pass
pid = os.fork()
if pid == 0:  # a forked child's exec: the program's profile goes on
    os.execv(sys.executable, [sys.executable, "-c", "pass"])
os.waitpid(pid, 0)
busy(0.3)
"""


@pytest.mark.skipif(not native_available(), reason="the native engine's timers")
def test_an_exec_that_fails_or_happens_in_a_forked_child_leaves_the_profile_running(tmp_path):
    program, out = tmp_path / "failing.py", tmp_path / "out.tsp"
    program.write_text(FAILING)
    proc = run_truestack("record", "--rate", "1k", "-o", str(out), str(program))
    assert proc.returncode == 0, proc.stderr
    meta = load(out).meta
    assert meta.interrupted is None, meta.interrupted
    assert meta.sampler_stats.samples >= 350, meta.sampler_stats.samples  # both busy parts (~500)
