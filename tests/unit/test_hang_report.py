"""The tests' hang report: a subprocess that outlives its timeout fails the test with where it hung."""
from __future__ import annotations

import os
import shutil
import sys
import time

import pytest
from hang_report import fold_repeats, run_reporting_hangs

# A parent blocked in a read, whose forked child sleeps: both must be named in the report.
HANGS = """\
import os, sys, time
child = os.fork()
if child == 0:
    time.sleep(600)
    os._exit(0)
open(sys.argv[1], "w").write(f"{os.getpid()} {child}")
print("started", file=sys.stderr, flush=True)
def parent_waits_here():
    sys.stdin.read()
parent_waits_here()
"""


def test_a_finished_process_is_returned_like_subprocess_run():
    done = run_reporting_hangs([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"],
                               timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")


@pytest.mark.skipif(shutil.which("gdb") is None, reason="gdb is not installed")
def test_a_hung_process_fails_with_the_backtraces_of_its_tree_and_is_killed(tmp_path):
    pids_file = tmp_path / "pids"
    read_end, write_end = os.pipe()  # stdin that never ends: the parent blocks reading it
    try:
        with pytest.raises(pytest.fail.Exception) as failed:
            run_reporting_hangs([sys.executable, "-c", HANGS, str(pids_file)], timeout=3, stdin=read_end)
    finally:
        os.close(read_end)
        os.close(write_end)
    report = str(failed.value)
    assert "still running after 3 s" in report
    assert "started" in report  # the stderr it wrote before it hung
    assert report.count("== pid ") == 2, report  # the parent and its forked child
    assert "Thread 1" in report and "read" in report, report  # where the parent waits
    assert "sleep" in report, report  # where the child waits
    time.sleep(0.2)
    for pid in map(int, pids_file.read_text().split()):  # both were killed
        assert not _alive(pid), pid


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_repeated_frames_are_folded_so_other_threads_stay_in_the_report():
    frame = ['  File "wl.py", line 148, in recurse', "    return recurse(depth - 1) + 0"]
    text = "\n".join(["Thread 2", "#0 futex_wait", *frame * 2000, "Thread 1", "#0 read", "x", "x"])
    folded = fold_repeats(text)
    assert folded.split("\n") == [
        "Thread 2", "#0 futex_wait", *frame, "    [the 2 line(s) above, 2000 times in all]", "Thread 1", "#0 read",
        "x", "x",
    ]  # fmt: skip
