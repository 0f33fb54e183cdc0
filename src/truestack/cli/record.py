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

from ..recording.launch import run_recording
from ..recording.plan import Plan
from ..target import Target, resolve_target
from .common import add_module_argument, add_recording_options, checked_format, recording_plan, split_target


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "record",
        help="run a program and record its profile",
        usage="truestack record [options] script.py [args...]\n       truestack record [options] -m module [args...]",
        description="Run a Python program in this process under the sampling profiler and write its profile.",
    )
    add_recording_options(
        p,
        output_help="output file (default: truestack-<script>-<time>.<ext> here)",
        duration_help="stop sampling after this long, write the profile, then stop the program (like py-spy)",
    )
    p.add_argument(
        "--subprocesses",
        action="store_true",
        help="also profile the Python processes the program starts (multiprocessing, subprocess, children of "
        "children), each its own group in the profile",
    )
    add_module_argument(p, "run a module like python -m; everything after it goes to the module")
    p.add_argument("target", nargs=argparse.REMAINDER, metavar="script.py [args]", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def make_plan(args: argparse.Namespace) -> Plan:
    """Check everything the user gave, before the program runs."""
    script, module, target_args = split_target(args.module, args.target)
    fmt = checked_format(args)
    # A module is found in the program's process: finding it imports its
    # package, which must not run twice or in the recorder.
    target = resolve_target(script, None, target_args) if script else Target("module", module or "", target_args)
    return recording_plan(args, target, fmt, subprocesses=args.subprocesses)


def run(args: argparse.Namespace) -> int:
    return run_recording(make_plan(args))
