"""`truestack record` end to end, every output format in both modes, in real subprocesses."""
# Target programs spin for CPU time, not wall time: on a busy shared machine a
# wall-clock spin can go by with (almost) no CPU and so no samples.
from __future__ import annotations

import gzip
import json
import pstats
import re
from xml.etree import ElementTree

import pytest
from conftest import run_truestack

from truestack.model import load

HOT = "hot_function_xyz"

SCRIPT = f'''
import sys, time

def {HOT}(seconds):
    total = 0
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        total += sum(range(300))
    return total

def main():
    {HOT}(0.5)
    if sys.argv[1:] == ["wall"]:
        time.sleep(0.2)

main()
'''

FORMATS = ["flamegraph", "svg", "firefox", "speedscope", "pprof", "collapsed", "pstats", "table", "tree", "truestack"]
EXT = {"flamegraph": "html", "svg": "svg", "firefox": "firefox.json", "speedscope": "speedscope.json",
       "pprof": "pb.gz", "collapsed": "collapsed", "pstats": "pstats", "table": "txt", "tree": "tree.txt",
       "truestack": "tsp"}


def check_output(fmt: str, path) -> None:
    data = path.read_bytes()
    assert data, f"{fmt}: empty output"
    if fmt == "flamegraph":
        text = data.decode()
        assert "<html" in text.lower() and HOT in text
        assert not re.search(r"<script[^>]+src=[\"']https?:", text), "flame graph must be self-contained"
    elif fmt == "svg":
        root = ElementTree.fromstring(data)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        titles = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}title")]
        assert any(t.startswith(HOT) for t in titles) and root.find(".//{http://www.w3.org/2000/svg}script") is not None
        assert b"https://" not in data and b"href" not in data, "the SVG must be self-contained"
    elif fmt == "firefox":
        doc = json.loads(data)
        assert "meta" in doc and doc["threads"]
        assert HOT in data.decode()
    elif fmt == "speedscope":
        doc = json.loads(data)
        assert "speedscope" in doc["$schema"]
        assert HOT in {f["name"] for f in doc["shared"]["frames"]}
    elif fmt == "pprof":
        assert data[:2] == b"\x1f\x8b"
        assert HOT.encode() in gzip.decompress(data)
    elif fmt == "collapsed":
        lines = data.decode().splitlines()
        assert lines and all(re.fullmatch(r".+ \d+", line) for line in lines)
        assert any(HOT in line for line in lines)
    elif fmt == "pstats":
        stats = pstats.Stats(str(path))
        assert any(func[2] == HOT for func in stats.stats)
    elif fmt == "table":
        text = data.decode()
        assert HOT in text and "%" in text
    elif fmt == "tree":
        text = data.decode()
        assert "\x1b[" not in text  # a file: no colour
        assert re.search(rf"^[│├└─ ]*\d+\.\d%  self \d+\.\d%  \d+\.\d+ s  {HOT}  work\.py:\d+", text, re.M), text
    elif fmt == "truestack":
        profile = load(path)
        assert profile.sample_count > 0
        assert HOT in {profile.func_name(f.func) for f in profile.frames}
    else:  # pragma: no cover
        raise AssertionError(fmt)


@pytest.mark.parametrize("mode", ["cpu", "wall"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_both_modes(tmp_path, tmp_script, fmt, mode):
    script = tmp_script("work.py", SCRIPT)
    out = tmp_path / f"out.{EXT[fmt]}"
    # -o alone: the format comes from the extension
    # Wall mode keeps idle samples here: "idle" is judged by CPU share, and a
    # busy test machine can starve the hot loop below that.
    idle = ["--include-idle"] if mode == "wall" else []
    proc = run_truestack("record", "--engine", "safepoint", "--mode", mode, "--rate", "200", *idle,
                         "-o", str(out), str(script), mode, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    check_output(fmt, out)
    assert f"{mode} mode" in proc.stderr
    assert f"output: {out} ({fmt})" in proc.stderr
    assert HOT in proc.stderr  # the top of the method table


@pytest.mark.parametrize("fmt", ["collapsed", "pstats"])
def test_format_flag_overrides_extension(tmp_path, tmp_script, fmt):
    script = tmp_script("work.py", SCRIPT)
    out = tmp_path / "out.data"
    proc = run_truestack("record", "-q", "--engine", "safepoint", "--rate", "200", "-f", fmt, "-o", str(out),
                         str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # -q
    check_output(fmt, out)


def test_default_engine_and_output_name(tmp_path, tmp_script):
    script = tmp_script("work.py", SCRIPT)
    proc = run_truestack("record", "--rate", "200", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    made = list(tmp_path.glob("truestack-work-*.html"))
    assert len(made) == 1, list(tmp_path.iterdir())
    assert re.fullmatch(r"truestack-work-\d{8}-\d{6}\.html", made[0].name)
    check_output("flamegraph", made[0])
    assert "engine" in proc.stderr and "requested 100 Hz" not in proc.stderr  # --rate 200 honoured
    assert "requested 200 Hz" in proc.stderr
