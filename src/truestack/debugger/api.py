"""Process-wide debugger instance and the public entry points."""

from __future__ import annotations

import sys
import types

from .core import Debugger

_debugger: Debugger | None = None


def get_debugger() -> Debugger:
    """The debugger of this process, created (console front end) on first use."""
    global _debugger
    if _debugger is None:
        from .shell import ConsoleDebugger

        _debugger = ConsoleDebugger()
    return _debugger


def install(debugger: Debugger | None) -> None:
    """Make `debugger` the one breakpoint()/set_trace() use (None to reset)."""
    global _debugger
    _debugger = debugger


def set_trace(frame: types.FrameType | None = None, *, header: str | None = None) -> None:
    """Stop in the caller (or `frame`) and open the debugger shell."""
    debugger = get_debugger()
    if header:
        debugger.message(header)
    debugger.set_trace(frame or sys._getframe(1))


def breakpoint(*args: object, **kwargs: object) -> None:
    """sys.breakpointhook: `PYTHONBREAKPOINT=truestack.debug.breakpoint`."""
    debugger = get_debugger()
    header = kwargs.get("header")
    if isinstance(header, str) and header:
        debugger.message(header)
    debugger.set_trace(sys._getframe(1))


def post_mortem(tb: types.TracebackType | None = None) -> None:
    """Post-mortem shell on `tb` (default: the exception being handled)."""
    exc = sys.exc_info()[1]
    if tb is None:
        tb = exc.__traceback__ if exc is not None else getattr(sys, "last_traceback", None)
    if tb is None:
        raise ValueError("post_mortem() needs a traceback or an exception being handled")
    value = exc if exc is not None else getattr(sys, "last_value", None)
    get_debugger().post_mortem(tb, value if isinstance(value, BaseException) else RuntimeError("no exception"))
