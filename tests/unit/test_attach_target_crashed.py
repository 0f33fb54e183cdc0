"""A target that dies during the injection is a zombie until its parent reaps it, and /proc still
shows it: the attacher waited the whole 10 s for its connection and then blamed the GIL (CI saw a
target crash so: "did not answer within 10 s of the injection")."""
from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from truestack.recording import attach


def test_a_zombie_target_ends_the_wait_for_its_connection_at_once(tmp_path):
    dead = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while not Path(f"/proc/{dead.pid}/stat").read_text().rsplit(")", 1)[1].startswith(" Z"):
        assert time.monotonic() < deadline, "the child never ended"
        time.sleep(0.01)
    try:
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(tmp_path / "s"))
            listener.listen(1)
            started = time.monotonic()
            with pytest.raises(attach.AttachError, match=f"^process {dead.pid} ended before sampling started$"):
                attach._accept(listener, dead.pid)
            assert time.monotonic() - started < attach._CONNECT_TIMEOUT_S / 2
    finally:
        dead.wait()
