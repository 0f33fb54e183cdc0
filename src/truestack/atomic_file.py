"""Replace a file atomically: a crash or a full disk never leaves a
half-written file under the final name."""

from __future__ import annotations

import contextlib
import os


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` via a temporary file and a rename.

    Devices and pipes (``/dev/stdout``, a FIFO) cannot be renamed over and
    are written in place.
    """
    full = os.path.abspath(path)
    if os.path.exists(full) and not os.path.isfile(full):
        with open(full, "wb") as fh:
            fh.write(data)
        return
    import tempfile  # here: its import (shutil, random, bz2, lzma) is start-up time for every caller

    fd, tmp = tempfile.mkstemp(prefix=".truestack-", suffix=".tmp", dir=os.path.dirname(full))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, _new_file_mode(full))  # mkstemp makes 0600; give what open() would
        os.replace(tmp, full)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _new_file_mode(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o7777  # replacing a file keeps its mode
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
