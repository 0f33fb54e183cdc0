"""sys.monitoring backend (3.12+).

Cost model: while no breakpoint exists and nobody steps, the tool id is free
and no event is enabled. With breakpoints, PY_START/PY_RESUME are enabled
globally only to discover code objects: each code location fires once and is
DISABLEd, so a function without breakpoints costs nothing after its first
call. Code objects with breakpoints get local LINE events, and lines without
a breakpoint are DISABLEd too, so only breakpoint lines call back. Any change
(new breakpoint, stepping) calls restart_events() to re-arm everything.

While no thread steps, the LINE callback is truestack._debughook.monitor_line
itself: a C function that finds the line's breakpoints in the code object's
record, decides them (counts, simple conditions read from the fast locals,
other conditions against just the locals they name) and calls Python only to
stop. Stepping swaps the Python callback back in.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

from . import fastpath

if TYPE_CHECKING:
    from .core import Debugger

mon = sys.monitoring  # type: ignore[attr-defined, unused-ignore]  # 3.12+: this module is imported only there
E = mon.events
DISABLE = mon.DISABLE
_LOCAL_STEP = E.LINE | E.PY_RETURN | E.PY_YIELD


class MonitoringBackend:
    def __init__(self, core: Debugger) -> None:
        self.core = core
        self.tool: int | None = None
        self._local: dict[types.CodeType, int] = {}  # code -> local events we set
        self._line_callback: object = None

    # ----------------------------------------------------------- set-up
    def _acquire(self) -> None:
        for tool in (mon.DEBUGGER_ID, 3, 4, 5):
            if mon.get_tool(tool) is None:
                mon.use_tool_id(tool, "truestack-debug")
                self.tool = tool
                break
        else:
            raise RuntimeError("no free sys.monitoring tool id for the debugger")
        register = mon.register_callback
        register(self.tool, E.PY_START, self._on_start)
        register(self.tool, E.PY_RESUME, self._on_start)
        register(self.tool, E.LINE, self._on_line)
        self._line_callback = self._on_line
        register(self.tool, E.PY_RETURN, self._on_return)
        register(self.tool, E.PY_YIELD, self._on_yield)
        register(self.tool, E.PY_UNWIND, self._on_unwind)

    def _release(self) -> None:
        tool = self.tool
        for code in self._local:
            mon.set_local_events(tool, code, 0)
        self._local.clear()
        mon.set_events(tool, 0)
        for event in (E.PY_START, E.PY_RESUME, E.LINE, E.PY_RETURN, E.PY_YIELD, E.PY_UNWIND):
            mon.register_callback(tool, event, None)
        mon.free_tool_id(tool)
        self.tool = None
        self._line_callback = None

    def refresh(self) -> None:
        """Bring enabled events in line with the breakpoints and stepping threads."""
        core = self.core
        steps = list(core.steps.values())
        if not core.breaks and not steps:
            if self.tool is not None:
                self._release()
            return
        if self.tool is None:
            self._acquire()
        events = E.PY_START | E.PY_RESUME
        if any(st.mode in ("step", "user") for st in steps):
            events |= E.LINE
        if any(st.frame is not None for st in steps):
            events |= E.PY_UNWIND
        mon.set_events(self.tool, events)
        self._choose_line_callback(bool(steps))

        wanted: dict[types.CodeType, int] = {}
        candidates = set(self._local)
        for top in sys._current_frames().values():
            frame: types.FrameType | None = top
            while frame is not None:
                candidates.add(frame.f_code)
                frame = frame.f_back
        for code in candidates:
            if core.code_wanted(code):
                wanted[code] = E.LINE
        for st in steps:
            if st.code is not None:
                wanted[st.code] = wanted.get(st.code, 0) | E.LINE
            if st.frame is not None:
                code = st.frame.f_code
                wanted[code] = wanted.get(code, 0) | _LOCAL_STEP
        for code in set(self._local) - set(wanted):
            mon.set_local_events(self.tool, code, 0)
        for code, ev in wanted.items():
            if self._local.get(code) != ev:
                mon.set_local_events(self.tool, code, ev)
        self._local = wanted
        mon.restart_events()

    def _choose_line_callback(self, stepping: bool) -> None:
        """C decides breakpoint lines while nobody steps; Python when someone does."""
        hook = fastpath.hook
        callback: object = self._on_line
        self.core.claim_fast_path()
        if hook is not None and not stepping:
            callback = hook.monitor_line
        if callback is not self._line_callback:
            mon.register_callback(self.tool, E.LINE, callback)
            self._line_callback = callback

    # -------------------------------------------------------- callbacks
    def _on_start(self, code: types.CodeType, offset: int) -> object:
        if code not in self._local and self.core.code_wanted(code):
            self._local[code] = E.LINE
            mon.set_local_events(self.tool, code, E.LINE)
        return DISABLE

    def _on_line(self, code: types.CodeType, line: int) -> object:
        core = self.core
        if not core.steps:
            lines = core.breaks.lines_in(code.co_filename)
            if not lines or line not in lines:
                # Safe to disable: no thread is stepping, and restart_events()
                # re-arms this line when that changes.
                return DISABLE
            core.on_break_line(sys._getframe(1))
            return None
        core.on_line(sys._getframe(1), line)
        return None

    def _on_return(self, code: types.CodeType, offset: int, value: object) -> None:
        if self.core.steps:
            self.core.on_return(sys._getframe(1), value)

    def _on_yield(self, code: types.CodeType, offset: int, value: object) -> None:
        if self.core.steps:
            self.core.on_return(sys._getframe(1), value, is_yield=True)

    def _on_unwind(self, code: types.CodeType, offset: int, exc: BaseException) -> None:
        if self.core.steps:
            self.core.on_return(sys._getframe(1), None)


__all__ = ["MonitoringBackend"]
