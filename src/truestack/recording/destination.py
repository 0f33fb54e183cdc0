"""Where a profile will go, checked before the program runs: the format (from
`-f` or the output's extension), a path that can be written, the default name.

Imported by `record` before it forks the program's process, so it loads
nothing heavy: the exporters' format table only.
"""

from __future__ import annotations

import importlib.util
import os
import time

from .. import exporters
from ..errors import UsageError

DEFAULT_FORMAT = "flamegraph"


def resolve_format(fmt: str | None, output: str | None) -> str:
    """The format to write: `-f` if given, else the output's extension (`exporters.output_format`,
    the rule `save()` follows too), else (no output named) the flame graph."""
    try:
        fmt = exporters.output_format(output or "", fmt) if output or fmt else DEFAULT_FORMAT
    except exporters.UnknownFormat as exc:
        raise UsageError(str(exc)) from None
    module = f"{exporters.__name__}.{exporters.FORMATS[fmt].module}"
    if importlib.util.find_spec(module) is None:
        raise UsageError(f"format {fmt!r} is not available in this installation of truestack")
    return fmt


def check_format_dependencies(fmt: str) -> None:
    """Load what writing `fmt` needs now: an optional package found missing after the run would cost the run."""
    if fmt == "pprof":
        from ..exporters.pprof import PprofUnavailable, message_classes

        try:
            message_classes()
        except PprofUnavailable as exc:
            raise UsageError(str(exc)) from None


def check_output_path(path: str) -> None:
    """Raise UsageError unless `path` can be written; leaves no trace behind."""
    full = os.path.abspath(path)
    if os.path.isdir(full):
        raise UsageError(f"cannot write {path}: it is a directory")
    if os.path.exists(full) and not os.path.isfile(full):
        try:  # a device or pipe: written in place
            with open(full, "ab"):
                pass
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror}") from None
        return
    if os.path.exists(full) and not os.access(full, os.W_OK):
        raise UsageError(f"cannot write {path}: permission denied")
    parent = os.path.dirname(full)
    if not os.path.isdir(parent):
        raise UsageError(f"cannot write {path}: directory {os.path.dirname(path) or parent} does not exist")
    probe = os.path.join(parent, f".truestack-probe-{os.getpid()}-{os.urandom(4).hex()}")
    try:  # the real test: os.access says yes on read-only mounts and to root
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


def default_output_name(stem: str, fmt: str) -> str:
    """`truestack-<stem>-<time><ext>`: a new name per run, in the current directory."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"truestack-{stem}-{stamp}{exporters.FORMATS[fmt].extensions[0]}"
