"""`truestack` command line: dispatches to one module per subcommand.

Each subcommand module exposes `add_parser(subparsers)` (which registers its
arguments and sets `func=run`) and `run(args) -> int`.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

from ..errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any, NoReturn

SUBCOMMANDS = ("record", "attach", "top", "report", "validate", "debug", "check", "dump")


def _terminal_width() -> int:
    """What shutil.get_terminal_size() gives, without importing shutil (with bz2 and lzma):
    argparse builds a formatter for every argument it adds, and asks shutil each time."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("width", _terminal_width() - 2)  # argparse's own margin
        super().__init__(prog, *args, **kwargs)


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line and exit status 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"truestack: error: {message}\n")
        raise SystemExit(2)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with `only`, just that subcommand's (importing every subcommand,
    with what each needs, is most of the CLI's start-up)."""
    parser = _Parser(prog="truestack", description="Accurate sampling profiler and debugger for CPython.")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"truestack {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in (only,) if only else SUBCOMMANDS:
        module = importlib.import_module(f"truestack.cli.{name}")
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    # Importing a subcommand allocates thousands of objects and no garbage:
    # collections during it are pure start-up cost.
    gc.disable()
    try:
        parser = build_parser(words[0] if words and words[0] in SUBCOMMANDS else None)
        args = parser.parse_args(words)
    finally:
        gc.enable()
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        sys.stderr.write(f"truestack: error: {exc}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
