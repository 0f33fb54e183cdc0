"""Public debugger entry points.

PYTHONBREAKPOINT=truestack.debug.breakpoint python prog.py
import truestack.debug; truestack.debug.set_trace()
"""

from __future__ import annotations

from .debugger.api import breakpoint, post_mortem, set_trace

__all__ = ["breakpoint", "post_mortem", "set_trace"]
