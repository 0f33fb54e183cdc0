"""A program that uses `truestack.profile()` itself still works under
`truestack record`, and API sessions nest: the inner block gets its own
output while the outer recording goes on."""
from __future__ import annotations

import subprocess
import sys

from conftest import truestack_env

from truestack.model import load

PROGRAM = """
import time, truestack
def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(300))
def inner_work():
    spin(0.4)
def outer_work():
    spin(0.4)
outer_work()
with truestack.profile(output={inner!r}):
    inner_work()
outer_work()
print("done")
"""


def _names(profile):
    for row in profile.iter_samples():
        for frame in profile.stacks.frames_of(row.stack):
            yield profile.func_name(profile.frame_func(frame))


def test_profile_inside_record_gets_its_own_output_and_record_goes_on(tmp_path):
    inner, outer = tmp_path / "inner.tsp", tmp_path / "outer.tsp"
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM.format(inner=str(inner)))
    proc = subprocess.run([sys.executable, "-m", "truestack", "record", "--rate", "200", "-o", str(outer), str(script)],
                          env=truestack_env(), capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr  # was: "another native engine is already running"
    assert "done" in proc.stdout
    inner_p, outer_p = load(inner), load(outer)
    inner_names, outer_names = set(_names(inner_p)), set(_names(outer_p))
    assert "inner_work" in inner_names and "outer_work" not in inner_names, inner_names
    assert {"inner_work", "outer_work"} <= outer_names, outer_names
    assert any("nested in a running session" in n for n in inner_p.meta.sampler_stats.notes)


def test_api_sessions_nest_in_a_plain_run(tmp_path):
    inner = tmp_path / "inner.tsp"
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM.format(inner=str(inner)).replace(
        "outer_work()\nwith", "outer = truestack.start(rate=200)\nouter_work()\nwith").replace(
        'print("done")', 'p = truestack.stop()\nprint("done", p.sample_count > 0)'))
    proc = subprocess.run([sys.executable, str(script)], env=truestack_env(), capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "done True" in proc.stdout
    names = set(_names(load(inner)))
    assert "inner_work" in names and "outer_work" not in names, names
