"""Writing a profile in format F to path P, never losing the data when the write fails.

Shared by `record`, `report` and the API's callers: the view a format sees
(idle samples, merged lines), and export-and-write with a rescue copy. What
is checked before the program runs (format, writable path) is `destination`.
"""

from __future__ import annotations

import contextlib
import os
import sys

from .. import exporters
from ..atomic_file import write_atomic
from ..model import Profile
from ..model.merge import with_process_roots
from ..model.storage import dumps


def _temp_dir() -> str:
    import tempfile

    return tempfile.gettempdir()


def save_fallback(profile: Profile) -> str | None:
    """Save the whole profile as .tsp in the temp directory; None if that fails too."""
    import tempfile  # only when the output could not be written (it costs every run ~10 ms of start-up)

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


# Formats that show processes as a root frame `process <pid> <cmdline>` (record --subprocesses);
# firefox and pprof have their own notion of a process, the table and summary count per process.
PROCESS_ROOTED = frozenset({"flamegraph", "svg", "collapsed", "tree", "speedscope", "pstats"})


def output_view(profile: Profile, fmt: str, function_level: bool, include_idle: bool) -> Profile:
    """The profile as a format should see it: idle samples dropped (wall mode), lines merged,
    processes rooted in their own frame (when it has several)."""
    view = profile
    if fmt != "truestack" and profile.meta.mode == "wall" and not include_idle:
        before = view.sample_count
        view = view.without_idle()
        view.meta.idle_excluded = before - view.sample_count
    if function_level and not view.meta.function_level:
        view = view.merged_lines()
    if fmt in PROCESS_ROOTED:
        view = with_process_roots(view)
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
            f"(saving a copy to {_temp_dir()} failed too)"
        )
    sys.stderr.write(message + "\n")
    return problem
