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


def test_generated_code_is_named_from_the_perf_map_without_reading_the_maps_again(tmp_path, monkeypatch):
    import mmap
    import os

    from truestack.engines import native_symbols
    from truestack.engines.native_perfmap import PerfMap

    code = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)  # generated code's memory
    try:
        import ctypes

        start = ctypes.addressof(ctypes.c_char.from_buffer(code))
        (tmp_path / f"perf-{os.getpid()}.map").write_text(f"{start:x} 20 py::spin:/prog.py\n")
        symbols = native_symbols.Symbolizer()
        symbols._perf_map = PerfMap(str(tmp_path))
        reads = []
        original = native_symbols.Symbolizer._read_maps
        monkeypatch.setattr(native_symbols.Symbolizer, "_read_maps", lambda self: (reads.append(1), original(self)))
        first = symbols.frame(start + 5, leaf=False)
        assert (first.name, first.file) == ("py::spin:/prog.py", str(tmp_path / f"perf-{os.getpid()}.map"))
        assert len(reads) == 1  # the first address there: the mapping is new
        unnamed = symbols.frame(start + 0x30, leaf=False), symbols.frame(start + 0x50, leaf=True)  # not in the map
        assert {(f.name, f.file) for f in unnamed} == {("[generated code]", f"[anon:0x{start:x}]")}  # one per mapping
        assert symbols.frame(start + 12, leaf=True).name == "py::spin:/prog.py"
        assert len(reads) == 1  # the mapping is known now: no read per address
    finally:
        del start
        code.close()
