"""`truestack dump PID`: every thread's Python stack in a running process, read from outside.

Parses and delegates to `truestack.remote`. When the target runs another
Python version than this one, runs itself again under the target's own
interpreter (truestack's reader is built per version), or says how to
install truestack there.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

REEXEC_ENV = "TRUESTACK_DUMP_REEXEC"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "dump",
        help="print every thread's Python stack of a running process",
        description="Print the current Python stack of every thread of process PID, read from outside (nothing is "
        "injected, the process is not stopped): works on a deadlocked process or one stuck in C holding the GIL.",
    )
    p.add_argument("pid", type=int, metavar="PID", help="the process to read")
    p.add_argument("--locals", action="store_true", help="show each frame's local variables (read, never evaluated)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    sys.stderr.write(f"truestack: error: {message}\n")
    return 1


def _rerun(args: argparse.Namespace, version: tuple[int, int], candidates: list[str]) -> int:
    """Runs this dump again under an interpreter of the target's version that has truestack, if any."""
    wanted = f"{version[0]}.{version[1]}"
    argv = ["dump", str(args.pid)] + (["--locals"] if args.locals else []) + (["--json"] if args.json else [])
    if os.environ.get(REEXEC_ENV) != "1":
        for exe in candidates:
            probe = subprocess.run(
                [exe, "-c", "import sys, truestack._remote; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True, text=True, timeout=30, env={**os.environ, "PYTHONSAFEPATH": "1"},
            )  # fmt: skip
            if probe.returncode == 0 and probe.stdout.strip() == wanted:
                sys.stdout.flush()
                os.execve(exe, [exe, "-m", "truestack", *argv], {**os.environ, REEXEC_ENV: "1", "PYTHONSAFEPATH": "1"})
    exe = candidates[0] if candidates else f"python{wanted}"
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return _fail(
        f"process {args.pid} runs Python {wanted} and this truestack runs on {here}: install truestack for the "
        f"target's interpreter (`{exe} -m pip install 'truestack[dump]'`) and run `{exe} -m truestack dump {args.pid}`"
    )


def run(args: argparse.Namespace) -> int:
    from ..remote.process import RemoteError, VersionMismatch

    try:
        from ..remote.snapshot import dump
    except ImportError as exc:  # pragma: no cover - an install without the extension
        return _fail(f"truestack dump needs the compiled extension truestack._remote ({exc}); reinstall truestack")
    try:
        result = dump(args.pid, with_locals=args.locals)
    except VersionMismatch as exc:
        return _rerun(args, exc.version, exc.candidates)
    except RemoteError as exc:
        return _fail(str(exc))
    except ImportError as exc:
        return _fail(f"truestack dump needs the compiled extension truestack._remote ({exc}); reinstall truestack")
    if args.json:
        sys.stdout.write(json.dumps(result.as_json(), indent=2) + "\n")
    else:
        from ..remote.report import format_text

        sys.stdout.write(format_text(result))
    return 0
