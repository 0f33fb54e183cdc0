"""The attached side's stop runs as a pending call in the main thread, at an eval-breaker check. Such
a check can come inside a finish already under way in that very thread (the process's exit): the
pending call must then return at once, not wait on the finish's lock forever (CI saw the target hang
so), and must not close the connection the finish is still writing to. An ordinary stop hands the GIL
to the thread serving the attacher until it ends (which a main thread taking the GIL back at each
release kept waiting 2-10 s): the reentered one must not wait for it."""
from __future__ import annotations

import socket
import threading

from truestack.recording import attached as attached_module
from truestack.recording.attached import AttachConfig, _Attached


class _Session:
    def __init__(self, during_stop):
        self.during_stop = during_stop
        self.profile = type("P", (), {"note_interrupted": lambda self, why: None})()

    def stop(self):
        self.during_stop()  # where the main thread's eval-breaker check runs the stop's pending call
        return "profile"


class _Server:
    def __init__(self):
        self.joined = []

    def join(self, timeout):
        self.joined.append(timeout)


class _Sink:
    def __init__(self, sock):
        self.sock, self.ended = sock, []

    def finished(self, profile):
        self.ended.append((profile, self.sock.fileno() != -1))  # the connection still open when the end goes out


def test_the_stops_pending_call_inside_a_finish_under_way_returns_at_once():
    ours, theirs = socket.socketpair()
    config = AttachConfig("unused", "cpu", 100.0, "auto", 64, False)
    attached = _Attached(config, ours)
    reentered, server = [], _Server()
    attached.session = _Session(lambda: reentered.append(attached_module._end_in_main_thread(attached, server)))
    attached._sink = sink = _Sink(ours)
    finisher = threading.Thread(target=attached.finish, args=("the process exited while truestack was attached",))
    finisher.start()
    finisher.join(10)
    try:
        assert not finisher.is_alive(), "the finish waited on itself"
        assert reentered == [None]
        assert server.joined == []
        assert sink.ended == [("profile", True)]
        assert attached.finish(wait=False) is True  # done: a later stop finds nothing left to do
    finally:
        ours.close()
        theirs.close()


def test_the_stops_pending_call_waits_for_the_serving_thread_to_end():
    ours, theirs = socket.socketpair()
    attached = _Attached(AttachConfig("unused", "cpu", 100.0, "auto", 64, False), ours)
    attached.session = _Session(lambda: None)
    attached._sink = sink = _Sink(ours)
    server = _Server()
    try:
        attached_module._end_in_main_thread(attached, server)
        assert sink.ended == [("profile", True)]
        assert server.joined == [attached_module._SERVER_END_S]
        assert ours.fileno() == -1  # the stream ended before the wait
    finally:
        ours.close()
        theirs.close()
