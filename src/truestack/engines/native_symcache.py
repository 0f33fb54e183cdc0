"""--native: what was read of an ELF file's symbols, kept across runs.

Importing pyelftools (~70 ms) and decoding libpython's symbol table (~30 ms)
happen at the first drain of every `--native` run, with the GIL held: on a
2-second program that is 5 % of its time. The decoded tables of a file are
kept in the user's cache directory (`$TRUESTACK_CACHE_DIR`, else
`$XDG_CACHE_HOME/truestack`, else `~/.cache/truestack`; an empty
`TRUESTACK_CACHE_DIR` turns the cache off), one file per ELF file, named and
checked by the file's device, inode, size and modification time: a rebuilt or
replaced library is read again. An image mapped from no file (the vDSO) is
named and checked by its size and checksum instead. A cache file that cannot be read or does not
decode whole is passed over, and the ELF file is read as before.

The tables are columns of integers or of names, stored as raw arrays after a
small JSON header rather than as JSON: decoding libpython's and libc's as JSON
and checking every element's type took ~10 ms of that first drain, these take
well under one.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import zlib
from array import array

from ..atomic_file import write_atomic

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

    Column = int | list[int] | list[str]

_FORMAT = 2  # bump when what is stored changes meaning
_MAGIC = b"truestack-symbols\n"
_INT = "q"  # array typecode of an integer column: signed 64-bit, this machine's byte order
_WORD = 4  # bytes of the checksum (CRC-32 of all that follows it) and of the header's length, little-endian


def cache_dir() -> str | None:
    """Where tables are kept; None when the cache is turned off."""
    configured = os.environ.get("TRUESTACK_CACHE_DIR")
    if configured is not None:
        return configured or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "truestack")


def _identity(path: str) -> list[Any] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [_FORMAT, sys.byteorder, path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _entry_path(directory: str, identity: list[Any]) -> str:
    _, _, path, dev, ino, size, mtime = identity
    return os.path.join(directory, "symbols", f"{os.path.basename(path)}-{dev:x}-{ino:x}-{size:x}-{mtime:x}.bin")


def image_identity(name: str, image: bytes) -> list[Any]:
    """The identity of an ELF image mapped from no file (the vDSO): its size and checksum."""
    return [_FORMAT, sys.byteorder, name, 0, zlib.crc32(image), len(image), 0]


def load(path: str, identity: list[Any] | None = None) -> dict[str, Column]:
    """The columns stored for this exact file (by identity: its stat, or the one given), else {}."""
    directory, identity = cache_dir(), identity or _identity(path)
    if directory is None or identity is None:
        return {}
    try:
        with open(_entry_path(directory, identity), "rb") as f:
            data = f.read()
    except OSError:
        return {}
    return _decode(data, identity) or {}


def store(path: str, identity: list[Any] | None = None, **columns: Column) -> None:
    """Keep these columns for this file (or image, by `identity`), beside what was kept for it before."""
    directory, identity = cache_dir(), identity or _identity(path)
    if directory is None or identity is None:
        return
    data = _encode(identity, {**load(path, identity), **columns})
    if data is None:
        return
    target = _entry_path(directory, identity)
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        write_atomic(target, data)
    except OSError:
        return  # a read-only or full cache: the next run reads the ELF file again
    with contextlib.suppress(OSError):  # the same file's entry in the JSON format of before
        os.unlink(target.removesuffix(".bin") + ".json")


def _encode(identity: list[Any], columns: dict[str, Any]) -> bytes | None:
    """magic, checksum, header length, JSON header (identity; per column: name, kind, count, and
    the value of a single integer or the byte length of an array), then the arrays in that
    order. None for a column this format cannot hold."""
    described, payloads = [], []
    for name, column in columns.items():
        if isinstance(column, int):
            described.append([name, "int", 1, column])
        elif all(isinstance(x, str) for x in column):
            text = "\0".join(column).encode()
            if text.count(b"\0") != max(len(column) - 1, 0):
                return None  # a name holding the separator: not kept
            described.append([name, "str", len(column), len(text)])
            payloads.append(text)
        else:
            try:
                ints = array(_INT, column).tobytes()
            except (TypeError, OverflowError):
                return None
            described.append([name, "int[]", len(column), len(ints)])
            payloads.append(ints)
    header = json.dumps({"identity": identity, "columns": described}).encode()
    body = b"".join([len(header).to_bytes(_WORD, "little"), header, *payloads])
    return b"".join([_MAGIC, zlib.crc32(body).to_bytes(_WORD, "little"), body])


def _decode(data: bytes, identity: list[Any]) -> dict[str, Column] | None:
    """The columns of an entry written by _encode for this identity; None if it is anything else
    (another file's, another format's, cut short, damaged)."""
    body = len(_MAGIC) + _WORD
    if not data.startswith(_MAGIC) or data[len(_MAGIC) : body] != zlib.crc32(data[body:]).to_bytes(_WORD, "little"):
        return None  # another format's, or cut short or damaged since it was written
    start = body + _WORD
    end = start + int.from_bytes(data[body:start], "little")
    try:
        header = json.loads(data[start:end])
        if header["identity"] != identity:
            return None
        out: dict[str, Column] = {}
        at = end
        for name, kind, count, size in header["columns"]:
            if kind == "int" and type(size) is int:
                out[name] = size
                continue
            chunk = data[at : at + size]
            at += size
            if len(chunk) != size:
                return None
            if kind == "str":
                names = chunk.decode().split("\0") if count else []
                if len(names) != count:
                    return None
                out[name] = names
            elif kind == "int[]" and size == count * array(_INT).itemsize:
                out[name] = array(_INT, chunk).tolist()
            else:
                return None
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        return None
    return out if at == len(data) else None
