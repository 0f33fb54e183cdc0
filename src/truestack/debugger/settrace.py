"""settrace backend (3.10/3.11, or forced with TRUESTACK_DEBUG_BACKEND=settrace).

The global trace function only answers 'call' events: it returns the local
tracer for code objects that contain a breakpoint (cached per code object)
or frames a stepping thread cares about, and None for everything else, so
untouched functions pay one cheap call per invocation and no line events.
Nothing is installed while no breakpoint exists and nobody steps.
"""

from __future__ import annotations

import dis
import sys
import threading
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core import Debugger

_YIELD = dis.opmap["YIELD_VALUE"]
_YIELD_FROM = dis.opmap.get("YIELD_FROM", -1)  # 3.10 `await`/`yield from`
_RESUME = dis.opmap.get("RESUME", -1)


# A trace function as sys.settrace takes it (typeshed spells it TraceFunction).
TraceFn = Callable[[types.FrameType, str, Any], "TraceFn | None"]


class SettraceBackend:
    def __init__(self, core: Debugger) -> None:
        self.core = core
        self.installed = False
        self._wanted: dict[types.CodeType, bool] = {}
        self._local = self._make_local()
        self._global = self._make_global()

    def refresh(self) -> None:
        core = self.core
        self._wanted.clear()
        if not core.breaks and not core.steps:
            if self.installed:
                sys.settrace(None)
                threading.settrace(None)  # type: ignore[arg-type, unused-ignore]  # typeshed <3.12 wants a callable
                self.installed = False
            return
        self.installed = True
        threading.settrace(self._global)
        sys.settrace(self._global)
        # Frames already running never see a 'call' event again: hook them directly.
        for tid, top in sys._current_frames().items():
            frame: types.FrameType | None = top
            while frame is not None:
                if frame.f_trace is None and core.frame_wanted(frame, tid):
                    frame.f_trace = self._local
                    frame.f_trace_lines = True
                frame = frame.f_back

    def _make_global(self) -> TraceFn:
        # A closure over locals, not a bound method: this runs on every call of
        # every function while a breakpoint exists, so each lookup counts.
        core = self.core
        wanted_get = self._wanted.get
        wanted_cache = self._wanted
        code_wanted = core.code_wanted
        frame_wanted = core.frame_wanted
        local = self._local

        def global_trace(frame: types.FrameType, event: str, arg: Any) -> TraceFn | None:
            code = frame.f_code
            wanted = wanted_get(code)
            if wanted is None:
                wanted = wanted_cache[code] = code_wanted(code)
            if wanted or (core.steps and frame_wanted(frame)):
                return local
            return None

        return global_trace

    def _make_local(self) -> TraceFn:
        core = self.core
        steps = core.steps  # mutated in place, never rebound
        lines_in = core.breaks.lines_in
        on_line = core.on_line
        on_break_line = core.on_break_line

        def local_trace(frame: types.FrameType, event: str, arg: Any) -> TraceFn:
            if event == "line":
                if steps:
                    on_line(frame, frame.f_lineno)
                else:
                    lines = lines_in(frame.f_code.co_filename)
                    if lines:
                        candidates = lines.get(frame.f_lineno)
                        if candidates is not None:
                            on_break_line(frame, candidates)
            elif event == "return" and steps:
                back = frame.f_back
                core.on_return(frame, arg, is_yield=_is_yield(frame))
                if back is not None and back.f_trace is None and core.frame_wanted(back):
                    back.f_trace = local_trace
                    back.f_trace_lines = True
            return local_trace

        return local_trace


def _is_yield(frame: types.FrameType) -> bool:
    """Is this 'return' event a suspension (yield/await) rather than a return?"""
    code = frame.f_code.co_code
    lasti = frame.f_lasti
    if lasti < len(code) and code[lasti] == _YIELD:
        return True
    # 3.13 already points at the RESUME that follows the YIELD_VALUE.
    if lasti >= 2 and lasti < len(code) and code[lasti] == _RESUME and code[lasti - 2] == _YIELD:
        return True
    # 3.10 rewinds f_lasti by one instruction while suspended in YIELD_FROM.
    return lasti + 2 < len(code) and code[lasti + 2] == _YIELD_FROM
