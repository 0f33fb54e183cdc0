"""`truestack debug`: run a script or module under the debugger."""
from __future__ import annotations

import argparse

from ..target import resolve_target
from ..errors import UsageError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "debug", help="run a program under the debugger",
        description="Run a Python program under truestack's debugger: stops before the first "
                    "line, breakpoint() opens the debugger shell, uncaught exceptions open a "
                    "post-mortem shell.")
    parser.add_argument("--no-stop", action="store_true",
                        help="do not stop before the first line; run to the first breakpoint")
    parser.add_argument("--no-post-mortem", action="store_true",
                        help="do not open the shell on an uncaught exception")
    parser.add_argument("--shell", choices=("python", "ipython"), default=None,
                        help="shell at each stop (default: python, or $TRUESTACK_SHELL)")
    # REMAINDER: everything after `-m MODULE` belongs to the module, options included.
    parser.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE [ARGS]",
                        help="run a library module as a script")
    parser.add_argument("script", nargs="?", help="script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the program")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    program_args = list(args.args)
    script, module = args.script, None
    if args.module is not None:
        if not args.module:
            raise UsageError("-m needs a module name")
        if script is not None:
            raise UsageError("give either a script or -m MODULE, not both")
        module, *program_args = args.module
    if args.shell == "ipython":
        from ..debugger.ipython_shell import available

        if not available():
            raise UsageError("--shell ipython: IPython is not installed")
    target = resolve_target(script, module, program_args)
    from ..debugger.runner import run as run_debugger

    return run_debugger(target, stop=not args.no_stop, post_mortem=not args.no_post_mortem,
                        shell=args.shell)
