"""The recorder's side of --subprocesses without real children: the wire format, the private
directory, and connections that stream a profile, send junk, or are cut short."""
from __future__ import annotations

import os
import select
import socket

import pytest
from profile_factory import make_profile

from truestack.model.processes import ProcessInfo
from truestack.model.stream import ProfileStreamWriter
from truestack.recording.tree import ProcessTree
from truestack.recording.wire import FollowConfig, decode_hello, encode_hello


class SocketFile:
    def __init__(self, sock):
        self.sock = sock

    def write(self, data):
        self.sock.sendall(data)
        return len(data)

    def flush(self):
        pass


def test_config_and_hello_round_trip_and_junk_is_refused():
    config = FollowConfig("/tmp/x/recorder.sock", "/tmp/x", "wall", 250.0, "auto", 64)
    assert FollowConfig.decode(config.encode()) == config
    with pytest.raises(ValueError):
        FollowConfig.decode("{not json")
    hello = encode_hello(12, 3, ["python", "-c", "pass"], "exec", 99)
    buffer = bytearray(hello[:10])
    assert decode_hello(buffer) is None  # not whole yet
    buffer = bytearray(hello + b"REST")
    assert decode_hello(buffer) == {"pid": 12, "parent": 3, "command": ["python", "-c", "pass"], "how": "exec",
                                    "start_cpu_ns": 99}
    assert buffer == b"REST"
    with pytest.raises(ValueError):
        decode_hello(bytearray(b"GET / HTTP/1.1\r\n"))


def pump(tree: ProcessTree, until) -> None:
    for _ in range(200):
        if until():
            return
        ready, _, _ = select.select(tree.fds(), [], [], 0.05)
        tree.handle(ready)
    raise AssertionError("the tree never got there")


def test_tree_reads_streams_keeps_cut_ones_ignores_junk_and_leaves_nothing_behind():
    tree = ProcessTree("cpu", 100.0, "auto", 128)
    directory = tree.bootstrap.directory
    assert sorted(os.listdir(directory)) == ["recorder.sock", "sitecustomize.py"]
    assert oct(os.stat(directory).st_mode & 0o777) == "0o700"
    try:
        good, cut, junk = (socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(3))
        for sock in (good, cut, junk):
            sock.connect(tree.bootstrap.socket_path)
        for sock, how in ((good, "exec"), (cut, "fork")):
            sock.sendall(encode_hello(os.getpid(), 1, ["python", "child.py"], how, 5))
            writer = ProfileStreamWriter(SocketFile(sock), make_profile())
            writer.flush(end=sock is good)
        junk.sendall(b"this is not a truestack process\n" * 10)
        cut.close()  # killed before its last record
        junk.close()
        pump(tree, lambda: len(tree.connections) == 3 and sum(c.closed for c in tree.connections) == 2)
        good.close()
        tree.collect()
        program = ProcessInfo(1, ["python", "app.py"], 0, "main")
        merged = tree.merged(make_profile(), program)
    finally:
        tree.remove()
    assert not os.path.exists(directory)
    main, first, second = merged.meta.processes
    assert main.pid == 1
    assert (first.pid, first.how, first.complete, first.command) == (os.getpid(), "exec", True, ["python", "child.py"])
    assert (second.how, second.complete) == ("fork", False)
    assert merged.sample_count == 3 * make_profile().sample_count  # the junk connection added nothing
