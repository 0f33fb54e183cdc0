"""The attacher's note when the attached process's stream stops without its end record: whether
the process closed the connection or said nothing after the stop."""
from __future__ import annotations

import os
import socket
from types import SimpleNamespace

import pytest

from truestack.recording import attach


def _run(conn: socket.socket, duration: float | None) -> str:
    session = attach._Session(SimpleNamespace(duration=duration), os.getpid(), conn, None, [])  # type: ignore[arg-type]
    profile = session.run(b"")
    return profile.meta.interrupted or ""


def test_a_connection_closed_before_the_end_says_so():
    ours, theirs = socket.socketpair()
    theirs.close()
    note = _run(ours, None)
    assert note.startswith(f"process {os.getpid()} did not finish its profile when asked (it closed the connection;")


def test_no_end_after_the_stop_says_how_long_it_waited(monkeypatch):
    monkeypatch.setattr(attach, "_STOP_GRACE_S", 0.2)
    ours, theirs = socket.socketpair()
    try:
        note = _run(ours, 0.01)  # --duration: the stop goes out at once, and nothing answers it
        assert theirs.recv(64) == attach.STOP
    finally:
        theirs.close()
    assert "(no end within 0.2 s of the stop;" in note, note


def test_an_error_the_injected_line_sends_on_a_second_connection_is_reported(tmp_path):
    # attached.start raised after its own connection was made: the injected line (_BOOTSTRAP) says why
    # on a fresh connection, and the attacher, which saw only the first one close, reads it there.
    path = str(tmp_path / "s")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen(2)
        with socket.socket(socket.AF_UNIX) as first, socket.socket(socket.AF_UNIX) as second:
            first.connect(path)
            conn, _ = listener.accept()
            first.close()  # closed before any hello
            second.connect(path)
            second.sendall(attach.HELLO_MAGIC + b'{"error": "cannot load truestack from /x: OSError: boom"}\n')
            with conn, pytest.raises(attach.AttachError) as said:
                attach._read_hello(conn, 4321, listener)
    assert str(said.value) == "cannot attach to process 4321: cannot load truestack from /x: OSError: boom"


def test_a_connection_closed_before_its_hello_with_nothing_else_said_says_so(tmp_path):
    path = str(tmp_path / "s")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen(1)
        with socket.socket(socket.AF_UNIX) as first:
            first.connect(path)
            conn, _ = listener.accept()
            first.close()
            with conn, pytest.raises(attach.AttachError) as said:
                attach._read_hello(conn, 4321, listener)
    assert str(said.value) == "process 4321 closed the connection before sampling started"
