"""The debugger engine: breakpoints, stepping state and stops, with no UI.

Backends (sys.monitoring or settrace) report line/return events; the engine
decides whether to stop and then calls the bdb/pdb-style hooks
(`user_line`, `user_exception`, `message`, `error`) that a front end
overrides. A front end resumes the program by calling one of the `set_*`
methods from inside `user_line` before returning.
"""

from __future__ import annotations

import inspect
import os
import sys
import sysconfig
import threading
import types
from dataclasses import dataclass, field
from typing import Any

from ..own_files import is_own_file
from . import fastpath
from .breakpoints import (
    Breakpoint,
    BreakpointError,
    BreakpointTable,
    canonic,
    first_body_line,
    resolve_file,
    resolve_function,
)

COROUTINE_FLAGS = inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE | inspect.CO_ASYNC_GENERATOR
_STDLIB_DIRS = tuple({canonic(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})


class DebuggerQuit(SystemExit):
    """Raised in the debugged thread when the user quits; SystemExit so that a
    program run outside `truestack debug` ends quietly too."""


@dataclass
class StepState:
    """What the stopped thread waits for. Modes:
    step  - next line anywhere (truestack's own code excluded)
    user  - next line in the user's code (after leaving a frame into library code)
    next  - next line in `frame`; when it returns, in its caller
    until - a line >= `line` in `frame`, or its caller after it returns
    out   - the caller of `frame`, after it returns
    first - the first line of code object `code` (stop before the program starts)
    """

    mode: str
    frame: types.FrameType | None = None
    code: types.CodeType | None = None
    line: int = 0
    origin: str = ""  # the command that set this up, for the stop message
    returned: tuple[str, Any] | None = None  # (function name, value) once `out` returned


@dataclass
class Stop:
    """Why the program stopped; passed to `user_line`."""

    reason: str  # breakpoint | step | entry | breakpoint() | interrupt | return | post-mortem
    thread: threading.Thread = field(default_factory=threading.current_thread)
    breakpoint: Breakpoint | None = None
    hit: int = 0  # the breakpoint's hit count at this stop
    returned: tuple[str, Any] | None = None
    exception: BaseException | None = None
    note: str = ""


class Debugger:
    """Engine plus hooks; see the module docstring."""

    def __init__(self) -> None:
        self.breaks = BreakpointTable()
        self.steps: dict[int, StepState] = {}
        self.quitting = False
        self.skip_count = 0
        self._shell_lock = threading.Lock()
        self._tls = threading.local()
        self._skip_cache: dict[str, tuple[bool, bool]] = {}
        from .backends import make_backend

        self.backend = make_backend(self)

    # ----------------------------------------------------------- hooks
    def user_line(self, frame: types.FrameType, stop: Stop) -> None:
        """Called in the stopped thread; resume by calling a set_* method."""

    def user_exception(self, tb: types.TracebackType, exc: BaseException) -> None:
        """Post-mortem: called with the traceback of an uncaught exception."""

    def message(self, text: str) -> None:
        print(text)

    def error(self, text: str) -> None:
        self.message(f"*** {text}")

    # ------------------------------------------------------ breakpoints
    def set_break(
        self, file: str, line: int, cond: str | None = None, temporary: bool = False, func: str | None = None
    ) -> Breakpoint:
        """Raises BreakpointError for an unknown file or a line past the code."""
        bp, moved_from = self.breaks.add(resolve_file(file), int(line), cond, temporary, func)
        note = f" (line {moved_from} has no code; moved to line {bp.line})" if moved_from else ""
        self.message(bp.describe() + note)
        if fastpath.UNAVAILABLE and not fastpath.said_unavailable:
            fastpath.said_unavailable = True
            self.message(fastpath.UNAVAILABLE)
        self.backend.refresh()
        return bp

    def set_func_break(
        self,
        func: object,
        line: int | None = None,
        cond: str | None = None,
        temporary: bool = False,
        namespace: dict[str, Any] | None = None,
        filename: str | None = None,
    ) -> Breakpoint:
        code = resolve_function(func, namespace, filename)
        if line is None:
            line = first_body_line(code)
        label = getattr(code, "co_qualname", code.co_name)
        return self.set_break(code.co_filename, line, cond, temporary, func=label)

    def clear_break(self, bp_id: int) -> Breakpoint:
        bp = self.breaks.remove(bp_id)
        self.backend.refresh()
        return bp

    def clear_all_breaks(self) -> None:
        self.breaks.clear()
        self.backend.refresh()

    def set_condition(self, bp_id: int, cond: str | None) -> Breakpoint:
        """pdb's `condition N [COND]`: replace or (None) remove the condition."""
        bp = self.breaks.set_condition(bp_id, cond)
        self.backend.refresh()
        return bp

    def set_ignore(self, bp_id: int, count: int) -> Breakpoint:
        """pdb's `ignore N COUNT`: the next COUNT stops of breakpoint N are skipped."""
        bp = self.breaks.get(bp_id)
        bp.ignore = count
        return bp

    def _decide(self, frame: types.FrameType) -> tuple[Breakpoint, bool, int] | None:
        """(breakpoint, delete_ok, hit number) that stops `frame` at its current line, if any (see fastpath)."""
        if fastpath.hook is not None:
            self.claim_fast_path()
            verdict: tuple[Breakpoint, bool, int] | None = fastpath.hook.check(frame)
            return verdict
        lines = self.breaks.lines_in(frame.f_code.co_filename)
        candidates = lines.get(frame.f_lineno) if lines else None
        if not candidates:
            return None
        return fastpath.decide_in_python(frame, [(bp.state, bp) for bp in candidates], self._report_condition_error)

    def _report_condition_error(self, bp: Breakpoint, exc: BaseException) -> None:
        self.error(f"error in condition of breakpoint {bp.id} ({bp.cond}): {type(exc).__name__}: {exc}")

    def stop_at_break(self, frame: types.FrameType, bp: Breakpoint, delete_ok: bool, hit: int) -> None:
        """A breakpoint decided to stop (called by the C fast path too); `hit` is
        this stop's own count, since another thread may have counted one since."""
        if self.quitting or getattr(self._tls, "busy", False):
            return
        if self.skip_count > 0:
            self.skip_count -= 1
            return
        if bp.temporary and delete_ok and bp in self.breaks.all():  # not already gone (another thread)
            self.clear_break(bp.id)
            self.message(f"Deleted breakpoint {bp.id} at {bp.file}:{bp.line}")
        self.interaction(frame, Stop("breakpoint", breakpoint=bp, hit=hit))

    def claim_fast_path(self) -> None:
        """Point the C fast path's callbacks at this debugger (one per process
        is active) and make it re-read code records whose breakpoints changed."""
        hook = fastpath.hook
        if hook is None:
            return
        if fastpath.owner is not self:
            disable = sys.monitoring.DISABLE if sys.version_info >= (3, 12) else None  # type: ignore[attr-defined, unused-ignore]
            hook.configure(self.breaks.sites_for, self.stop_at_break, self._report_condition_error, disable)
            fastpath.owner = self
            fastpath.breaks_version = self.breaks.version
        elif fastpath.breaks_version != self.breaks.version:
            hook.invalidate()
            fastpath.breaks_version = self.breaks.version

    # ------------------------------------------------------ filtering
    def is_skipped(self, co_filename: str, user_only: bool) -> bool:
        """Our own frames are never stopped in; `user_only` also skips the stdlib."""
        flags = self._skip_cache.get(co_filename)
        if flags is None:
            name = canonic(co_filename)
            ours = is_own_file(name)
            library = ours or name.startswith(_STDLIB_DIRS) or co_filename.startswith("<frozen")
            flags = self._skip_cache[co_filename] = (ours, library)
        return flags[1] if user_only else flags[0]

    # ------------------------------------------------- backend queries
    def code_wanted(self, code: types.CodeType) -> bool:
        """Does any code object need line events regardless of the thread?"""
        if self.breaks.code_has_breaks(code):
            return True
        return any(st.code is code for st in list(self.steps.values()))

    def frame_wanted(self, frame: types.FrameType, tid: int | None = None) -> bool:
        """Should this frame (of thread `tid`) get line events now?"""
        if self.code_wanted(frame.f_code):
            return True
        st = self.steps.get(threading.get_ident() if tid is None else tid)
        if st is None:
            return False
        if st.mode in ("step", "user"):
            return not self.is_skipped(frame.f_code.co_filename, st.mode == "user")
        return st.frame is frame

    # ------------------------------------------------------- events
    def on_line(self, frame: types.FrameType, line: int) -> None:
        if self.quitting or getattr(self._tls, "busy", False):
            return
        st = self.steps.get(threading.get_ident())
        if st is not None and self._step_reached(st, frame, line):
            if st.origin == "entry":
                stop = Stop("entry")
            else:
                stop = Stop("return" if st.returned else st.origin, returned=st.returned)
                if st.origin == "interrupt":
                    stop = Stop("interrupt")
            self.interaction(frame, stop)
            return
        lines = self.breaks.lines_in(frame.f_code.co_filename)
        if lines and line in lines:
            self.on_break_line(frame)

    def on_break_line(self, frame: types.FrameType) -> None:
        """Backends' path when the line has breakpoints and no thread steps."""
        if self.quitting or getattr(self._tls, "busy", False):
            return
        verdict = self._decide(frame)
        if verdict is not None:
            self.stop_at_break(frame, *verdict)

    def _step_reached(self, st: StepState, frame: types.FrameType, line: int) -> bool:
        mode = st.mode
        if mode == "step":
            return not self.is_skipped(frame.f_code.co_filename, False)
        if mode == "user":
            return not self.is_skipped(frame.f_code.co_filename, True)
        if mode == "first":
            return frame.f_code is st.code
        if mode == "next":
            return frame is st.frame
        if mode == "until":
            return frame is st.frame and line >= st.line
        return False

    def on_return(self, frame: types.FrameType, value: Any, is_yield: bool = False) -> None:
        """A frame returns, yields or unwinds; only matters to a stepping thread."""
        st = self.steps.get(threading.get_ident())
        if st is None or st.frame is not frame or getattr(self._tls, "busy", False):
            return
        if is_yield and frame.f_code.co_flags & COROUTINE_FLAGS:
            return  # an await suspends the coroutine; it resumes in this same frame
        if st.mode == "out":
            st.returned = (frame.f_code.co_name, value)
        back = frame.f_back
        if back is None or self.is_skipped(back.f_code.co_filename, True):
            st.mode, st.frame = "user", None
        else:
            st.mode, st.frame = "next", back
        self.backend.refresh()

    # ------------------------------------------------------- stopping
    def interaction(self, frame: types.FrameType, stop: Stop) -> None:
        """Stop this thread in the front end; one thread at a time."""
        tid = threading.get_ident()
        self._tls.busy = True
        try:
            with self._shell_lock:
                if self.quitting:
                    raise DebuggerQuit(0)
                self.steps.pop(tid, None)
                self.user_line(frame, stop)
        finally:
            self._tls.busy = False
        self._after_resume()

    def post_mortem(self, tb: types.TracebackType, exc: BaseException) -> None:
        self._tls.busy = True
        try:
            with self._shell_lock:
                self.steps.pop(threading.get_ident(), None)
                self.user_exception(tb, exc)
        finally:
            self._tls.busy = False

    def _after_resume(self) -> None:
        if self.quitting:
            self.steps.clear()
            self.breaks.clear()
            self.backend.refresh()
            if threading.current_thread() is not threading.main_thread():
                # A quit in a worker ends the whole program, as it would in the main thread.
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
            raise DebuggerQuit(0)
        self.backend.refresh()

    def set_trace(self, frame: types.FrameType, reason: str = "breakpoint()") -> None:
        """Stop right now in `frame` (used by breakpoint() and set_trace())."""
        if self.quitting or getattr(self._tls, "busy", False):
            return
        self.interaction(frame, Stop(reason))

    # ----------------------------------------------- resuming (front end)
    def _set(self, st: StepState | None) -> None:
        tid = threading.get_ident()
        if st is None:
            self.steps.pop(tid, None)
        else:
            self.steps[tid] = st

    def set_continue(self) -> None:
        self._set(None)

    def set_step(self) -> None:
        self._set(StepState("step", origin="step"))

    def set_next(self, frame: types.FrameType) -> None:
        self._set(StepState("next", frame, origin="next"))

    def set_return(self, frame: types.FrameType) -> None:
        self._set(StepState("out", frame, origin="out"))

    def set_until(self, frame: types.FrameType, line: int) -> None:
        self._set(StepState("until", frame, line=line, origin="until"))

    def set_entry(self, code: types.CodeType) -> None:
        """Stop before the first line of `code` (called before running it)."""
        self._set(StepState("first", code=code, origin="entry"))
        self.backend.refresh()

    def interrupt(self) -> None:
        """Ctrl-C while running: stop at the next line of user code (main thread)."""
        self._set(StepState("user", origin="interrupt"))
        self.backend.refresh()

    def set_quit(self) -> None:
        self.quitting = True

    def shutdown(self) -> None:
        self.steps.clear()
        self.breaks.clear()
        self.backend.refresh()


__all__ = ["BreakpointError", "Debugger", "DebuggerQuit", "StepState", "Stop"]
