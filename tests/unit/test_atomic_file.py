"""write_atomic: the whole file or the old one, never a half-written one, and no temp file left."""
from __future__ import annotations

import os
import stat

import pytest

from truestack.atomic_file import write_atomic


def test_new_file_gets_the_mode_open_would_give(tmp_path):
    umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "p.tsp", b"data")
    finally:
        os.umask(umask)
    assert (tmp_path / "p.tsp").read_bytes() == b"data"
    assert stat.S_IMODE((tmp_path / "p.tsp").stat().st_mode) == 0o644
    assert os.listdir(tmp_path) == ["p.tsp"]  # no temporary file left behind


def test_replacing_keeps_the_mode_and_leaves_nothing_else(tmp_path):
    target = tmp_path / "p.html"
    target.write_bytes(b"old")
    target.chmod(0o600)
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["p.html"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path, monkeypatch):
    target = tmp_path / "p.tsp"
    target.write_bytes(b"old")

    def fail(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["p.tsp"]
