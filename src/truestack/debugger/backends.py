"""Pick the event backend: sys.monitoring on 3.12+, settrace before."""
from __future__ import annotations

import os
import sys


def make_backend(core):
    # TRUESTACK_DEBUG_BACKEND=settrace forces the old backend on 3.12+ (for comparisons).
    if sys.version_info >= (3, 12) and os.environ.get("TRUESTACK_DEBUG_BACKEND") != "settrace":
        from .monitoring import MonitoringBackend

        return MonitoringBackend(core)
    from .settrace import SettraceBackend

    return SettraceBackend(core)
