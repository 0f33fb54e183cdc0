"""`truestack` command line: dispatches to one module per subcommand.

Each subcommand module exposes `add_parser(subparsers)` (which registers its
arguments and sets `func=run`) and `run(args) -> int`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

from ..errors import UsageError

SUBCOMMANDS = ("record", "report", "validate", "debug", "check")


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"truestack: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="truestack", description="Accurate sampling profiler and debugger for CPython.")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"truestack {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"truestack.cli.{name}")
        except ImportError as exc:
            if exc.name != f"truestack.cli.{name}":
                raise
            continue  # subcommand not built yet
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
