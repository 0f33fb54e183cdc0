"""What `truestack record` loads before and after the program: its fixed cost is mostly imports.

`typing` alone costs ~14 ms at start and ~10 ms at the program's exit on a
2-vCPU VM, `dataclasses` pulls in `inspect`, `ast` and `dis`, `pkgutil` pulls
in `typing`, `importlib.resources` pulls in `pathlib` and `urllib`: none of
them may come back on the path of `record`'s default outputs. The check
reads `-X importtime`, which both processes (the recorder and the program's)
write to the same stderr.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import truestack_env

HEAVY = ("typing", "dataclasses", "inspect", "pkgutil", "importlib.resources", "pathlib")
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|(\s*)(\S+)$")


def imported_modules(stderr: str) -> set[str]:
    return {m.group(2) for line in stderr.splitlines() if (m := IMPORT_LINE.match(line))}


@pytest.mark.parametrize("output", ["p.html", "p.tsp", None], ids=["html", "tsp", "default"])
@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_record_of_an_empty_script_loads_no_heavy_module(tmp_path, output, mode):
    (tmp_path / "empty.py").write_text("")
    out_args = ["-o", str(tmp_path / output)] if output else []
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "truestack", "record", "--mode", mode, *out_args, "empty.py"],
        cwd=tmp_path,
        env=truestack_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
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
    proc = subprocess.run(
        [sys.executable, "-m", "truestack", "record", "-o", str(tmp_path / "p.tsp"), "prog.py"],
        cwd=tmp_path,
        env=truestack_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "{'a': <class 'int'>} typing {'a': 1}"
