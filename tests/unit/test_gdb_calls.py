"""attach's check that gdb can call a function in another process: tried on a process of ours,
with gdb stood in for by scripts that answer as a working and as a broken gdb do."""
from __future__ import annotations

import stat

from truestack.remote import gdb_calls

WORKING = """#!/bin/sh
# gdb -nx -batch -p PID -ex ...: answers as gdb does when the call came back
echo "\\$1 = $4"
"""
BROKEN = """#!/bin/sh
echo "0x00007f in clock_nanosleep () from /lib/x86_64-linux-gnu/libc.so.6"
echo "Couldn't write extended state status: Bad address." >&2
"""


def _script(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_call_that_comes_back_with_the_process_id_is_trusted(tmp_path):
    assert gdb_calls.probe(_script(tmp_path, "gdb-ok", WORKING)) is None


def test_a_call_that_cannot_restore_the_registers_is_reported_with_gdbs_words(tmp_path):
    assert gdb_calls.probe(_script(tmp_path, "gdb-amx", BROKEN)) == "Couldn't write extended state status: Bad address"


def test_a_gdb_that_cannot_run_is_reported(tmp_path):
    said = gdb_calls.probe(str(tmp_path / "no-such-gdb"))
    assert said is not None and said.startswith("gdb could not be tried"), said


def test_only_a_cpu_with_amx_needs_the_try(tmp_path):
    with_amx, without = tmp_path / "amx", tmp_path / "plain"
    with_amx.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f amx_bf16 amx_tile amx_int8\n")
    without.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f\n")
    assert gdb_calls._cpu_has_amx(str(with_amx))
    assert not gdb_calls._cpu_has_amx(str(without))
    assert not gdb_calls._cpu_has_amx(str(tmp_path / "missing"))
