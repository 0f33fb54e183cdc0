"""The attacher's note when the attached process's stream stops without its end record: whether
the process closed the connection or said nothing after the stop."""
from __future__ import annotations

import os
import socket
from types import SimpleNamespace

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
