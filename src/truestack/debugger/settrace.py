"""settrace backend (3.10/3.11, or forced with TRUESTACK_DEBUG_BACKEND=settrace).

While only breakpoints exist, no Python trace function is installed at all:
truestack._debughook installs a PEP 523 frame-evaluation hook that looks up
each frame's code object in its per-code record (co_extra, filled once per
code object by BreakpointTable.sites_for) and switches the thread's C trace
function on only while a frame of breakpoint-holding code runs. Line events
of that frame go to C, which decides the breakpoint (counts, simple
conditions) and calls Python only to stop. Code without breakpoints runs
untraced; the only cost left is the hook itself (one record probe per call,
and on 3.11 the loss of inlined Python-to-Python calls).

Why C tracing per frame rather than the hook calling a Python callback or
setting f_trace: a Python call per frame of breakpoint code (the hot
function, in the bad case) costs as much as settrace did; C line events
filtered by line cost little, and the stop itself is rare.

Stepping (`step`, `next`, `return`, `until`, the entry stop) still uses a
Python trace function in the stepping thread, as before: its global
function answers 'call' events with the local tracer for code that holds a
breakpoint or a frame the step waits for. Without the C module (the
debugger says so), or when another tool already has a frame-evaluation hook,
everything runs that way, with threading.settrace for new threads.
"""

from __future__ import annotations

import dis
import sys
import threading
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import entry_probe, fastpath
from .breakpoints import canonic, code_lines

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
        self.installed = False  # our Python trace function is set
        # The frame-evaluation hook exists up to 3.11 (3.12+ forced onto this backend goes without)
        self.hook = fastpath.hook if fastpath.hook is not None and fastpath.hook.HAS_HOOK else None
        self._wanted: dict[types.CodeType, bool] = {}
        hook = self.hook
        self.probes = (
            entry_probe.Probes(hook.entered, hook.swap_const) if hook is not None and entry_probe.supported() else None
        )
        if self.probes is not None and hook is not None:
            hook.on_probe_armed(self.probes.clear)  # the hook sees everything from then on
        self._local = self._make_local()
        self._global = self._make_global()

    def refresh(self) -> None:
        core = self.core
        self._wanted.clear()
        probes = self.probes
        if not core.breaks and not core.steps:
            self._python_trace(False)
            if self.hook is not None:
                self.hook.uninstall()
            if probes is not None:
                probes.clear()
            return
        hook = self.hook
        core.claim_fast_path()
        if hook is None or not hook.install():  # no C module, or another tool's hook is in place
            if probes is not None:
                probes.clear()
            self._python_trace(True, all_threads=True)
            return
        if probes is not None:
            targets = None if core.steps else self._probe_targets(probes)
            probes.redirect(targets or ())
            breaks = core.breaks
            if targets is None:
                probes.watch_imports()
            else:
                probes.watch_imports(lambda filename: bool(breaks.lines_in(filename)), breaks.code_has_breaks)
                # 3.11: no hook until code holding a breakpoint starts (entry_probe.py).
                self._python_trace(False)
                hook.uninstall()
                return
        if threading.get_ident() in core.steps:
            self._python_trace(True)
            return
        self._python_trace(False)
        # The hook sees a frame when it starts: frames already running code
        # that now holds a breakpoint need their thread traced from here on.
        running = []
        for tid, top in sys._current_frames().items():
            if tid in core.steps:
                continue
            frame: types.FrameType | None = top
            while frame is not None:
                if core.breaks.code_has_breaks(frame.f_code):
                    running.append(tid)
                    break
                frame = frame.f_back
        if running:
            hook.trace_threads(running)

    def _probe_targets(self, probes: entry_probe.Probes) -> list[types.CodeType] | None:
        """The code objects to probe so that every breakpoint is reached, or
        None when probes cannot do it (code holding a breakpoint already runs
        in a frame or a suspended generator): the hook takes those from the start."""
        breaks = self.core.breaks
        running = entry_probe.running_code()
        targets: dict[int, types.CodeType] = {}
        covered: set[tuple[str, int]] = set()
        loaded: set[str] = set()
        for live in entry_probe.live_code().values():
            loaded.add(live.co_filename)
            lines = breaks.lines_in(live.co_filename)
            if not lines:
                continue
            hit = code_lines(live).intersection(lines)
            if not hit:
                continue
            if id(live) in running:
                return None
            code = probes.original(live)
            targets[id(code)] = code
            file = canonic(code.co_filename)
            covered.update((file, line) for line in hit)
        # A breakpoint in a file with no live code waits for its import (the
        # import is probed); one in a loaded file but in no live code would
        # only run in a new compile of it (exec of its source): the hook sees that.
        loaded_files = {canonic(name) for name in loaded}
        if any((bp.file, bp.line) not in covered and bp.file in loaded_files for bp in breaks.all()):
            return None
        return list(targets.values())

    def _python_trace(self, on: bool, all_threads: bool = False) -> None:
        """The Python trace function: in this thread (and new threads when
        there is no hook), hooking frames that already run."""
        core = self.core
        if not on:
            if self.installed:
                if sys.gettrace() is self._global:
                    sys.settrace(None)
                threading.settrace(None)  # type: ignore[arg-type, unused-ignore]  # typeshed <3.12 wants a callable
                self.installed = False
            return
        self.installed = True
        if all_threads:
            threading.settrace(self._global)
        sys.settrace(self._global)
        # Frames already running never see a 'call' event again: hook them directly.
        for tid, top in sys._current_frames().items():
            if not all_threads and tid != threading.get_ident():
                continue
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
                    if lines and frame.f_lineno in lines:
                        on_break_line(frame)
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
