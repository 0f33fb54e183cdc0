"""The streaming form of the saved profile: a profile sent as it grows.

A profiled program (the child `record` supervises, later an attached
process or a subprocess) sends what its Profile gained since the previous
flush; the recorder applies those deltas to its own Profile, which then
holds the same tables with the same indexes. Whatever happens to the
sender — a crash, `os._exit`, SIGKILL — the recorder keeps every delta that
arrived whole, so at most one drain interval is lost.

Stream layout: the magic `TSSTRM\\r\\n`, a uint16 version, then records,
each a uint32 payload length followed by the payload: a uint32 header
length, a JSON header (new table rows, threads with their new sample
counts, new markers, the current meta, `end` on the last record) and the
threads' new sample columns, raw little-endian, in the header's thread
order (time_ns q, stack i, weight_ns Q, cpu_delta_ns Q, state b).
"""

from __future__ import annotations

import json
import struct
import threading

from .meta import ProfileMeta
from .profile import Marker, Profile
from .storage import column_bytes, read_column
from .tables import FrameRow, Func

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any, BinaryIO

STREAM_MAGIC = b"TSSTRM\r\n"
STREAM_VERSION = 1
_PREFIX = struct.Struct("<8sH")
_U32 = struct.Struct("<I")
_COLUMNS = (("time_ns", "q"), ("stack", "i"), ("weight_ns", "Q"), ("cpu_delta_ns", "Q"), ("state", "b"))
MAX_RECORD = 1 << 30  # a larger length is a damaged stream, not a record


class StreamError(ValueError):
    """The stream is not a truestack profile stream, or a record is damaged."""


class ProfileStreamWriter:
    """Sends what a growing Profile gained since the last flush; thread-safe.

    Write errors (the recorder is gone) make the writer go quiet instead of
    raising into the profiled program; `broken` says so.
    """

    def __init__(self, out: BinaryIO, profile: Profile) -> None:
        self._out = out
        self._profile = profile
        self._lock = threading.Lock()
        self._sent_strings = self._sent_funcs = self._sent_frames = self._sent_stacks = self._sent_markers = 0
        self._sent_samples: dict[int, int] = {}
        self.broken = False
        self.ended = False
        self._write(_PREFIX.pack(STREAM_MAGIC, STREAM_VERSION))

    def flush(self, end: bool = False, meta: bool = True) -> None:
        """Send what the profile gained; with `meta`, its metadata too (always with `end`)."""
        with self._lock:
            if self.broken or self.ended:
                return
            self._write(self._record(end, meta or end))
            self.ended = end

    def _record(self, end: bool, with_meta: bool) -> bytes:
        p = self._profile
        strings = p.strings.strings[self._sent_strings :]
        funcs = [list(row) for row in p.funcs.rows[self._sent_funcs :]]
        frames = [list(row) for row in p.frames.rows[self._sent_frames :]]
        n_stacks = len(p.stacks)
        stacks = [
            list(pair)
            for pair in zip(
                p.stacks.prefix[self._sent_stacks : n_stacks], p.stacks.frame[self._sent_stacks : n_stacks], strict=True
            )
        ]
        markers = [m.as_dict() for m in p.markers[self._sent_markers :]]
        threads: list[dict[str, Any]] = []
        columns: list[bytes] = []
        for tid, thread in list(p.threads.items()):
            start, stop = self._sent_samples.get(tid, 0), len(thread)
            if stop > start or tid not in self._sent_samples:
                threads.append({"tid": tid, "name": thread.name, "count": stop - start})
                columns.extend(column_bytes(getattr(thread, name)[start:stop]) for name, _code in _COLUMNS)
                self._sent_samples[tid] = stop
        self._sent_strings += len(strings)
        self._sent_funcs += len(funcs)
        self._sent_frames += len(frames)
        self._sent_stacks = n_stacks
        self._sent_markers += len(markers)
        fields: dict[str, Any] = {
            "strings": strings,
            "funcs": funcs,
            "frames": frames,
            "stacks": stacks,
            "threads": threads,
            "markers": markers,
            "end": end,
        }
        if with_meta:
            fields["meta"] = p.meta.to_dict()
        header = json.dumps(fields, separators=(",", ":"), default=str).encode()
        payload = b"".join([_U32.pack(len(header)), header, *columns])
        return _U32.pack(len(payload)) + payload

    def _write(self, data: bytes) -> None:
        try:
            self._out.write(data)
            self._out.flush()
        except (OSError, ValueError):  # the recorder went away: keep the program running, quietly
            self.broken = True


class ProfileStreamReader:
    """Applies stream records to a Profile as bytes arrive (in any chunking)."""

    def __init__(self, profile: Profile | None = None) -> None:
        self.profile = profile if profile is not None else Profile()
        self._buffer = bytearray()
        self._started = False
        self.ended = False  # the sender's last record arrived: nothing was lost
        self.records = 0

    def feed(self, data: bytes) -> None:
        """Apply every complete record in `data` (plus what was buffered); StreamError if damaged."""
        self._buffer += data
        if not self._started:
            if len(self._buffer) < _PREFIX.size:
                return
            magic, version = _PREFIX.unpack_from(self._buffer)
            if magic != STREAM_MAGIC:
                raise StreamError("not a truestack profile stream")
            if version > STREAM_VERSION:
                raise StreamError(f"profile stream version {version} is newer than this truestack reads")
            del self._buffer[: _PREFIX.size]
            self._started = True
        while len(self._buffer) >= _U32.size:
            (size,) = _U32.unpack_from(self._buffer)
            if size > MAX_RECORD:
                raise StreamError(f"damaged profile stream (record of {size} bytes)")
            if len(self._buffer) < _U32.size + size:
                return
            payload = bytes(self._buffer[_U32.size : _U32.size + size])
            del self._buffer[: _U32.size + size]
            try:
                self._apply(payload)
            except (ValueError, KeyError, TypeError, IndexError, struct.error) as exc:
                raise StreamError(f"damaged profile stream record ({exc})") from None
            self.records += 1

    @property
    def pending_bytes(self) -> int:
        """Bytes of a record that had not arrived whole (lost if the sender died)."""
        return len(self._buffer)

    def _apply(self, payload: bytes) -> None:
        (header_len,) = _U32.unpack_from(payload)
        header: dict[str, Any] = json.loads(payload[4 : 4 + header_len])
        p = self.profile
        for s in header["strings"]:
            if p.strings.intern(s) != len(p.strings) - 1:
                raise ValueError("string sent twice")
        for row in header["funcs"]:
            p.funcs.intern(Func(*row))
        for row in header["frames"]:
            p.frames.intern(FrameRow(*row))
        for prefix, frame in header["stacks"]:
            p.stacks.intern(prefix, frame)
        offset = 4 + header_len
        for entry in header["threads"]:
            thread = p.thread(entry["tid"], entry["name"])
            count = entry["count"]
            for name, code in _COLUMNS:
                col, offset = read_column(code, count, payload, offset)
                getattr(thread, name).extend(col)
        p.markers.extend(Marker(**m) for m in header["markers"])
        if "meta" in header:  # not in every record: the sender sends it when it chooses
            p.meta = ProfileMeta.from_dict(header["meta"])
        if header.get("end"):
            self.ended = True
