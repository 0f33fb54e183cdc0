"""What the subcommand modules share: argument types and the target arguments.

`cli/*` modules import nothing from each other except this module (an
import contract checks it).
"""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..rates import parse_rate


def positive_float(text: str) -> float:
    """argparse type: a number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def add_native_arguments(p: argparse.ArgumentParser) -> None:
    """--native / --native-all (record, top; attach passes them on as record does)."""
    p.add_argument(
        "--native",
        action="store_true",
        help="also show C frames (extension modules, C libraries) in the stacks, in call order; needs libunwind",
    )
    p.add_argument(
        "--native-all",
        action="store_true",
        help="--native, and keep the interpreter's own plumbing frames (vectorcall, cfunction_call...) too",
    )


def native_choice(args: argparse.Namespace) -> str:
    """The settings.NATIVE_CHOICES value the --native options ask for."""
    return "all" if args.native_all else "on" if args.native else "off"


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
