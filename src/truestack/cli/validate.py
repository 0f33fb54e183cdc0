"""`truestack validate [options] script.py [args]` / `-m module [args]`."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

from ..errors import UsageError
from ..target import resolve_target, run_target
from .common import add_module_argument, module_target, rate_or_off


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "validate",
        help="run a program and measure how often the native walker's stacks are wrong",
        description="Run a program under the layered oracle: the walker is checked against the frame chain "
        "at function entries and against event-kept shadow stacks at random signals.",
    )
    add_module_argument(p, "run a module like python -m; everything after it goes to the module")
    p.add_argument(
        "--sync-every",
        type=int,
        default=25,
        metavar="N",
        help="synchronous check at every Nth function entry per thread (0: off; default 25)",
    )
    p.add_argument(
        "--rate",
        type=rate_or_off,
        default=2000.0,
        metavar="HZ",
        help="random signals per second for the asynchronous layer: 500, 2k, 10khz (0: off; default 2000)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of the signal timing (default: random)")
    p.add_argument(
        "--max-error",
        type=float,
        default=0.5,
        metavar="PCT",
        help="exit 1 when the error rate exceeds this percentage (default 0.5)",
    )
    p.add_argument(
        "--min-checks",
        type=int,
        default=200,
        metavar="N",
        help="exit 1 (INCONCLUSIVE) with fewer walker checks than this (default 200)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the report (JSON with --json) to FILE")
    # Test-only: damage the walker's results to prove the oracle catches it.
    p.add_argument("--walker-fault", default=None, help=argparse.SUPPRESS)
    p.add_argument("script", nargs="?", help="the program to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    p.set_defaults(func=run)


def _check_options(args: argparse.Namespace) -> None:
    module = module_target(args.module, args.script)
    if module is not None:
        args.module, args.args = module
    if args.sync_every < 0:
        raise UsageError("--sync-every must be >= 0")
    if args.min_checks < 0:
        raise UsageError("--min-checks must be >= 0")
    if not 0 <= args.max_error <= 100:
        raise UsageError("--max-error must be a percentage between 0 and 100")
    if args.sync_every == 0 and args.rate == 0:
        raise UsageError("both layers are off (--sync-every 0 --rate 0): nothing to check")


def run(args: argparse.Namespace) -> int:
    from ..validate.oracle import Oracle, OracleUnavailable, settings_from
    from ..validate.report import render_json, render_text
    from ..validate.result import ValidationResult

    _check_options(args)
    target = resolve_target(args.script, args.module, args.args)
    try:
        settings = settings_from(args.sync_every, args.rate, args.seed, args.walker_fault)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.output:
        out_dir = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(out_dir):
            raise UsageError(f"cannot write {args.output}: no such directory")
    try:
        oracle = Oracle(settings)
    except OracleUnavailable as exc:
        raise UsageError(f"cannot validate: {exc}") from None

    t0 = time.monotonic()
    oracle.start()
    try:
        status, _exc = run_target(target)
    except OSError as exc:  # the script could not be read
        oracle.stop()
        raise UsageError(f"cannot run {target.describe()}: {exc}") from None
    except BaseException:
        oracle.stop()
        raise
    raw = oracle.stop()
    sys.stdout.flush()
    result = ValidationResult.from_native(
        raw,
        oracle.examples,
        target=target.describe(),
        target_status=status,
        python=platform.python_version(),
        max_error=args.max_error / 100.0,
        min_checks=args.min_checks,
        settings=settings.as_dict(),
        duration_s=time.monotonic() - t0,
    )
    text = render_json(result) if args.json else render_text(result)
    if args.json:
        print(text)
    else:
        sys.stderr.write(text + "\n")
    if args.output:
        with open(args.output, "w") as fh:
            fh.write(text + "\n")
    return 0 if result.passed else 1
