"""The extensions' shape: the sampler ships no oracle and no test hooks, the
stubs name what the modules hold, and the frame kinds are one list."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, truestack_env

import truestack
from truestack import _debughook, _native, _oracle
from truestack.samples import FRAME_KINDS

PACKAGE = Path(truestack.__file__).resolve().parent


def stub_names(module_name: str) -> set[str]:
    tree = ast.parse((PACKAGE / f"{module_name}.pyi").read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def module_names(module: object) -> set[str]:
    return {n for n in dir(module) if not (n.startswith("__") and n.endswith("__"))}


def test_native_stub_names_match_the_module():
    # The stub also declares the test build's probe and hooks; a user's build lacks just those.
    assert module_names(_native) <= stub_names("_native")
    test_only = {n for n in stub_names("_native") if n.startswith(("_probe_", "_test_"))}
    assert stub_names("_native") - module_names(_native) <= test_only


def test_debughook_stub_names_match_the_module():
    assert module_names(_debughook) == stub_names("_debughook")
    assert module_names(_debughook.BreakState) >= {"enabled", "temporary", "hits", "ignore", "op", "cond_code"}


def test_oracle_stub_names_match_the_module():
    # The stub also declares the test build's hooks; a user's build lacks just those.
    assert module_names(_oracle) <= stub_names("_oracle")
    assert stub_names("_oracle") - module_names(_oracle) <= {"inject_walker_fault", "walk_entry_window"}


def test_remote_stub_names_match_the_module():
    from truestack import _remote

    assert module_names(_remote) == stub_names("_remote")
    assert _remote.MAX_DEPTH == _native.MAX_DEPTH and sys.hexversion >> 16 == _remote.VERSION_HEX >> 16


def test_frame_kinds_are_one_list():
    assert _native.FRAME_KINDS == FRAME_KINDS


def test_drain_returns_named_fields():
    from truestack.engines.native import NativeCpuEngine

    engine = NativeCpuEngine(rate_hz=1000)
    engine.start()
    try:
        end = __import__("time").thread_time() + 0.3
        while __import__("time").thread_time() < end:
            sum(range(200))
    finally:
        engine.stop()
    raw = _native.drain()
    engine.drain()
    assert raw, "no samples in 0.3 s of CPU at 1 kHz"
    sample = raw[0]
    assert isinstance(sample, _native.RawSample)
    assert sample.tid > 0 and sample.weight_ns > 0 and sample.state == "running"
    assert isinstance(sample.frames, tuple) and len(sample.frames) % 2 == 0


def test_users_build_has_no_oracle_in_the_sampler_and_no_test_hooks(tmp_path):
    """Built as `pip install .` builds it (no TRUESTACK_TEST_BUILD), the sampler exposes nothing
    of the oracle and the oracle has no fault injection, yet `truestack validate` works."""
    env = {k: v for k, v in os.environ.items() if k != "TRUESTACK_TEST_BUILD"}
    build = tmp_path / "build"
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(build), "--build-temp",
                    str(tmp_path / "tmp")], cwd=REPO, env=env, check=True, capture_output=True)
    # The installed package with the user's build of the extensions in place of the test build's.
    site = tmp_path / "site"
    shutil.copytree(PACKAGE, site / "truestack", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for so in (build / "truestack").glob("*.so"):
        shutil.copy(so, site / "truestack")
    check = ("import truestack._native as n, truestack._oracle as o;"
             "print([x for x in dir(n) if 'valid' in x or 'inject' in x or 'probe' in x],"
             " hasattr(o, 'inject_walker_fault'))")
    user_env = truestack_env(PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, "-c", check], env=user_env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] False"
    script = tmp_path / "work.py"
    script.write_text("def f(n):\n    return n if n < 2 else f(n - 1) + f(n - 2)\nfor _ in range(30):\n    f(18)\n")
    proc = subprocess.run([sys.executable, "-m", "truestack", "validate", "--min-checks", "50", str(script)],
                          env=user_env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "PASS" in proc.stderr
    faulty = subprocess.run([sys.executable, "-m", "truestack", "validate", "--walker-fault", "drop", str(script)],
                            env=user_env, capture_output=True, text=True, timeout=300)
    assert faulty.returncode == 2
    assert "needs a test build" in faulty.stderr and "Traceback" not in faulty.stderr
