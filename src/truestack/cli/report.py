"""`truestack report PROFILE.tsp`: print a saved profile's method table, or convert it.

    truestack report run.tsp                          # summary header + method table
    truestack report run.tsp -o run.html              # convert; format from the extension
    truestack report run.tsp -f collapsed             # convert to stdout
    truestack report run.tsp -f pprof -o run.pb.gz --function-level

Wall-mode idle samples are left out unless the profile was recorded with
`--include-idle` or `--include-idle` is given here (as in `record`).
"""

from __future__ import annotations

import argparse
import sys

from .. import exporters
from ..errors import UsageError
from ..exporters.summary import render_summary
from ..model import Profile, ProfileFormatError, load
from ..recording.output import check_output_path, export_and_write, output_view, resolve_format


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "report",
        help="show or convert a saved profile (.tsp)",
        description="Print the method table of a saved truestack profile, or convert it to another format.",
    )
    p.add_argument("profile", metavar="PROFILE", help="a profile saved by truestack (.tsp)")
    p.add_argument(
        "-f", "--format", help=f"convert to: {', '.join(exporters.FORMATS)} (default: from the output's extension)"
    )
    p.add_argument("-o", "--output", help="write the conversion here (default: stdout)")
    p.add_argument("--function-level", action="store_true", help="merge lines: one node per function")
    p.add_argument("--include-idle", action="store_true", help="wall mode: keep idle samples")
    p.add_argument("--top", type=int, default=30, metavar="N", help="method table rows (default 30)")
    p.set_defaults(func=run)


def load_profile(path: str) -> Profile:
    try:
        return load(path)
    except FileNotFoundError:
        raise UsageError(f"no such profile: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a profile") from None
    except PermissionError:
        raise UsageError(f"cannot read {path}: permission denied") from None
    except ProfileFormatError as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    converting = args.format is not None or args.output is not None
    fmt = resolve_format(args.format, args.output) if converting else None
    if args.output:
        check_output_path(args.output)
    if args.top < 0:
        raise UsageError("--top must not be negative")
    profile = load_profile(args.profile)
    include_idle = args.include_idle or profile.meta.include_idle
    if fmt is None:
        view = output_view(profile, "table", args.function_level, include_idle)
        sys.stdout.write(render_summary(view, top=args.top))
        return 0
    view = output_view(profile, fmt, args.function_level, include_idle)
    if args.output is None:
        try:
            data = exporters.export(view, fmt)
        except ImportError as exc:
            raise UsageError(f"format {fmt!r} needs a missing package: {exc}") from None
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return 0
    if export_and_write(view, fmt, args.output):
        return 1
    sys.stderr.write(f"truestack: wrote {args.output} ({fmt}, {view.sample_count} samples)\n")
    return 0
