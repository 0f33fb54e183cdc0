"""The recorder writes the profile as complete when the program's stream ended,
even if the last bytes of that stream are read only after the program's
process is seen to have exited (CI: a `--duration` run under load was reported
as "exited without finishing")."""
from __future__ import annotations

import io
import os
import subprocess

from profile_factory import make_profile

from truestack.model.stream import ProfileStreamWriter
from truestack.recording.supervisor import _Supervisor


def _stream_bytes() -> bytes:
    buf = io.BytesIO()
    writer = ProfileStreamWriter(buf, make_profile(interrupted=None))
    writer.flush(end=True)
    return buf.getvalue()


class _ExitsAfterLastWrite:
    """A child whose final bytes reach the pipe just as it exits."""

    def __init__(self, pid: int, write_fd: int, tail: bytes) -> None:
        self.pid, self._write_fd, self._tail = pid, write_fd, tail

    def poll(self) -> int | None:
        if self._tail:
            os.write(self._write_fd, self._tail)
            self._tail = b""
        return 124

    def kill(self) -> None:
        pass


def test_a_stream_that_ends_after_the_exit_is_seen_is_written_as_complete(monkeypatch):
    data = _stream_bytes()
    head, tail = data[: len(data) // 2], data[len(data) // 2 :]
    read_fd, write_fd = os.pipe()
    sleeper = subprocess.Popen(["sleep", "30"])  # a live pid for the supervisor's pidfd
    try:
        os.write(write_fd, head)
        child = _ExitsAfterLastWrite(sleeper.pid, write_fd, tail)
        supervisor = _Supervisor(plan=None, child=child, read_fd=read_fd, watched=[], live=None)  # type: ignore[arg-type]
        written = []

        def write() -> None:  # what _write keeps, without the output files
            supervisor.written = True
            written.append(supervisor.reader.profile.meta.interrupted)

        monkeypatch.setattr(supervisor, "_write", write)
        assert supervisor.run() == 124
    finally:
        sleeper.kill()
        sleeper.wait()
        os.close(read_fd)
        os.close(write_fd)
    assert supervisor.reader.ended
    assert written == [None]  # as the program sent it: no "exited without finishing" note
