"""Saved profiles: truestack's own compact, versioned, compressed file format.

Layout (documented in docs/file-format.md):

    8 bytes   magic b"TSPROF\\r\\n"
    2 bytes   format version, uint16 little-endian
    2 bytes   flags, uint16 little-endian (0; reserved)
    rest      one zlib stream holding:
                4 bytes   length N of the header, uint32 little-endian
                N bytes   header: UTF-8 JSON (meta, tables, markers, thread list,
                          and the list of binary columns that follow)
                columns   raw little-endian arrays, in the order the header lists

zlib's own checksum catches corruption; a stream that ends early is reported
as truncated.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import zlib
from array import array

from ..atomic_file import write_atomic
from ..samples import FRAME_KINDS
from .meta import ProfileMeta
from .profile import STATES, Marker, Profile, ThreadSamples
from .tables import FrameRow, Func

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any, BinaryIO

MAGIC = b"TSPROF\r\n"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<8sHH")


class ProfileFormatError(ValueError):
    """The file is not a readable truestack profile; the message says why."""


def column_bytes(col: array[Any]) -> bytes:
    """A column as the saved forms hold it: raw little-endian items."""
    if sys.byteorder != "little":
        col = array(col.typecode, col)
        col.byteswap()
    return col.tobytes()


_NUMBER_TYPECODES = frozenset("bBhHiIlLqQfd")  # a damaged file's 'u' would make a str array (deprecated)


def read_column(typecode: str, count: int, buf: bytes, offset: int) -> tuple[array[Any], int]:
    """`count` little-endian items of `typecode` at `offset`, and the offset after them; ValueError if short
    or not a number type."""
    if typecode not in _NUMBER_TYPECODES:
        raise ValueError(f"column of unknown type {typecode!r}")
    col: array[Any] = array(typecode)
    size = col.itemsize * count
    if count < 0 or offset + size > len(buf):
        raise ValueError("column data ends early")
    col.frombytes(buf[offset : offset + size])
    if sys.byteorder != "little":
        col.byteswap()
    return col, offset + size


def _columns(profile: Profile) -> list[tuple[str, array[Any]]]:
    cols: list[tuple[str, array[Any]]] = [
        ("stack_prefix", profile.stacks.prefix),
        ("stack_frame", profile.stacks.frame),
    ]
    for tid, thread in profile.threads.items():
        for name in ("time_ns", "stack", "weight_ns", "cpu_delta_ns", "state"):
            cols.append((f"{tid}.{name}", getattr(thread, name)))
    return cols


def dumps(profile: Profile) -> bytes:
    columns = _columns(profile)
    header = {
        "meta": profile.meta.to_dict(),
        "strings": profile.strings.strings,
        "funcs": [list(f) for f in profile.funcs],
        "frames": [list(f) for f in profile.frames],
        "threads": [{"tid": t.tid, "name": t.name} for t in profile.threads.values()],
        "markers": [m.as_dict() for m in profile.markers],
        "columns": [[name, col.typecode, len(col)] for name, col in columns],
    }
    header_bytes = json.dumps(header, separators=(",", ":"), default=str).encode()
    comp = zlib.compressobj(6)
    parts = [
        _PREFIX.pack(MAGIC, FORMAT_VERSION, 0),
        comp.compress(struct.pack("<I", len(header_bytes))),
        comp.compress(header_bytes),
    ]
    for _name, col in columns:
        parts.append(comp.compress(column_bytes(col)))
    parts.append(comp.flush())
    return b"".join(parts)


def save(profile: Profile, path: str | os.PathLike[str]) -> None:
    """Write atomically: a crash or full disk never leaves a half-written file under `path`."""
    write_atomic(path, dumps(profile))


def is_profile_file(path: str | os.PathLike[str]) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def load(path: str | os.PathLike[str]) -> Profile:
    with open(path, "rb") as fh:
        return read(fh, str(path))


def read(fh: BinaryIO, name: str = "<profile>") -> Profile:
    prefix = fh.read(_PREFIX.size)
    if len(prefix) < _PREFIX.size or prefix[: len(MAGIC)] != MAGIC:
        raise ProfileFormatError(f"{name}: not a truestack profile")
    _magic, version, _flags = _PREFIX.unpack(prefix)
    if version > FORMAT_VERSION:
        raise ProfileFormatError(
            f"{name}: profile format version {version} is newer than this truestack reads "
            f"(up to {FORMAT_VERSION}); upgrade truestack"
        )
    try:
        payload = zlib.decompressobj()
        body = payload.decompress(fh.read())
    except zlib.error as exc:
        raise ProfileFormatError(f"{name}: corrupt profile ({exc})") from None
    if not payload.eof:
        raise ProfileFormatError(f"{name}: truncated profile (the file ends early)")
    try:
        return _decode(body)
    except (
        ValueError,
        KeyError,
        TypeError,
        IndexError,
        AttributeError,
        OverflowError,
        RecursionError,
        struct.error,
    ) as exc:
        raise ProfileFormatError(f"{name}: corrupt profile ({exc})") from None


def _decode(body: bytes) -> Profile:
    (header_len,) = struct.unpack_from("<I", body, 0)
    header: dict[str, Any] = json.loads(body[4 : 4 + header_len])
    offset = 4 + header_len
    columns: dict[str, array[Any]] = {}
    for name, typecode, count in header["columns"]:
        columns[name], offset = read_column(typecode, count, body, offset)
    profile = Profile(ProfileMeta.from_dict(header["meta"]))
    for s in header["strings"]:
        profile.strings.intern(s)
    for row in header["funcs"]:
        profile.funcs.intern(Func(*row))
    for row in header["frames"]:
        profile.frames.intern(FrameRow(*row))
    for prefix, frame in zip(columns["stack_prefix"], columns["stack_frame"], strict=True):
        profile.stacks.intern(prefix, frame)
    for entry in header["threads"]:
        tid = entry["tid"]
        thread = ThreadSamples(
            tid,
            entry["name"],
            *(columns[f"{tid}.{n}"] for n in ("time_ns", "stack", "weight_ns", "cpu_delta_ns", "state")),
        )
        profile.threads[tid] = thread
    profile.markers = [Marker(**m) for m in header["markers"]]
    _check_references(profile)
    return profile


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_index(value: object, size: int) -> bool:
    return _is_int(value) and 0 <= value < size  # type: ignore[operator]


_COLUMN_TYPES = {"time_ns": "q", "stack": "i", "weight_ns": "QI", "cpu_delta_ns": "QI", "state": "b"}


def _check_references(profile: Profile) -> None:
    """Every index points inside its table: a damaged file fails here, not later in an exporter."""
    nstrings, nfuncs, nframes, nstacks = (
        len(profile.strings),
        len(profile.funcs),
        len(profile.frames),
        len(profile.stacks),
    )
    if not all(isinstance(s, str) for s in profile.strings.strings):
        raise ValueError("string table holds a non-string")
    for func in profile.funcs:
        if not (_is_index(func.name, nstrings) and _is_index(func.file, nstrings) and _is_int(func.first_line)):
            raise ValueError("function refers outside the string table")
    for row in profile.frames:
        if not (_is_index(row.func, nfuncs) and _is_int(row.line) and _is_index(row.kind, len(FRAME_KINDS))):
            raise ValueError("frame refers outside the function table or has an unknown kind")
    for i, (prefix, frame) in enumerate(zip(profile.stacks.prefix, profile.stacks.frame, strict=True)):
        if not (-1 <= prefix < i and 0 <= frame < nframes):
            raise ValueError("stack table is not a prefix tree over the frame table")
    for m in profile.markers:
        if not (
            isinstance(m.name, str)
            and _is_int(m.start_ns)
            and (m.end_ns is None or _is_int(m.end_ns))
            and _is_int(m.thread_id)
            and isinstance(m.data, dict)
        ):
            raise ValueError("marker with fields of the wrong type")
    for thread in profile.threads.values():
        if not (_is_int(thread.tid) and isinstance(thread.name, str)):
            raise ValueError("thread with a malformed id or name")
        columns = {name: getattr(thread, name) for name in _COLUMN_TYPES}
        if len({len(c) for c in columns.values()}) != 1:
            raise ValueError(f"thread {thread.tid}: columns of different lengths")
        for name, col in columns.items():
            if col.typecode not in _COLUMN_TYPES[name]:
                raise ValueError(f"thread {thread.tid}: column {name} has type {col.typecode!r}")
        if len(thread.stack) and not (min(thread.stack) >= -1 and max(thread.stack) < nstacks):
            raise ValueError(f"thread {thread.tid}: sample refers outside the stack table")
        if len(thread.state) and not (min(thread.state) >= 0 and max(thread.state) < len(STATES)):
            raise ValueError(f"thread {thread.tid}: unknown sample state")
