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
    fd, tmp = _new_temp_file(os.path.dirname(full))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, _new_file_mode(full))  # mkstemp makes 0600; give what open() would
        os.replace(tmp, full)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _new_temp_file(directory: str) -> tuple[int, str]:
    """A new file only this process can have opened (what tempfile.mkstemp does: O_EXCL, mode 0600),
    without importing tempfile (shutil, random, bz2, lzma): `record` writes its output on this path."""
    for _attempt in range(100):
        path = os.path.join(directory, f".truestack-{os.getpid()}-{os.urandom(6).hex()}.tmp")
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused temporary file name in {directory}")


def _new_file_mode(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o7777  # replacing a file keeps its mode
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
