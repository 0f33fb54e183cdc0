"""Which frames are truestack's own, so stacks and tracebacks can leave them out.

One place answers "is this file part of the installed truestack package?"
for the sampler's stack filter, the launcher stripper, tracebacks of the
program, and the debugger's view of the stack.
"""

from __future__ import annotations

import os

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_PREFIX = PACKAGE_DIR + os.sep
OWN_THREAD_PREFIX = "truestack-"  # threads truestack starts: never sampled


def is_own_file(path: str) -> bool:
    """True for a source file inside the truestack package."""
    return path.startswith(_PREFIX)


def own_path(*parts: str) -> str:
    """The absolute path of a file of the package: own_path("engines", "") for a folder prefix."""
    return os.path.join(PACKAGE_DIR, *parts)


def is_own_thread(name: str) -> bool:
    """True for the name of a thread truestack started (collector, timers)."""
    return name.startswith(OWN_THREAD_PREFIX)
