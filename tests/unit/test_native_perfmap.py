"""The perf map reader: entries by address, lines appended later taken in, a line half-written left
for the next read, lines that are no entry passed over, a forked child reading its own file too."""
from __future__ import annotations

import os

from truestack.engines.native_perfmap import PerfMap


def test_entries_are_found_by_address_and_later_lines_are_read_when_needed(tmp_path):
    path = tmp_path / f"perf-{os.getpid()}.map"
    path.write_text("1000 10 py::first:/a.py\nnot an entry\n2000 8 jit code with spaces\n3000 4 py::half")
    perf_map = PerfMap(str(tmp_path))
    assert perf_map.path == str(path)
    assert perf_map.name(0x1000) == "py::first:/a.py"
    assert perf_map.name(0x100F) == "py::first:/a.py"
    assert perf_map.name(0x1010) is None  # past its end
    assert perf_map.name(0x2004) == "jit code with spaces"
    assert perf_map.name(0x3000) is None  # its line is not finished yet
    with open(path, "a") as f:
        f.write("line\n4000 2 py::second:/b.py\n")
    assert perf_map.name(0x3002) == "py::halfline"  # the rest of the line arrived
    assert perf_map.name(0x4001) == "py::second:/b.py"
    assert perf_map.name(0x1004) == "py::first:/a.py"  # the first read's entries are kept


def test_no_map_file_names_nothing(tmp_path):
    assert PerfMap(str(tmp_path)).name(0x1000) is None


def test_a_forked_child_reads_its_own_map(tmp_path):
    (tmp_path / f"perf-{os.getpid()}.map").write_text("1000 10 parent\n")
    perf_map = PerfMap(str(tmp_path))
    assert perf_map.name(0x1000) == "parent"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own file, and the parent's code, which it inherited
        try:
            (tmp_path / f"perf-{os.getpid()}.map").write_text("5000 10 child\n")
            answer = f"{perf_map.name(0x5000)} {perf_map.name(0x1000)}"
            os.write(write, answer.encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 100).decode() == "child parent"
    os.close(read)
