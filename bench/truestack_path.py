"""Where the benchmarks take truestack from.

The interpreter's installed truestack when it has one (that copy carries the
compiled extension); otherwise the source tree, where only the pure-Python
safepoint engine works — a benchmark asking for the native engine then fails
loudly instead of measuring the wrong thing.
"""
from __future__ import annotations

import importlib.util
import os
import sys

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def installed() -> bool:
    return importlib.util.find_spec("truestack") is not None


def make_importable() -> None:
    """Let this process import truestack (from the source tree if not installed)."""
    if not installed() and SRC not in sys.path:
        sys.path.insert(0, SRC)


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a child interpreter (the same one) that must import truestack."""
    env = dict(os.environ)
    if not installed():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [SRC, env.get("PYTHONPATH")]))
    env.update(extra)
    return env
