"""--native's symbolizer on code no file holds: the vDSO (clock_gettime runs there) is named by
its own symbols, read from its image in memory and cached by the image's content."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import truestack_env

# Resolves the vDSO's clock_gettime by address, as the handler would report an instruction in it.
VDSO_PROBE = """
import ctypes, json
from truestack.engines.native_symbols import VDSO, Symbolizer
libc = ctypes.CDLL(None)
getauxval = libc.getauxval
getauxval.restype, getauxval.argtypes = ctypes.c_ulong, [ctypes.c_ulong]
base = getauxval(33)  # AT_SYSINFO_EHDR: where the kernel mapped the vDSO's ELF image
s = Symbolizer()
s._read_maps()
lo, size = s._vdso
names = {s.frame(addr, leaf=True).name for addr in range(lo, lo + size, 16)}
files = {s.frame(addr, leaf=True).file for addr in range(lo, lo + size, 16)}
print(json.dumps({"base": base, "lo": lo, "names": sorted(names), "files": sorted(files), "errors": s.errors}))
"""


@pytest.fixture(autouse=True)
def _needs_pyelftools():
    pytest.importorskip("elftools", reason="--native's symbolizer needs pyelftools")


def test_the_vdso_is_symbolized_from_memory():
    proc = subprocess.run(
        [sys.executable, "-c", VDSO_PROBE], env=truestack_env(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["lo"] == found["base"], found  # the mapping found is the image the kernel announced
    assert not found["errors"], found["errors"]
    assert found["files"] == ["[vdso]"], found["files"]
    assert any("clock_gettime" in name for name in found["names"]), found["names"]
    assert not any(name.startswith("[unknown]") for name in found["names"]), found["names"]


CACHED_PROBE = """
import json, sys
from truestack.engines.native_symbols import Symbolizer
s = Symbolizer()
s._read_maps()
lo, size = s._vdso
names = {s.frame(addr, leaf=True).name for addr in range(lo, lo + size, 16)}
print(json.dumps({"names": sorted(names), "elftools": "elftools" in sys.modules}))
"""


def test_the_vdso_symbols_are_cached_by_content(tmp_path):
    def probe() -> dict:
        env = truestack_env(TRUESTACK_CACHE_DIR=str(tmp_path))
        proc = subprocess.run([sys.executable, "-c", CACHED_PROBE], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    first = probe()
    assert first["elftools"], "the first run should have read the image with pyelftools"
    second = probe()
    assert second["names"] == first["names"]
    assert not second["elftools"], "the second run read the vDSO's image again (pyelftools imported)"
