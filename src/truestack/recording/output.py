"""Writing a profile in format F to path P: checked before the program runs,
and never losing the data when the write fails.

Shared by `record`, `report` and the API's callers: format resolution from
`-f` or the extension, the writability probe, the view a format sees (idle
samples, merged lines), and export-and-write with a rescue copy.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import tempfile
import time

from .. import exporters
from ..atomic_file import write_atomic
from ..errors import UsageError
from ..model import Profile
from ..model.storage import dumps

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
    try:  # the real test: os.access says yes on read-only mounts and to root
        fd, probe = tempfile.mkstemp(prefix=".truestack-probe-", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


def default_output_name(stem: str, fmt: str) -> str:
    """`truestack-<stem>-<time><ext>`: a new name per run, in the current directory."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"truestack-{stem}-{stamp}{exporters.FORMATS[fmt].extensions[0]}"


def save_fallback(profile: Profile) -> str | None:
    """Save the whole profile as .tsp in the temp directory; None if that fails too."""
    try:
        fd, path = tempfile.mkstemp(prefix="truestack-rescued-", suffix=".tsp")
    except OSError:
        return None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(dumps(profile))
    except Exception:  # nothing more we can do; the caller reports it
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    return path


def output_view(profile: Profile, fmt: str, function_level: bool, include_idle: bool) -> Profile:
    """The profile as a format should see it: idle samples dropped (wall mode), lines merged."""
    view = profile
    if fmt != "truestack" and profile.meta.mode == "wall" and not include_idle:
        before = view.sample_count
        view = view.without_idle()
        view.meta.idle_excluded = before - view.sample_count
    if function_level and not view.meta.function_level:
        view = view.merged_lines()
    return view


def export_and_write(profile: Profile, fmt: str, path: str, options: object = None) -> str | None:
    """Export and write; on failure print what was lost and rescue a .tsp. Returns an error or None.

    `options` go to the exporter (`exporters.export`); `record` passes none, so `record -f tree` uses the defaults.
    """
    try:
        data = exporters.export(profile, fmt, options)
    except Exception as exc:  # an exporter bug must not lose the profile
        problem = f"could not export the profile as {fmt}: {type(exc).__name__}: {exc}"
    else:
        try:
            write_atomic(path, data)
            return None
        except OSError as exc:
            problem = f"could not write {path}: {exc.strerror or exc}"
    rescued = save_fallback(profile)
    if rescued:
        how = f"`truestack report {rescued} -f {fmt} -o {path}`"
        message = (
            f"truestack: error: {problem}; the {fmt} output is lost, but the whole profile "
            f"({profile.sample_count} samples) was saved to {rescued} — convert it with {how}"
        )
    else:
        message = (
            f"truestack: error: {problem}; the profile ({profile.sample_count} samples) is lost "
            f"(saving a copy to {tempfile.gettempdir()} failed too)"
        )
    sys.stderr.write(message + "\n")
    return problem
