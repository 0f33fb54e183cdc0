"""`truestack attach PID`: profile a running Python process with the in-process sampler.

The options and outputs are `record`'s (shared in `common`); the work is
`recording.attach`. Where the issue was silent:
- Ctrl-C, SIGTERM and `--duration` detach: the profile is written and the
  exit status is 0 (py-spy record's Ctrl-C); the target goes on. The target
  exiting while attached also ends the recording, with status 0: the profile
  covers it up to its exit and says so.
- A failure to attach is one line and exit status 1 (as for `dump`);
  option mistakes are status 2 as everywhere.
- The default output is `truestack-pid<PID>-<time>.<ext>`.
"""

from __future__ import annotations

import argparse

from ..recording.attach import run_attach
from ..target import Target
from .common import add_recording_options, checked_format, recording_plan


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "attach",
        help="record the profile of a running Python process",
        usage="truestack attach [options] PID",
        description="Attach to a running CPython 3.10-3.13 process, sample it in-process with the native sampler "
        "until --duration or Ctrl-C, then detach (the process goes on) and write its profile.",
    )
    add_recording_options(
        p,
        output_help="output file (default: truestack-pid<PID>-<time>.<ext> here)",
        duration_help="detach after this long and write the profile (default: until Ctrl-C or the process exits)",
    )
    p.add_argument("pid", type=int, metavar="PID", help="the process to attach to")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    fmt = checked_format(args)
    plan = recording_plan(args, Target("process", f"pid{args.pid}"), fmt)
    return run_attach(plan, args.pid)
