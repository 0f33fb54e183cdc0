"""StreamSink: a session's profile streamed as it grows (`model/stream.py`), and once more at the end.

The program's process under `record` streams to the recorder over a pipe
(`child.py`); with `--subprocesses`, every followed process streams over its
own connection to the recorder's socket (`follow.py`).
"""

from __future__ import annotations

import time

from ..light_typing import Protocol
from ..model import Profile
from ..model.stream import ProfileStreamWriter
from ..session import ProfileSession, StackFilter

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket  # at run time only where a socket is used: its import costs every `record` ~5 ms
    from typing import BinaryIO

    from .children import ChildWatch

STATS_INTERVAL_S = 0.25


class SamplingConfig(Protocol):
    """How a process that streams to a recorder over a socket samples (`wire.FollowConfig`, `attached.AttachConfig`)."""

    mode: str
    rate_hz: float
    engine: str
    max_depth: int
    async_tasks: bool
    native: str


def socket_session(
    config: SamplingConfig,
    sock: socket.socket,
    argv: list[str],
    stack_filter: StackFilter | None = None,
    drain_interval: float | None = None,
) -> tuple[ProfileSession, StreamSink]:
    """A session sampling as `config` says, for the command line `argv`, and its sink streaming over `sock`
    after every drain (`drain_interval`: None for the sampler's default, by the rate)."""
    session = ProfileSession(
        mode=config.mode,
        rate=config.rate_hz,
        engine=config.engine,
        max_depth=config.max_depth,
        command=argv[1:],
        stack_filter=stack_filter,
        async_tasks=config.async_tasks,
        native=config.native,
        drain_interval=drain_interval,
    )
    return session, StreamSink(SocketOut(sock))  # type: ignore[arg-type]  # write/flush is all it uses


class SocketOut:
    """The binary file a stream writer writes to over a connected socket: all of each record, or an
    OSError. MSG_NOSIGNAL: a program that set SIGPIPE back to SIG_DFL must not die because the
    recorder went away."""

    def __init__(self, sock: socket.socket) -> None:
        import socket

        self._sock = sock
        self._flags = socket.MSG_NOSIGNAL

    def write(self, data: bytes) -> int:
        self._sock.sendall(data, self._flags)
        return len(data)

    def flush(self) -> None:
        pass


class StreamSink:
    """Streams the session's profile to the recorder as it grows, and once more at the end."""

    def __init__(self, out: BinaryIO, children: ChildWatch | None = None) -> None:
        self._out = out
        self._writer: ProfileStreamWriter | None = None
        self._children = children
        self.forgotten = False

    def started(self, session: ProfileSession) -> None:
        writer = ProfileStreamWriter(self._out, session.profile)
        writer.flush()  # the recorder now knows sampling began, and with what
        self._writer = writer
        stats_sent = 0.0  # the first drain sends them

        def flush() -> None:
            # Samples go out after every drain; the sampler's stats and the metadata with the
            # first and then at most once per STATS_INTERVAL_S (building them every 50 ms cost
            # as much as the samples at 1 kHz).
            # A profile cut short by a crash still says what the sampler did, up to then.
            nonlocal stats_sent
            now = time.monotonic()
            with_meta = now - stats_sent >= STATS_INTERVAL_S
            if with_meta:
                session.record_stats()
                stats_sent = now
            writer.flush(meta=with_meta)

        session.after_batch = flush

    def forget(self) -> None:
        """In a forked child: this stream is the parent's; never write to it (its lock may
        have been held by a parent thread at the fork, so it is not even touched)."""
        self.forgotten = True
        self._writer = None

    def finished(self, profile: Profile) -> bool:
        if self.forgotten:
            return True  # the parent's stream: nothing of this process belongs in it
        if self._writer is None:
            return False
        note = self._children.note() if self._children else None
        stats = profile.meta.sampler_stats
        if note and stats is not None and note not in stats.notes:
            stats.notes.append(note)
        self._writer.flush(end=True)
        return not self._writer.broken
