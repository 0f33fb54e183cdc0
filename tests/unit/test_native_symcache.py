"""--native's symbol cache: a second run names C functions without pyelftools, from the cache;
a stale, damaged or unwritable cache only costs the read it would have saved."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import truestack_env

# Resolves libc's qsort and a zlib function by address, and says whether pyelftools was needed.
PROBE = """
import ctypes, ctypes.util, json, sys, zlib
from truestack.engines.native_symbols import Symbolizer
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libz = ctypes.CDLL(ctypes.util.find_library("z"))
s = Symbolizer()
names = [s.frame(ctypes.cast(f, ctypes.c_void_p).value, leaf=True).name for f in (libc.qsort, libz.deflate)]
print(json.dumps({"names": names, "elftools": "elftools" in sys.modules, "errors": s.errors}))
"""


def probe(cache: str) -> dict:
    env = truestack_env(TRUESTACK_CACHE_DIR=cache)
    proc = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def cache_files(cache) -> list:
    return sorted((cache / "symbols").glob("*.json")) if (cache / "symbols").exists() else []


@pytest.fixture(autouse=True)
def _needs_pyelftools():
    pytest.importorskip("elftools", reason="--native's symbolizer needs pyelftools")


def test_second_run_names_the_same_functions_without_pyelftools(tmp_path):
    first = probe(str(tmp_path))
    assert first["names"] == ["qsort", "deflate"] and first["elftools"], first
    assert cache_files(tmp_path), "nothing was cached"
    second = probe(str(tmp_path))
    assert second["names"] == first["names"]
    assert not second["elftools"], "the second run read the ELF files again"


def test_a_damaged_cache_file_is_read_past(tmp_path):
    probe(str(tmp_path))
    for path in cache_files(tmp_path):
        path.write_text(path.read_text()[: len(path.read_text()) // 2])  # cut short, as by a full disk
    again = probe(str(tmp_path))
    assert again["names"] == ["qsort", "deflate"] and again["elftools"] and not again["errors"]
    assert not probe(str(tmp_path))["elftools"], "the damaged files were not rewritten"


def test_an_entry_for_another_version_of_the_file_is_not_used(tmp_path):
    from truestack.engines import native_symcache

    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"\x7fELF one")
    os.environ["TRUESTACK_CACHE_DIR"] = str(tmp_path / "cache")
    try:
        native_symcache.store(str(lib), symbols=[0, [16], [32], ["f"]])
        assert native_symcache.load(str(lib))["symbols"] == [0, [16], [32], ["f"]]
        lib.write_bytes(b"\x7fELF two, longer")  # rebuilt: another size and mtime
        assert native_symcache.load(str(lib)) == {}
    finally:
        del os.environ["TRUESTACK_CACHE_DIR"]


def test_empty_cache_dir_setting_turns_it_off_and_an_unwritable_one_is_harmless(tmp_path):
    off = probe("")
    assert off["names"] == ["qsort", "deflate"] and off["elftools"]
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("")
    assert probe(str(blocked))["names"] == ["qsort", "deflate"]
