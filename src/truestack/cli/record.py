"""`truestack record`: parse the options, check them, and hand a Plan to `recording`.

Decisions where py-spy users have expectations (the run itself is
`recording.supervisor` and `recording.run`; see their docstrings for
--duration, Ctrl-C, SIGTERM, crashes and exit statuses):
- Wall mode leaves idle samples (threads sleeping or blocked) out of the
  output by default, like py-spy without `--idle`; `--include-idle` keeps
  them. A `.tsp` profile always keeps them (with the choice recorded), so
  `truestack report` can still show either view.
"""

from __future__ import annotations

import argparse
import os

from .. import exporters
from ..errors import UsageError
from ..recording.destination import (
    check_format_dependencies,
    check_output_path,
    default_output_name,
    resolve_format,
)
from ..recording.launch import run_recording
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
DEFAULT_TOP = 10


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "record",
        help="run a program and record its profile",
        usage="truestack record [options] script.py [args...]\n       truestack record [options] -m module [args...]",
        description="Run a Python program in this process under the sampling profiler and write its profile.",
    )
    p.add_argument("-o", "--output", help="output file (default: truestack-<script>-<time>.<ext> here)")
    p.add_argument(
        "-f",
        "--format",
        help=f"output format: {', '.join(exporters.FORMATS)} (default: from the output's extension, else flamegraph)",
    )
    p.add_argument("--mode", choices=("cpu", "wall"), default="cpu", help="cpu (default) or wall time")
    p.add_argument("--rate", type=rate, default=DEFAULT_RATE, help="samples per second: 250, 1k, 10khz (default 100)")
    p.add_argument(
        "--duration",
        type=positive_float,
        metavar="SECONDS",
        help="stop sampling after this long, write the profile, then stop the program (like py-spy)",
    )
    p.add_argument(
        "--max-depth",
        type=non_negative_int,
        default=DEFAULT_MAX_DEPTH,
        metavar="N",
        help=f"deepest stack kept, frames nearest the leaf first (default {DEFAULT_MAX_DEPTH})",
    )
    p.add_argument("--function-level", action="store_true", help="merge lines: one node per function")
    p.add_argument(
        "--include-idle",
        action="store_true",
        help="wall mode: keep samples of sleeping/blocked threads (left out by default, like py-spy)",
    )
    p.add_argument(
        "--engine",
        choices=ENGINE_CHOICES,
        default="auto",
        help="auto (native if available, else safepoint), native, or safepoint",
    )
    p.add_argument(
        "--subprocesses",
        action="store_true",
        help="also profile the Python processes the program starts (multiprocessing, subprocess, children of "
        "children), each its own group in the profile",
    )
    add_async_argument(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no summary; only errors")
    p.add_argument(
        "--summary-top",
        type=non_negative_int,
        default=DEFAULT_TOP,
        metavar="N",
        help=f"rows of the method table in the summary (default {DEFAULT_TOP}; 0 for none)",
    )
    add_native_arguments(p)
    add_module_argument(p, "run a module like python -m; everything after it goes to the module")
    p.add_argument("target", nargs=argparse.REMAINDER, metavar="script.py [args]", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def make_plan(args: argparse.Namespace) -> Plan:
    """Check everything the user gave, before the program runs."""
    script, module, target_args = split_target(args.module, args.target)
    if args.output:
        check_output_path(args.output)  # a directory or unwritable place first: that is the user's real mistake
    fmt = resolve_format(args.format, args.output)
    check_format_dependencies(fmt)
    if args.max_depth < 1:
        raise UsageError("--max-depth must be at least 1")
    # A module is found in the program's process: finding it imports its
    # package, which must not run twice or in the recorder.
    target = resolve_target(script, None, target_args) if script else Target("module", module or "", target_args)
    output = args.output or default_output_name(target.stem, fmt)
    check_output_path(output)
    # Absolute: the program may chdir before the profile is written.
    return Plan(
        target,
        fmt,
        os.path.abspath(output),
        args.mode,
        args.rate,
        args.engine,
        args.max_depth,
        args.duration,
        args.function_level,
        args.include_idle,
        args.quiet,
        args.summary_top,
        args.subprocesses,
        args.async_tasks,
        args.native,
    )


def run(args: argparse.Namespace) -> int:
    return run_recording(make_plan(args))
