"""`truestack report`: print a saved profile, convert it, refuse damaged files."""
# Target programs spin for CPU time, not wall time: on a busy shared machine a
# wall-clock spin can go by with (almost) no CPU and so no samples.
from __future__ import annotations

import json
import pstats
import re
import struct

import pytest
from conftest import run_truestack

from truestack.model import FORMAT_VERSION, load
from truestack.model.storage import MAGIC

SCRIPT = '''
import time
def report_hot(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(300))
def sleepy():
    time.sleep(0.3)
report_hot(0.4)
sleepy()
'''


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    script = tmp / "rep.py"
    script.write_text(SCRIPT)
    out = tmp / "run.tsp"
    proc = run_truestack("record", "--engine", "safepoint", "--mode", "wall", "--rate", "200", "-q",
                         "-o", str(out), str(script), cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return out


TREE_LINE = re.compile(r"^([│├└─ ]*)(\d+\.\d)%  self (\d+\.\d)%  (\d+\.\d{3}) s  (.*)$")


def test_report_prints_header_and_call_tree(saved):
    # The default view is the call tree (it was the method table, still there with --top N).
    proc = run_truestack("report", str(saved))
    assert proc.returncode == 0, proc.stderr
    assert "wall mode" in proc.stdout and "engine safepoint" in proc.stdout
    assert "requested 200 Hz" in proc.stdout
    header, tree = proc.stdout.split("\n\n", 1)
    rows = [TREE_LINE.match(line) for line in tree.splitlines()]
    assert all(rows), tree
    assert rows[0].group(1) == "" and rows[0].group(5).startswith("<module>  rep.py:")
    hot = [r for r in rows if r.group(5).startswith("report_hot  rep.py:")]
    assert hot and len(hot[0].group(1)) == 3, tree  # a child of <module>
    assert "\x1b[" not in proc.stdout  # not a terminal: no colour
    # wall mode: idle samples of sleepy() left out unless asked
    assert "idle samples left out" in header
    with_idle = run_truestack("report", "--include-idle", str(saved))
    assert "sleepy  rep.py:" in with_idle.stdout
    assert "idle samples left out" not in with_idle.stdout


def _tree_rows(text: str) -> list[re.Match]:
    rows = [TREE_LINE.match(line) for line in text.split("\n\n", 1)[1].splitlines()]
    assert all(rows), text
    return rows


def test_report_tree_options(saved, tmp_path):
    everything = run_truestack("report", "--include-idle", "--show-all", "--min-percent", "0", str(saved)).stdout
    assert "sleep" in everything
    pruned = run_truestack("report", "--include-idle", "--min-percent", "40", str(saved)).stdout
    assert len(_tree_rows(pruned)) < len(_tree_rows(everything))
    assert all(float(r.group(2)) >= 40 for r in _tree_rows(pruned))
    assert "\x1b[" in run_truestack("report", "--color", "always", str(saved)).stdout
    out = tmp_path / "t.tree.txt"
    proc = run_truestack("report", str(saved), "--include-idle", "-o", str(out), "--min-percent", "40")
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == pruned


def test_report_top_prints_method_table(saved):
    proc = run_truestack("report", "--top", "5", str(saved))
    assert proc.returncode == 0, proc.stderr
    assert "report_hot" in proc.stdout
    assert "samples" in proc.stdout and "on top" in proc.stdout


@pytest.mark.parametrize("fmt,ext", [("speedscope", "speedscope.json"), ("firefox", "firefox.json"),
                                     ("pstats", "pstats"), ("collapsed", "collapsed"), ("pprof", "pb.gz"),
                                     ("flamegraph", "html"), ("table", "txt"), ("truestack", "tsp")])
def test_report_converts(saved, tmp_path, fmt, ext):
    out = tmp_path / f"conv.{ext}"
    proc = run_truestack("report", str(saved), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"({fmt}," in proc.stderr
    data = out.read_bytes()
    assert data
    if fmt == "speedscope":
        assert "report_hot" in {f["name"] for f in json.loads(data)["shared"]["frames"]}
    elif fmt == "pstats":
        assert any(func[2] == "report_hot" for func in pstats.Stats(str(out)).stats)
    elif fmt == "truestack":
        assert load(out).sample_count > 0
    elif fmt != "pprof":
        assert b"report_hot" in data


def test_report_format_to_stdout_and_function_level(saved):
    proc = run_truestack("report", str(saved), "-f", "collapsed", "--function-level")
    assert proc.returncode == 0, proc.stderr
    hot = [line for line in proc.stdout.splitlines() if "report_hot" in line]
    assert hot and all("rep.py:" not in line for line in hot)


def test_report_keeps_lines_by_default(saved):
    lines = run_truestack("report", str(saved), "-f", "collapsed").stdout
    assert "rep.py:" in lines


def _bad(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_bad_files(saved, tmp_path):
    good = saved.read_bytes()
    newer = bytearray(good)
    struct.pack_into("<H", newer, len(MAGIC), FORMAT_VERSION + 5)
    cases = {
        "truncated": (_bad(tmp_path, "cut.tsp", good[: len(good) // 2]), "truncated"),
        "newer": (_bad(tmp_path, "new.tsp", bytes(newer)), "newer"),
        "not a profile": (_bad(tmp_path, "text.tsp", b"just some text\n"), "not a truestack profile"),
        "empty": (_bad(tmp_path, "empty.tsp", b""), "not a truestack profile"),
        "missing": (tmp_path / "absent.tsp", "no such profile"),
        "directory": (tmp_path, "directory"),
    }
    for case, (path, expected) in cases.items():
        for extra in ([], ["-f", "collapsed"]):
            proc = run_truestack("report", str(path), *extra)
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode == 2, (case, proc.stderr)
            assert len(lines) == 1 and "Traceback" not in proc.stderr, (case, proc.stderr)
            assert expected in lines[0], (case, lines)


@pytest.mark.parametrize("args,expected", [
    (["-f", "nope"], "unknown format"),
    (["-o", "/no/such/dir/x.html"], "does not exist"),
    (["--limit", "-1"], "--limit must not be negative"),
    (["--min-percent", "101"], "--min-percent must be between 0 and 100"),
])
def test_report_bad_options(saved, args, expected):
    proc = run_truestack("report", str(saved), *args)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert expected in proc.stderr
