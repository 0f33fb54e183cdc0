"""What `truestack record` loads before and after the program: its fixed cost is mostly imports.

`typing` alone costs ~14 ms at start and ~10 ms at the program's exit on a
2-vCPU VM, `dataclasses` pulls in `inspect`, `ast` and `dis`, `pkgutil` pulls
in `typing`, `importlib.resources` pulls in `pathlib` and `urllib`: none of
them may come back on the path of `record`'s default outputs. The check
reads `-X importtime`, which both processes (the recorder and the program's)
write to the same stderr.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import truestack_env

HEAVY = ("typing", "dataclasses", "inspect", "pkgutil", "importlib.resources", "pathlib")
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|(\s*)(\S+)$")


def run_in(cwd, *args: str) -> subprocess.CompletedProcess[str]:
    """This interpreter with `args`, in `cwd`, its output captured."""
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=truestack_env(), capture_output=True, text=True, timeout=120
    )


def imported_modules(stderr: str) -> set[str]:
    return {m.group(2) for line in stderr.splitlines() if (m := IMPORT_LINE.match(line))}


@pytest.mark.parametrize("output", ["p.html", "p.tsp", None], ids=["html", "tsp", "default"])
@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_record_of_an_empty_script_loads_no_heavy_module(tmp_path, output, mode):
    (tmp_path / "empty.py").write_text("")
    out_args = ["-o", str(tmp_path / output)] if output else []
    proc = run_in(tmp_path, "-X", "importtime", "-m", "truestack", "record", "--mode", mode, *out_args, "empty.py")
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = imported_modules(proc.stderr)
    assert "truestack.recording.child" in loaded and "truestack.recording.supervisor" in loaded  # both processes seen
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    if output is None:
        assert list(tmp_path.glob("truestack-empty-*.html"))


def test_the_program_imports_typing_as_usual(tmp_path):
    """Left out of truestack's own path, `typing` is the program's to import, with its real classes."""
    (tmp_path / "prog.py").write_text(
        "import typing\n"
        "class Row(typing.NamedTuple):\n"
        "    a: int\n"
        "print(Row.__annotations__, typing.NamedTuple.__module__, Row(1)._asdict())\n"
    )
    proc = run_in(tmp_path, "-m", "truestack", "record", "-o", str(tmp_path / "p.tsp"), "prog.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "{'a': <class 'int'>} typing {'a': 1}"


# Runs `truestack record` in this interpreter with a spy on the timer warm-up, and reports at the
# fork (the recorder's, before it) which threads called it and which threads were alive.
_SPY = """
import os, sys, threading, time
from truestack import _native
calls = []
real = _native.warm_cpu_timers
def spy():
    calls.append(threading.current_thread().name)
    time.sleep(0.3)  # a slow kernel: the fork must still wait for it
    real()
_native.warm_cpu_timers = spy
os.register_at_fork(before=lambda: print("AT-FORK", calls, [t.name for t in threading.enumerate()], file=sys.stderr))
from truestack.cli.main import main
sys.argv = ["truestack", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_cpu_mode_warms_the_kernels_perf_set_up_in_a_helper_thread_done_before_the_fork(tmp_path, mode):
    # The first perf event of a perf-idle system costs 6-12 ms of kernel set-up: the recorder pays
    # it in a helper thread while it imports, and joins it before the fork (no thread at a fork).
    (tmp_path / "empty.py").write_text("")
    (tmp_path / "spy.py").write_text(_SPY)
    proc = run_in(tmp_path, "spy.py", "record", "-q", "--mode", mode, "-o", "p.tsp", "empty.py")
    assert proc.returncode == 0, proc.stderr[-2000:]
    at_fork = [line for line in proc.stderr.splitlines() if line.startswith("AT-FORK")]
    assert len(at_fork) == 1, proc.stderr[-2000:]
    expected = "['truestack-warm-timers']" if mode == "cpu" else "[]"
    assert at_fork[0] == f"AT-FORK {expected} ['MainThread']"


def test_the_warm_up_leaves_no_file_descriptor_open():
    from truestack import _native

    before = sorted(os.listdir("/proc/self/fd"))
    _native.warm_cpu_timers()
    assert sorted(os.listdir("/proc/self/fd")) == before
