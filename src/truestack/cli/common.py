"""What the subcommand modules share: argument types and the target arguments.

`cli/*` modules import nothing from each other except this module (an
import contract checks it).
"""

from __future__ import annotations

import argparse
import os

from .. import exporters
from ..errors import UsageError
from ..rates import parse_rate
from ..recording.destination import (
    check_format_dependencies,
    check_output_path,
    default_output_name,
    resolve_format,
)
from ..recording.plan import Plan
from ..settings import DEFAULT_MAX_DEPTH, ENGINE_CHOICES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..target import Target

DEFAULT_RATE = "100"
DEFAULT_TOP = 10


def positive_float(text: str) -> float:
    """argparse type: a number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


class _NativeAction(argparse.Action):
    """--native / --native-all into one `native` value: "off" < "on" < "all", the most asked for wins."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, *_: object) -> None:
        order = ("off", "on", "all")
        current = getattr(namespace, self.dest, "off") or "off"
        setattr(namespace, self.dest, max(current, str(self.const), key=order.index))


def add_native_arguments(p: argparse.ArgumentParser) -> None:
    """--native / --native-all as `args.native` ("off", "on", "all": settings.NATIVE_CHOICES), for record, top
    and whatever passes record's options on (recording.Plan.native; checked by recording.launch)."""
    p.add_argument(
        "--native",
        dest="native",
        action=_NativeAction,
        nargs=0,
        const="on",
        default="off",
        help="also show C frames (extension modules, C libraries) in the stacks, in call order; needs libunwind",
    )
    p.add_argument(
        "--native-all",
        dest="native",
        action=_NativeAction,
        nargs=0,
        const="all",
        help="--native, and keep the interpreter's own plumbing frames (vectorcall, cfunction_call...) too",
    )


def rate(text: str) -> float:
    """argparse type: a sampling rate as `truestack.rates.parse_rate` reads it (250, 1k, 10khz)."""
    try:
        return parse_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def rate_or_off(text: str) -> float:
    """argparse type: a rate as `rate` reads it, or 0 for off."""
    try:
        if float(text) == 0:
            return 0.0
    except ValueError:
        pass
    return rate(text)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def add_async_argument(parser: argparse.ArgumentParser) -> None:
    """`--async`: the one definition record, top and attach share (dest `async_tasks`)."""
    parser.add_argument(
        "--async",
        dest="async_tasks",
        action="store_true",
        help="asyncio: split samples per task (task:<name> roots, a track per task); in wall mode also record "
        "what each pending task awaits",
    )


def add_module_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    """`-m MODULE [args]`: REMAINDER, so everything after the module belongs to it, options included."""
    parser.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE", help=help_text)


def module_target(module: list[str] | None, script: str | None) -> tuple[str, list[str]] | None:
    """(module, its args) when `-m` was given, else None; UsageError for `-m` without a name or with a script."""
    if module is None:
        return None
    if not module:
        raise UsageError("-m needs a module name")
    if script is not None:
        raise UsageError("give either a script or -m MODULE, not both")
    return module[0], list(module[1:])


def split_target(module: list[str] | None, target: list[str]) -> tuple[str | None, str | None, list[str]]:
    """(script, module, args) from `-m MODULE [args]` or the remaining `script.py [args]` (a leading
    `--` dropped); UsageError when neither was given."""
    found = module_target(module, target[0] if target else None)
    if found is not None:
        return None, found[0], found[1]
    rest = list(target)
    if rest and rest[0] == "--":
        rest = rest[1:]
    if not rest:
        raise UsageError("no target: give a script path or -m MODULE")
    return rest[0], None, rest[1:]


def add_recording_options(parser: argparse.ArgumentParser, output_help: str, duration_help: str) -> None:
    """The options `record` and `attach` share: the output, how to sample, the summary."""
    p = parser
    p.add_argument("-o", "--output", help=output_help)
    p.add_argument(
        "-f",
        "--format",
        help=f"output format: {', '.join(exporters.FORMATS)} (default: from the output's extension, else flamegraph)",
    )
    p.add_argument("--mode", choices=("cpu", "wall"), default="cpu", help="cpu (default) or wall time")
    p.add_argument("--rate", type=rate, default=DEFAULT_RATE, help="samples per second: 250, 1k, 10khz (default 100)")
    p.add_argument("--duration", type=positive_float, metavar="SECONDS", help=duration_help)
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
    p.add_argument("-q", "--quiet", action="store_true", help="no summary; only errors")
    p.add_argument(
        "--summary-top",
        type=non_negative_int,
        default=DEFAULT_TOP,
        metavar="N",
        help=f"rows of the method table in the summary (default {DEFAULT_TOP}; 0 for none)",
    )
    add_async_argument(p)
    add_native_arguments(p)


def checked_format(args: argparse.Namespace) -> str:
    """The output format from `add_recording_options`' arguments, checked before anything runs."""
    if args.output:
        check_output_path(args.output)  # a directory or unwritable place first: that is the user's real mistake
    fmt = resolve_format(args.format, args.output)
    check_format_dependencies(fmt)
    if args.max_depth < 1:
        raise UsageError("--max-depth must be at least 1")
    return fmt


def recording_plan(args: argparse.Namespace, target: Target, fmt: str, subprocesses: bool = False) -> Plan:
    """The Plan for `add_recording_options`' arguments; the output named after the target by default."""
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
        subprocesses,
        args.async_tasks,
        args.native,
    )
