"""`truestack report PROFILE.tsp`: print a saved profile's call tree, or convert it.

    truestack report run.tsp                          # summary header + call tree (pyinstrument-style)
    truestack report run.tsp --min-percent 5 --show-all
    truestack report run.tsp --top 30                 # summary header + method table (top 30 rows)
    truestack report run.tsp -o run.html              # convert; format from the extension
    truestack report run.tsp -f collapsed             # convert to stdout
    truestack report run.tsp -f pprof -o run.pb.gz --function-level

Wall-mode idle samples are left out unless the profile was recorded with
`--include-idle` or `--include-idle` is given here (as in `record`). The
tree options (`--min-percent`, `--limit`, `--show-all`, `--color`) apply to
the default view and to `-f tree`; `record -f tree` uses their defaults.
"""

from __future__ import annotations

import argparse
import sys

from .. import exporters
from ..errors import UsageError
from ..exporters.summary import render_summary
from ..exporters.tree import TreeOptions
from ..model import Profile, ProfileFormatError, load
from ..recording.destination import check_output_path, resolve_format
from ..recording.output import export_and_write, output_view


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "report",
        help="show or convert a saved profile (.tsp)",
        description="Print the call tree of a saved truestack profile, or convert it to another format.",
    )
    p.add_argument("profile", metavar="PROFILE", help="a profile saved by truestack (.tsp)")
    p.add_argument(
        "-f", "--format", help=f"convert to: {', '.join(exporters.FORMATS)} (default: from the output's extension)"
    )
    p.add_argument("-o", "--output", help="write the conversion here (default: stdout)")
    p.add_argument("--function-level", action="store_true", help="merge lines: one node per function")
    p.add_argument("--include-idle", action="store_true", help="wall mode: keep idle samples")
    p.add_argument("--top", type=int, metavar="N", help="print the method table's top N rows instead of the tree")
    tree = p.add_argument_group("call tree (the default view, and -f tree)")
    tree.add_argument(
        "--min-percent",
        type=float,
        default=1.0,
        metavar="P",
        help="hide nodes under P %% of all samples (default 1)",
    )
    tree.add_argument("--limit", type=int, metavar="N", help="show at most N children per node")
    tree.add_argument("--show-all", action="store_true", help="keep library frames (stdlib, site-packages)")
    tree.add_argument(
        "--color", choices=("auto", "always", "never"), default="auto", help="ANSI colour (default: on a terminal)"
    )
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
    if args.output:
        check_output_path(args.output)
    fmt = resolve_format(args.format, args.output) if converting else None
    if args.top is not None and args.top < 0:
        raise UsageError("--top must not be negative")
    if args.limit is not None and args.limit < 0:
        raise UsageError("--limit must not be negative")
    if not 0 <= args.min_percent <= 100:
        raise UsageError("--min-percent must be between 0 and 100")
    profile = load_profile(args.profile)
    include_idle = args.include_idle or profile.meta.include_idle
    if fmt is None and args.top is not None:
        view = output_view(profile, "table", args.function_level, include_idle)
        sys.stdout.write(render_summary(view, top=args.top))
        return 0
    to_stdout = args.output is None
    fmt = fmt or "tree"
    view = output_view(profile, fmt, args.function_level, include_idle)
    options = _tree_options(args, to_stdout) if fmt == "tree" else None
    if to_stdout:
        try:
            data = exporters.export(view, fmt, options)
        except ImportError as exc:
            raise UsageError(f"format {fmt!r} needs a missing package: {exc}") from None
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return 0
    if export_and_write(view, fmt, args.output, options):
        return 1
    sys.stderr.write(f"truestack: wrote {args.output} ({fmt}, {view.sample_count} samples)\n")
    return 0


def _tree_options(args: argparse.Namespace, to_stdout: bool) -> TreeOptions:
    color = args.color == "always" or (args.color == "auto" and to_stdout and sys.stdout.isatty())
    return TreeOptions(min_percent=args.min_percent, limit=args.limit, show_all=args.show_all, color=color)
