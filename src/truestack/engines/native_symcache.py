"""--native: what was read of an ELF file's symbols, kept across runs.

Importing pyelftools (~70 ms) and decoding libpython's symbol table (~30 ms)
happen at the first drain of every `--native` run, with the GIL held: on a
2-second program that is 5 % of its time. The decoded tables of a file are
kept in the user's cache directory (`$TRUESTACK_CACHE_DIR`, else
`$XDG_CACHE_HOME/truestack`, else `~/.cache/truestack`; an empty
`TRUESTACK_CACHE_DIR` turns the cache off), one JSON file per ELF file,
named and checked by the file's device, inode, size and modification time:
a rebuilt or replaced library is read again. A cache file that cannot be
read, parsed or written is passed over, and the ELF file is read as before.
"""

from __future__ import annotations

import json
import os

from ..atomic_file import write_atomic

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

_FORMAT = 1  # bump when what is stored changes meaning


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
    return [_FORMAT, path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _entry_path(directory: str, identity: list[Any]) -> str:
    _, path, dev, ino, size, mtime = identity
    return os.path.join(directory, "symbols", f"{os.path.basename(path)}-{dev:x}-{ino:x}-{size:x}-{mtime:x}.json")


def load(path: str) -> dict[str, Any]:
    """What was stored for this exact file (by identity), else {}."""
    directory, identity = cache_dir(), _identity(path)
    if directory is None or identity is None:
        return {}
    try:
        with open(_entry_path(directory, identity), "rb") as f:
            entry = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    if not isinstance(entry, dict) or entry.get("identity") != identity:
        return {}
    tables = entry.get("tables")
    return tables if isinstance(tables, dict) else {}


def store(path: str, **tables: Any) -> None:
    """Keep these tables for this file, beside what was kept for it before."""
    directory, identity = cache_dir(), _identity(path)
    if directory is None or identity is None:
        return
    merged = {**load(path), **tables}
    target = _entry_path(directory, identity)
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        write_atomic(target, json.dumps({"identity": identity, "tables": merged}).encode())
    except OSError:
        pass  # a read-only or full cache: the next run reads the ELF file again
