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
    return sorted((cache / "symbols").glob("*.bin")) if (cache / "symbols").exists() else []


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
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # cut short, as by a full disk
    again = probe(str(tmp_path))
    assert again["names"] == ["qsort", "deflate"] and again["elftools"] and not again["errors"]
    assert not probe(str(tmp_path))["elftools"], "the damaged files were not rewritten"


def test_an_entry_for_another_version_of_the_file_is_not_used(tmp_path):
    from truestack.engines import native_symcache

    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"\x7fELF one")
    os.environ["TRUESTACK_CACHE_DIR"] = str(tmp_path / "cache")
    try:
        native_symcache.store(str(lib), first_vaddr=0, starts=[16], ends=[32], names=["f"])
        assert native_symcache.load(str(lib)) == {"first_vaddr": 0, "starts": [16], "ends": [32], "names": ["f"]}
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


COLUMNS = {
    "first_vaddr": 4096,
    "starts": [16, 2**40, 2**63 - 1],
    "ends": [32, 2**40 + 8, 0],
    "names": ["f", "_ZN3foo3barEv", "ünïcode"],
    "function_starts": [],
    "none": [],
}


def test_columns_come_back_as_stored_and_a_later_store_adds_to_them(tmp_path, monkeypatch):
    from truestack.engines import native_symcache

    monkeypatch.setenv("TRUESTACK_CACHE_DIR", str(tmp_path / "cache"))
    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"\x7fELF")
    native_symcache.store(str(lib), **{k: v for k, v in COLUMNS.items() if k != "function_starts"})
    native_symcache.store(str(lib), function_starts=[1, 2, 3])
    assert native_symcache.load(str(lib)) == {**COLUMNS, "function_starts": [1, 2, 3]}


def test_an_entry_cut_short_or_damaged_anywhere_is_passed_over_without_an_error(tmp_path, monkeypatch):
    from truestack.engines import native_symcache

    monkeypatch.setenv("TRUESTACK_CACHE_DIR", str(tmp_path / "cache"))
    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"\x7fELF")
    native_symcache.store(str(lib), **COLUMNS)
    [entry] = cache_files(tmp_path / "cache")
    whole = entry.read_bytes()
    for cut in range(len(whole)):
        entry.write_bytes(whole[:cut])
        assert native_symcache.load(str(lib)) == {}, cut
    for at in range(len(whole)):  # any byte damaged: passed over (the checksum), never a wrong value
        entry.write_bytes(whole[:at] + bytes([whole[at] ^ 0x5A]) + whole[at + 1 :])
        assert native_symcache.load(str(lib)) == {}, at
    entry.write_bytes(whole + b"\0")
    assert native_symcache.load(str(lib)) == {}


def test_a_column_of_the_wrong_kind_is_not_used_as_symbols(tmp_path, monkeypatch):
    from truestack.engines import native_symbols, native_symcache

    monkeypatch.setenv("TRUESTACK_CACHE_DIR", str(tmp_path / "cache"))
    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"\x7fELF")  # not a real ELF file: symbols come from the cache or not at all
    native_symcache.store(str(lib), first_vaddr=0, starts=["16"], ends=[32], names=["f"])
    module = native_symbols._Module(str(lib), 0)
    module.load()
    assert module.starts == [] and module.symbol(20) is None and module.error
    native_symcache.store(str(lib), starts=[16])
    module = native_symbols._Module(str(lib), 0)
    module.load()
    assert module.symbol(20) == "f" and not module.error


def test_storing_an_entry_removes_the_same_files_entry_of_the_json_format(tmp_path, monkeypatch):
    from truestack.engines import native_symcache

    monkeypatch.setenv("TRUESTACK_CACHE_DIR", str(tmp_path / "cache"))
    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"\x7fELF")
    native_symcache.store(str(lib), names=["f"])
    [entry] = cache_files(tmp_path / "cache")
    old, other = entry.with_suffix(".json"), entry.with_name("libother.so-1-2-3-4.json")
    old.write_text("{}")
    other.write_text("{}")
    native_symcache.store(str(lib), names=["g"])
    assert not old.exists() and other.exists()
    assert native_symcache.load(str(lib)) == {"names": ["g"]}


def test_a_name_holding_the_separator_is_not_kept(tmp_path, monkeypatch):
    from truestack.engines import native_symcache

    monkeypatch.setenv("TRUESTACK_CACHE_DIR", str(tmp_path / "cache"))
    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"\x7fELF")
    native_symcache.store(str(lib), names=["a\0b"])
    assert native_symcache.load(str(lib)) == {}
