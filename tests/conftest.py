"""Shared test helpers: run truestack and target programs in real subprocesses."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src"


def truestack_env(**extra: str) -> dict[str, str]:
    """Environment for a child interpreter that can import truestack.

    When the package is installed, the installed copy is used; otherwise the
    source tree is put on PYTHONPATH.
    """
    env = dict(os.environ)
    env.pop("PYTHONBREAKPOINT", None)
    try:
        import truestack

        installed_from_src = Path(truestack.__file__).resolve().is_relative_to(SRC)
    except ImportError:
        installed_from_src = True
    if installed_from_src:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def run_truestack(*args: str, cwd: str | os.PathLike | None = None, timeout: float = 240,
                  env: dict[str, str] | None = None, input: str | None = None) -> subprocess.CompletedProcess:
    """Run `python -m truestack ARGS` and capture its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "truestack", *args],
        cwd=cwd, env=env or truestack_env(), capture_output=True, text=True,
        timeout=timeout, input=input,
    )


def native_available() -> bool:
    try:
        from truestack import _native  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture
def tmp_script(tmp_path):
    """Write a script file and return its path: tmp_script("name.py", source)."""

    def write(name: str, source: str) -> Path:
        path = tmp_path / name
        path.write_text(source)
        return path

    return write
