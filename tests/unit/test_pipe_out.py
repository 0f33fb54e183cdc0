"""PipeOut: the program's end of the recorder's pipe never writes to, or closes, a number the
program has taken back for a file of its own; it opens the pipe again through the read end."""

from __future__ import annotations

import os

import pytest

from truestack.recording.pipe_out import PipeOut


def test_a_number_taken_back_by_the_program_is_left_alone_and_the_pipe_reopened(tmp_path):
    read_fd, write_fd = os.pipe()
    out = PipeOut(write_fd, os.getpid(), read_fd)
    out.write(b"one ")
    number = out._fd
    assert number != write_fd  # moved up, away from the numbers a program is handed first
    os.close(number)  # the program's closerange ...
    own = tmp_path / "own.txt"
    fd = os.open(own, os.O_WRONLY | os.O_CREAT)
    os.dup2(fd, number)  # ... and its own file under that number
    out.write(b"two")
    out.close()
    assert os.read(read_fd, 100) == b"one two" and out.reopened == 1
    os.write(number, b"still mine")  # not closed by PipeOut.close
    assert own.read_bytes() == b"still mine"
    os.close(number), os.close(fd), os.close(read_fd)


def test_without_the_pipe_a_write_raises_and_writes_nowhere(tmp_path):
    read_fd, write_fd = os.pipe()
    out = PipeOut(write_fd, os.getpid(), read_fd)
    os.close(out._fd)
    os.close(read_fd)  # the recorder is gone: nothing to open again
    with pytest.raises(OSError):
        out.write(b"x")
    out.close()


def test_a_record_larger_than_the_pipe_holds_goes_through_whole_while_the_reader_catches_up():
    # The write end is non-blocking (the GIL-held write must never block): what does not fit now
    # is written once the reader makes room.
    import threading

    read_fd, write_fd = os.pipe()
    out = PipeOut(write_fd, os.getpid(), read_fd)
    data = bytes(range(256)) * 4096  # 1 MiB: 16 times a pipe's default capacity
    got = bytearray()

    def reader():
        while len(got) < len(data):
            got.extend(os.read(read_fd, 1 << 16))

    thread = threading.Thread(target=reader)
    thread.start()
    assert out.write(data) == len(data)
    thread.join(timeout=30)
    assert bytes(got) == data
    out.close()
    os.close(read_fd)
