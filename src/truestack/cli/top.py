"""`truestack top`: run a program like `record` and watch where its time goes, live.

Parse and check, then hand `recording` a Plan and a view: the full-screen
curses table when stdin and stdout are a terminal, else (or with
`--batch`) a plain-text snapshot every interval. The program is launched,
sampled and stopped exactly as under `record` (same options, exit statuses
and Ctrl-C); `--output` writes the whole profile at the end with record's
format rules. `--pid PID` watches a running process instead, attached as
`truestack attach` does (`q` or Ctrl-C detach; the process goes on).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from ..errors import UsageError
from ..model.live import SORT_KEYS
from ..recording.destination import check_format_dependencies, check_output_path, resolve_format
from ..recording.launch import run_recording
from ..recording.live import BatchView, LiveView
from ..recording.plan import Plan
from ..settings import DEFAULT_MAX_DEPTH, ENGINE_CHOICES
from ..target import Target, resolve_target
from .common import (
    add_async_argument,
    add_module_argument,
    add_native_arguments,
    non_negative_int,
    positive_float,
    rate,
    split_target,
)

DEFAULT_RATE = "100"
DEFAULT_ROWS = 20
SUMMARY_ROWS = 10


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "top",
        help="run a program and watch its profile live",
        usage="truestack top [options] script.py [args...]\n       truestack top [options] -m module [args...]",
        description="Run a Python program under the sampling profiler and show, live, the functions its time "
        "goes to: full-screen in a terminal, a plain-text snapshot every interval otherwise.",
    )
    p.add_argument("--mode", choices=("cpu", "wall"), default="cpu", help="cpu (default) or wall time")
    p.add_argument("--rate", type=rate, default=DEFAULT_RATE, help="samples per second: 250, 1k, 10khz (default 100)")
    p.add_argument(
        "--interval", type=positive_float, default=1.0, metavar="SECONDS", help="refresh every SECONDS (default 1)"
    )
    p.add_argument("-o", "--output", help="also save the whole profile to this file when the program ends")
    p.add_argument("-f", "--format", help="format of --output (default: from its extension, as for record)")
    p.add_argument("-b", "--batch", action="store_true", help="plain-text snapshots even on a terminal (top -b)")
    p.add_argument(
        "--rows",
        type=non_negative_int,
        default=DEFAULT_ROWS,
        metavar="N",
        help=f"functions per batch snapshot (default {DEFAULT_ROWS})",
    )
    p.add_argument("--sort", choices=SORT_KEYS, default="own", help="initial order: own (default), total or name")
    p.add_argument(
        "--include-idle", action="store_true", help="wall mode: count samples of sleeping/blocked threads too"
    )
    p.add_argument("--engine", choices=ENGINE_CHOICES, default="auto", help="auto, native, or safepoint")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary at the end")
    add_async_argument(p)
    p.add_argument(
        "--subprocesses",
        action="store_true",
        help="follow the Python processes the program starts (multiprocessing, subprocess) into the table",
    )
    p.add_argument("--pid", type=int, metavar="PID", help="watch a running process (attached as by `truestack attach`)")
    add_native_arguments(p)
    add_module_argument(p, "run a module like python -m; everything after it goes to the module")
    p.add_argument("target", nargs=argparse.REMAINDER, metavar="script.py [args]", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def make_plan(args: argparse.Namespace) -> Plan:
    """Check everything the user gave, before the program runs (or the process is attached)."""
    if args.pid is not None:
        if args.target or args.module is not None:
            raise UsageError("give either --pid PID or a program to run, not both")
        if args.subprocesses:
            raise UsageError("--subprocesses follows a program top starts; it does not apply to --pid")
        target = Target("process", f"pid{args.pid}")
    else:
        script, module, target_args = split_target(args.module, args.target)
        target = resolve_target(script, None, target_args) if script else Target("module", module or "", target_args)
    if args.format and not args.output:
        raise UsageError("--format needs --output")
    fmt = "truestack"
    if args.output:
        check_output_path(args.output)
        fmt = resolve_format(args.format, args.output)
        check_format_dependencies(fmt)
    return Plan(
        target,
        fmt,
        os.path.abspath(args.output) if args.output else "",
        args.mode,
        args.rate,
        args.engine,
        DEFAULT_MAX_DEPTH,
        None,
        False,
        args.include_idle,
        args.quiet,
        SUMMARY_ROWS,
        subprocesses=args.subprocesses,
        async_tasks=args.async_tasks,
        native=args.native,
    )


def make_view(args: argparse.Namespace, target: Target) -> LiveView:
    if not args.batch:
        from ..recording.screen import ScreenView, screen_problem

        problem = screen_problem()
        if problem is not None and os.isatty(1):  # on a terminal the user expects the full screen: say why not
            sys.stderr.write(f"truestack: note: {problem}; printing snapshots instead\n")
        if problem is None:
            if target.kind == "process":
                title = f"process {args.pid}"
            else:
                command = [target.name] if target.kind == "script" else ["-m", target.name]
                title = shlex.join([*command, *target.args])
            try:
                return ScreenView(args.interval, args.sort, args.include_idle, title)
            except OSError as exc:  # its temporary file for the program's output
                raise UsageError(f"cannot start the full-screen view: {exc.strerror or exc}") from None
    return BatchView(args.interval, args.rows, args.sort, args.include_idle)


def run(args: argparse.Namespace) -> int:
    plan = make_plan(args)
    view = make_view(args, plan.target)
    sys.stdout.flush()
    if args.pid is not None:
        from ..recording.attach import run_attach  # only then: `top script.py` starts as fast as before

        return run_attach(plan, args.pid, view)
    return run_recording(plan, view)
