"""`truestack record`: run a program under the sampler and write its profile.

Decisions where py-spy users have expectations:
- `--duration S`: sampling stops after S seconds, the profile and summary are
  written at once, then the program is stopped the way py-spy stops the
  command it launched — here with SIGINT to the main thread, so `finally`
  blocks and atexit handlers still run. Exit status 0 when that is how the
  program ended (it ran as long as asked).
- Wall mode leaves idle samples (threads sleeping or blocked) out of the
  output by default, like py-spy without `--idle`; `--include-idle` keeps
  them. A `.tsp` profile always keeps them (with the choice recorded), so
  `truestack report` can still show either view.
- Ctrl-C, SIGTERM (when the program has no handler of its own) and an
  uncaught exception end the run early: the profile is still written, with
  `meta["interrupted"]` and a marker saying why. Exit status: 130 for Ctrl-C,
  143 for SIGTERM, 1 for an exception.
- If the output cannot be written (disk full, ...), the message says what
  was lost and a copy of the whole profile is saved as `.tsp` in the temp
  directory, to convert later with `truestack report`.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .. import exporters
from ..atomic_file import write_atomic
from ..engines import ENGINE_CHOICES, EngineUnavailable
from ..model import Profile
from ..model.storage import dumps
from ..rates import parse_rate
from ..samples import Frame
from ..sampler import DEFAULT_MAX_DEPTH
from ..target import Target, resolve_target, run_target
from ..errors import UsageError
from .summary import render_summary

DEFAULT_FORMAT = "flamegraph"
DEFAULT_RATE = "100"
DEFAULT_TOP = 10
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "record", help="run a program and record its profile",
        usage="truestack record [options] script.py [args...]\n       truestack record [options] -m module [args...]",
        description="Run a Python program in this process under the sampling profiler and write its profile.")
    p.add_argument("-o", "--output", help="output file (default: truestack-<script>-<time>.<ext> here)")
    p.add_argument("-f", "--format", help=f"output format: {', '.join(exporters.FORMATS)} "
                                          "(default: from the output's extension, else flamegraph)")
    p.add_argument("--mode", choices=("cpu", "wall"), default="cpu", help="cpu (default) or wall time")
    p.add_argument("--rate", default=DEFAULT_RATE, help="samples per second: 250, 1k, 10khz (default 100)")
    p.add_argument("--duration", type=_float_arg, metavar="SECONDS",
                   help="stop sampling after this long, write the profile, then stop the program (like py-spy)")
    p.add_argument("--max-depth", type=_int_arg, default=DEFAULT_MAX_DEPTH, metavar="N",
                   help=f"deepest stack kept, frames nearest the leaf first (default {DEFAULT_MAX_DEPTH})")
    p.add_argument("--function-level", action="store_true", help="merge lines: one node per function")
    p.add_argument("--include-idle", action="store_true",
                   help="wall mode: keep samples of sleeping/blocked threads (left out by default, like py-spy)")
    p.add_argument("--engine", choices=ENGINE_CHOICES, default="auto",
                   help="auto (native if available, else safepoint), native, or safepoint")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary; only errors")
    p.add_argument("--summary-top", type=_int_arg, default=DEFAULT_TOP, metavar="N",
                   help=f"rows of the method table in the summary (default {DEFAULT_TOP}; 0 for none)")
    p.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE",
                   help="run a module like python -m; everything after it goes to the module")
    p.add_argument("target", nargs=argparse.REMAINDER, metavar="script.py [args]", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def _float_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _int_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


# -- output helpers (shared with `report`) -------------------------------------
def resolve_format(fmt: str | None, output: str | None) -> str:
    if fmt is not None:
        if fmt not in exporters.FORMATS:
            raise UsageError(f"unknown format {fmt!r} (choose from: {', '.join(exporters.FORMATS)})")
    else:
        fmt = (exporters.format_for_path(output) if output else None) or DEFAULT_FORMAT
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


def save_fallback(profile: Profile) -> str | None:
    """Save the whole profile as .tsp in the temp directory; None if that fails too."""
    try:
        fd, path = tempfile.mkstemp(prefix="truestack-rescued-", suffix=".tsp")
    except OSError:
        return None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(dumps(profile))
    except Exception:  # noqa: BLE001 - nothing more we can do; the caller reports it
        try:
            os.unlink(path)
        except OSError:
            pass
        return None
    return path


def output_view(profile: Profile, fmt: str, function_level: bool, include_idle: bool) -> Profile:
    """The profile as a format should see it: idle samples dropped (wall mode), lines merged."""
    view = profile
    if fmt != "truestack" and profile.meta.get("mode") == "wall" and not include_idle:
        before = view.sample_count
        view = view.without_idle()
        view.meta["idle_excluded"] = before - view.sample_count
    if function_level and not view.meta.get("function_level"):
        view = view.merged_lines()
    return view


def export_and_write(profile: Profile, fmt: str, path: str) -> str | None:
    """Export and write; on failure print what was lost and rescue a .tsp. Returns an error or None."""
    try:
        data = exporters.export(profile, fmt)
    except Exception as exc:  # noqa: BLE001 - an exporter bug must not lose the profile
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
        message = (f"truestack: error: {problem}; the {fmt} output is lost, but the whole profile "
                   f"({profile.sample_count} samples) was saved to {rescued} — convert it with {how}")
    else:
        message = (f"truestack: error: {problem}; the profile ({profile.sample_count} samples) is lost "
                   f"(saving a copy to {tempfile.gettempdir()} failed too)")
    sys.stderr.write(message + "\n")
    return problem


# -- record ------------------------------------------------------------------
@dataclass
class Plan:
    target: Target
    fmt: str
    output: str
    mode: str
    rate_hz: float
    engine: str
    max_depth: int
    duration: float | None
    function_level: bool
    include_idle: bool
    quiet: bool
    top: int
    shown_output: str = ""  # the output as the user spelled it (plan.output is absolute)
    cwd: str = ""


def make_plan(args: argparse.Namespace) -> Plan:
    """Check everything the user gave, before the program runs."""
    script, module, target_args = _split_target(args)
    fmt = resolve_format(args.format, args.output)
    try:
        rate_hz = parse_rate(args.rate)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.max_depth < 1:
        raise UsageError("--max-depth must be at least 1")
    target = resolve_target(script, module, target_args)
    output = args.output or default_output_name(target, fmt)
    check_output_path(output)
    # Absolute: the program may chdir before the profile is written.
    return Plan(target, fmt, os.path.abspath(output), args.mode, rate_hz, args.engine, args.max_depth,
                args.duration, args.function_level, args.include_idle, args.quiet, args.summary_top,
                shown_output=output, cwd=os.getcwd())


def _split_target(args: argparse.Namespace) -> tuple[str | None, str | None, list[str]]:
    if args.module is not None:
        if args.target:
            raise UsageError("give either a script or -m MODULE, not both")
        if not args.module:
            raise UsageError("-m needs a module name")
        return None, args.module[0], list(args.module[1:])
    rest = list(args.target)
    if rest and rest[0] == "--":
        rest = rest[1:]
    if not rest:
        raise UsageError("no target: give a script path or -m MODULE")
    return rest[0], None, rest[1:]


def default_output_name(target: Target, fmt: str) -> str:
    if target.kind == "module":
        stem = target.name
    else:
        base = os.path.basename(os.path.normpath(target.name))
        stem = base[:-3] if base.endswith(".py") else base
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"truestack-{stem}-{stamp}{exporters.FORMATS[fmt].extensions[0]}"


_TARGET_FILE = os.path.join(_PKG_DIR, "target.py")


def _launcher_files() -> set[str]:
    """Files of the frames below the program: runpy and whatever script started truestack."""
    files = {"<frozen runpy>"}
    import runpy

    files.add(runpy.__file__)
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if main_file:
        files.add(main_file)
    return files


def make_frame_stripper() -> Callable[[tuple[Frame, ...]], tuple[Frame, ...] | None]:
    """A stack filter that cuts the launcher and truestack frames off the root of stacks.

    The program's `<module>` becomes the root, as if it ran directly; samples
    taken in truestack itself (before or after the program) are dropped (None).
    """
    launcher = _launcher_files()

    def strip(frames: tuple[Frame, ...]) -> tuple[Frame, ...] | None:
        if frames and (frames[0].file in launcher or frames[0].file.startswith(_PKG_DIR)):
            for i, frame in enumerate(frames):
                if frame.name == "run_target" and frame.file == _TARGET_FILE:
                    frames = frames[i + 1:]
                    break
            else:
                if any(f.file.startswith(_PKG_DIR) for f in frames):
                    return None  # truestack's own work around the program
            if not frames or frames[0].file.startswith(_PKG_DIR):
                return None  # empty, or truestack loading the program (load_target)
        return frames

    return strip


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is so the profile can still be written."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated()


class Recording:
    """One run: the session, its end (once, from whichever thread gets there first), the output."""

    def __init__(self, plan: Plan) -> None:
        from ..api import ProfileSession

        self.plan = plan
        command = ([plan.target.name] if plan.target.kind == "script" else ["-m", plan.target.name])
        self.session = ProfileSession(mode=plan.mode, rate=plan.rate_hz, engine=plan.engine,
                                      max_depth=plan.max_depth, command=[*command, *plan.target.args],
                                      stack_filter=make_frame_stripper())
        meta = self.session.profile.meta
        meta["include_idle"] = plan.include_idle
        meta["function_level"] = False
        self._lock = threading.Lock()
        self._finished = False
        self.write_error: str | None = None
        self.target_returned = False
        self.duration_hit = False
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        try:
            self.session.start()
        except EngineUnavailable as exc:
            raise UsageError(str(exc)) from None
        if self.plan.duration:
            self._timer = threading.Timer(self.plan.duration, self._duration_up)
            self._timer.name = "truestack-duration"
            self._timer.daemon = True
            self._timer.start()

    def _duration_up(self) -> None:
        from ..api import mark

        with self._lock:
            if self.target_returned:
                return
            self.duration_hit = True
        mark(f"--duration {self.plan.duration:g} s reached")
        self.finish()
        with self._lock:
            if not self.target_returned:
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # type: ignore[arg-type]

    def mark_returned(self) -> None:
        with self._lock:
            self.target_returned = True
        if self._timer is not None:
            self._timer.cancel()

    def finish(self, interrupted: str | None = None) -> None:
        from ..api import note_interrupted

        with self._lock:
            if self._finished:
                return
            self._finished = True
            if interrupted:
                note_interrupted(self.session.profile, interrupted)
            profile = self.session.stop()
            self._write(profile)

    def _write(self, profile: Profile) -> None:
        plan = self.plan
        view = output_view(profile, plan.fmt, plan.function_level, plan.include_idle)
        if plan.fmt == "truestack":
            shown = output_view(profile, "summary", plan.function_level, plan.include_idle)
        else:
            shown = view
        self.write_error = export_and_write(view, plan.fmt, plan.output)
        if plan.quiet:
            return
        where = plan.shown_output if os.getcwd() == plan.cwd else plan.output
        outputs = [] if self.write_error else [f"{where} ({plan.fmt})"]
        try:
            sys.stderr.write(render_summary(shown, top=plan.top, outputs=outputs))
        except Exception as exc:  # noqa: BLE001 - the profile is written; the summary is a courtesy
            sys.stderr.write(f"truestack: could not print the summary: {type(exc).__name__}: {exc}\n")


def run(args: argparse.Namespace) -> int:
    plan = make_plan(args)
    recording = Recording(plan)
    sigterm_installed = False
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
        sigterm_installed = True
    if plan.duration and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started in the background (SIGINT ignored): keep Ctrl-C ignored but let --duration stop the program.
        def _duration_sigint(signum: int, frame: object) -> None:
            if recording.duration_hit:
                raise KeyboardInterrupt

        signal.signal(signal.SIGINT, _duration_sigint)
    recording.start()
    status, exc = _run_program(recording)
    if sigterm_installed and signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if recording.duration_hit and isinstance(exc, KeyboardInterrupt):
        status, exc = 0, None  # we stopped it, as --duration asked
    reason = _interruption(exc)
    if isinstance(exc, _Terminated):
        status = 143
    for _attempt in range(2):  # a --duration SIGINT may land here instead of in the program
        try:
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # don't lose the profile to a 2nd Ctrl-C
            try:
                recording.finish(reason)
            finally:
                signal.signal(signal.SIGINT, previous)
            break
        except KeyboardInterrupt:
            if not recording.duration_hit:
                raise
    if recording.write_error:
        return status or 1
    return status


def _run_program(recording: Recording) -> tuple[int, BaseException | None]:
    """Run the target, then wait for its non-daemon threads as the interpreter would."""
    try:
        try:
            status, exc = run_target(recording.plan.target)
        finally:
            recording.mark_returned()
        main = threading.main_thread()
        for thread in threading.enumerate():
            if thread is not main and not thread.daemon and thread.is_alive():
                thread.join()
    except KeyboardInterrupt as interrupt:
        return 130, interrupt
    return status, exc


def _interruption(exc: BaseException | None) -> str | None:
    if exc is None:
        return None
    if isinstance(exc, _Terminated):
        return "SIGTERM"
    if isinstance(exc, KeyboardInterrupt):
        return "KeyboardInterrupt (Ctrl-C)"
    text = str(exc)
    if len(text) > 200:
        text = text[:197] + "..."
    return f"the program raised {type(exc).__name__}" + (f": {text}" if text else "")
