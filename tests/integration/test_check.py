"""`truestack check` names the engine `record` will use and why; without the
native extension it says so, how to fix it, and `record` warns up front."""
from __future__ import annotations

import os
import subprocess
import sys

from conftest import truestack_env

BLOCK_NATIVE = """
import sys
class _NoNative:
    def find_spec(self, name, path=None, target=None):
        if name == "truestack._native":
            raise ImportError("simulated: the extension was not built")
        return None
sys.meta_path.insert(0, _NoNative())
"""


def run(args, tmp_path, block_native=False):
    env = truestack_env()
    if block_native:
        (tmp_path / "sitecustomize.py").write_text(BLOCK_NATIVE)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "truestack", *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)


def test_check_names_the_engine_and_the_highest_rate(tmp_path):
    proc = run(["check"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "supported" in out and "NOT supported" not in out, out
    assert "cpu mode:       engine native-cpu, timer " in out, out
    assert "wall mode:      engine native-wall" in out, out
    assert "perf_event_paranoid" in out, out
    assert "highest sustained rate ~" in out, out
    assert "ok: record uses the native sampler" in out, out


def test_check_without_the_extension_says_so_and_how_to_fix_it(tmp_path):
    proc = run(["check"], tmp_path, block_native=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "engine safepoint (biased)" in proc.stdout, proc.stdout
    assert "simulated: the extension was not built" in proc.stdout, proc.stdout
    assert "fix: install a C compiler" in proc.stdout, proc.stdout


def test_record_warns_before_the_program_runs_when_it_falls_back(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import sys\nprint('program ran', file=sys.stderr, flush=True)\n")
    proc = run(["record", "-o", str(tmp_path / "out.tsp"), str(script)], tmp_path, block_native=True)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    warning = err.find("truestack: WARNING: native engine unavailable")
    assert warning >= 0, err
    assert warning < err.find("program ran"), err  # said before the program runs
    assert "truestack check" in err, err
