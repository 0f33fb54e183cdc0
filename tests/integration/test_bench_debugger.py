"""Smoke test: bench/debugger/run.py --quick runs and prints every case for both debuggers."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import REPO, truestack_env

pytestmark = pytest.mark.timeout(120)


def test_debugger_bench_quick():
    result = subprocess.run([sys.executable, str(REPO / "bench" / "debugger" / "run.py"), "--quick"],
                            env=truestack_env(), capture_output=True, text=True, timeout=110)
    assert result.returncode == 0, result.stderr
    rows = {}
    for line in result.stdout.splitlines():
        match = re.match(r"\((0|a|b)\) .*?\s([\d.]+)x\s+([\d.]+)x$", line)
        if match:
            rows[match.group(1)] = (float(match.group(2)), float(match.group(3)))
    assert set(rows) == {"0", "a", "b"}, result.stdout
    for ours, pdb in rows.values():
        assert ours > 0 and pdb > 0
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert f"py{version} truestack" in result.stdout
    # the C fast path was in use (the test build requires the extension)
    assert "+C" in result.stdout, result.stdout
