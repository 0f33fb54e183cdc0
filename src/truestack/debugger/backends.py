"""Pick the event backend: sys.monitoring on 3.12+, settrace before."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .core import Debugger


class Backend(Protocol):
    """What the debugger core asks of an event source (settrace or sys.monitoring)."""

    def refresh(self) -> None:
        """Re-read the breakpoints and stepping state; hook exactly the code that needs it."""


def make_backend(core: Debugger) -> Backend:
    # TRUESTACK_DEBUG_BACKEND=settrace forces the old backend on 3.12+ (for comparisons).
    if sys.version_info >= (3, 12) and os.environ.get("TRUESTACK_DEBUG_BACKEND") != "settrace":
        from .monitoring import MonitoringBackend

        return MonitoringBackend(core)
    from .settrace import SettraceBackend

    return SettraceBackend(core)
