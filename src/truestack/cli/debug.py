"""`truestack debug`: run a script or module under the debugger."""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..target import resolve_target
from .common import add_module_argument, module_target


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "debug",
        help="run a program under the debugger",
        description="Run a Python program under truestack's debugger: stops before the first "
        "line, breakpoint() opens the debugger shell, uncaught exceptions open a "
        "post-mortem shell.",
    )
    parser.add_argument(
        "--no-stop", action="store_true", help="do not stop before the first line; run to the first breakpoint"
    )
    parser.add_argument("--no-post-mortem", action="store_true", help="do not open the shell on an uncaught exception")
    parser.add_argument(
        "--shell",
        choices=("python", "ipython"),
        default=None,
        help="shell at each stop (default: python, or $TRUESTACK_SHELL)",
    )
    add_module_argument(parser, "run a library module as a script")
    parser.add_argument("script", nargs="?", help="script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the program")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    program_args = list(args.args)
    script, module = args.script, None
    given = module_target(args.module, script)
    if given is not None:
        module, program_args = given
    if args.shell == "ipython":
        from ..debugger.ipython_shell import available

        if not available():
            raise UsageError("--shell ipython: IPython is not installed")
    target = resolve_target(script, module, program_args)
    from ..debugger.runner import run as run_debugger

    return run_debugger(target, stop=not args.no_stop, post_mortem=not args.no_post_mortem, shell=args.shell)
