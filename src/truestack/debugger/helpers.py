"""Functions available in the debugger shell. Their docstrings are what
`help()` shows; the pdb-style short commands call the same functions."""

from __future__ import annotations

import builtins
import functools
import inspect
import os
from typing import Any

from .breakpoints import BreakpointError


def _reports_errors(method):
    """A mistake in a helper call is one '***' line, not a traceback."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except BreakpointError as exc:
            self.shell.error(str(exc))
            return None

    return wrapper


class Helpers:
    NAMES = (
        "cont",
        "step",
        "next",
        "step_out",
        "until",
        "break_at_line",
        "break_at_func",
        "remove_break",
        "breaks",
        "disable",
        "enable",
        "where",
        "up",
        "down",
        "frame",
        "context",
        "show_function",
        "display",
        "undisplay",
        "skip_breaks",
        "ignore",
        "condition",
        "exit",
        "help",
    )

    def __init__(self, shell) -> None:
        self.shell = shell

    def namespace(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.NAMES}

    # ------------------------------------------------------------ running
    def cont(self) -> None:
        """Continue running until the next breakpoint (short: c)."""
        self.shell.resume("cont")

    def step(self) -> None:
        """Run to the next line, stepping into calls (short: s)."""
        self.shell.resume("step")

    def next(self, *args):
        """Run to the next line in this function, stepping over calls (short: n).

        With arguments it is the builtin next(iterator[, default])."""
        if args:
            return builtins.next(*args)
        self.shell.resume("next")
        return None

    def step_out(self) -> None:
        """Run until the current function returns; stop in its caller (short: r)."""
        self.shell.resume("step_out")

    def until(self, line: int | None = None) -> None:
        """Run until a line >= `line` in this frame (default: a line after the
        current one, to get out of a loop), or until the frame returns (short: unt)."""
        self.shell.resume("until", line)

    def exit(self) -> None:
        """Quit: end the debugged program (short: q)."""
        self.shell.resume("quit")

    # -------------------------------------------------------- breakpoints
    @_reports_errors
    def break_at_line(
        self, file: str | None = None, line: int | None = None, cond: str | None = None, temporary: bool = False
    ):
        """Set a breakpoint at `file`:`line` (file defaults to the current one).

        `cond` is a Python expression evaluated in the frame; the breakpoint
        only stops when it is true. A line without code moves to the next line
        that has code. `temporary=True` removes the breakpoint at its first hit.
        Returns the breakpoint id."""
        if line is None and isinstance(file, int):
            file, line = None, file
        if line is None:
            raise BreakpointError("break_at_line needs a line number")
        if file is None:
            file = self.shell.current_frame.f_code.co_filename
        return self.shell.set_break(file, int(line), cond, temporary).id

    @_reports_errors
    def break_at_func(self, func, line: int | None = None, cond: str | None = None, temporary: bool = False):
        """Set a breakpoint in a function: a function object, 'module:qualname',
        or a name visible in the current frame. Without `line` it stops at the
        first line of the body. Returns the breakpoint id."""
        frame = self.shell.current_frame
        namespace = {**frame.f_globals, **frame.f_locals} if frame is not None else {}
        filename = frame.f_code.co_filename if frame is not None else None
        return self.shell.set_func_break(func, line, cond, temporary, namespace=namespace, filename=filename).id

    @_reports_errors
    def remove_break(self, bp_id: int) -> None:
        """Remove breakpoint `bp_id` (short: cl N)."""
        bp = self.shell.clear_break(bp_id)
        self.shell.message(f"Deleted breakpoint {bp.id} at {bp.file}:{bp.line}")

    def breaks(self) -> None:
        """List breakpoints with their conditions and hit counts (short: b)."""
        bps = self.shell.breaks.all()
        if not bps:
            self.shell.message("No breakpoints.")
        for bp in bps:
            state = "" if bp.enabled else " [disabled]"
            self.shell.message(f"{bp.describe()}{state}, hit {bp.hits} time{'s' * (bp.hits != 1)}")

    @_reports_errors
    def disable(self, bp_id: int) -> None:
        """Disable breakpoint `bp_id` without removing it."""
        self.shell.breaks.get(bp_id).enabled = False
        self.shell.message(f"Disabled breakpoint {bp_id}")

    @_reports_errors
    def enable(self, bp_id: int) -> None:
        """Enable breakpoint `bp_id` again."""
        self.shell.breaks.get(bp_id).enabled = True
        self.shell.message(f"Enabled breakpoint {bp_id}")

    @_reports_errors
    def ignore(self, bp_id: int, count: int = 0) -> None:
        """Skip the next `count` stops of breakpoint `bp_id` (as pdb's ignore);
        only reaches where its condition holds count down."""
        bp = self.shell.set_ignore(bp_id, count)
        if bp.ignore:
            self.shell.message(f"Will ignore next {bp.ignore} crossing{'s' * (bp.ignore != 1)} of breakpoint {bp.id}.")
        else:
            self.shell.message(f"Breakpoint {bp.id} will stop the next time it is reached.")

    @_reports_errors
    def condition(self, bp_id: int, cond: str | None = None) -> None:
        """Set breakpoint `bp_id`'s condition, or make it unconditional (no `cond`)."""
        bp = self.shell.set_condition(bp_id, cond or None)
        if bp.cond:
            self.shell.message(f"New condition set for breakpoint {bp.id}: {bp.cond}")
        else:
            self.shell.message(f"Breakpoint {bp.id} is now unconditional.")

    def skip_breaks(self, count: int) -> None:
        """Do not stop at the next `count` breakpoint hits."""
        self.shell.skip_count = int(count)
        self.shell.message(f"Will ignore the next {count} breakpoint hits")

    # ------------------------------------------------------------- stack
    def where(self) -> None:
        """Print the stack, outermost first; '>' marks the selected frame (short: w).
        Frame numbers count from the innermost (#0)."""
        shell = self.shell
        last = len(shell.stack) - 1
        for index, (frame, line) in enumerate(shell.stack):
            marker = ">" if index == shell.index else " "
            code = frame.f_code
            shell.message(f"{marker} #{last - index} {code.co_filename}:{line} in {code.co_name}()")
            text = shell.source_line(frame, line)
            if text:
                shell.message(f"        {text}")

    def up(self, count: int = 1) -> None:
        """Select the calling frame, `count` levels up (short: u)."""
        self.shell.select(self.shell.index - int(count))

    def down(self, count: int = 1) -> None:
        """Select the called frame, `count` levels down (short: d)."""
        self.shell.select(self.shell.index + int(count))

    def frame(self, number: int = 0) -> None:
        """Select frame #`number` as numbered by where() (0 is the innermost)."""
        self.shell.select(len(self.shell.stack) - 1 - int(number))

    # ------------------------------------------------------------- source
    def context(self, before: int = 5, after: int = 5) -> None:
        """Show the source around the current line, which is marked '->'
        ('B' marks breakpoints; highlighted with pygments if installed) (short: l)."""
        shell = self.shell
        frame, line = shell.stack[shell.index]
        shell.show_source(frame.f_code.co_filename, line - int(before), line + int(after), line, frame)

    def show_function(self, func=None) -> None:
        """Show the source of a function (default: the current one) (short: ll)."""
        shell = self.shell
        frame, line = shell.stack[shell.index]
        if func is None:
            filename = frame.f_code.co_filename
            try:
                lines, start = inspect.getsourcelines(frame.f_code)
            except (OSError, TypeError):
                shell.error("source not available")
                return
            if frame.f_code.co_name == "<module>":
                start = 1
            shell.show_source(filename, start, start + len(lines) - 1, line, frame)
            return
        target = inspect.unwrap(func)
        target = getattr(target, "__func__", target)
        try:
            lines, start = inspect.getsourcelines(target)
            filename = inspect.getsourcefile(target) or ""
        except (OSError, TypeError) as exc:
            shell.error(f"no source for {func!r}: {exc}")
            return
        current = line if os.path.abspath(filename) == os.path.abspath(frame.f_code.co_filename) else None
        shell.show_source(filename, start, start + len(lines) - 1, current, frame)

    def display(self, expr: str | None = None) -> None:
        """Watch `expr`: it is evaluated and printed at every stop. Without an
        argument, list the watched expressions."""
        shell = self.shell
        if expr is None:
            for number, watched in enumerate(shell.displays, 1):
                shell.message(f"{number}: {watched}")
            return
        shell.displays.append(expr)
        shell.show_displays([expr])

    def undisplay(self, number: int | None = None) -> None:
        """Stop watching expression `number` (all of them without an argument)."""
        if number is None:
            self.shell.displays.clear()
        elif 1 <= int(number) <= len(self.shell.displays):
            del self.shell.displays[int(number) - 1]
        else:
            self.shell.error(f"no display number {number}")

    def help(self, obj=None) -> None:
        """help() lists the helpers and short commands; help(x) shows x's documentation."""
        shell = self.shell
        if obj is None:
            from .commands import HELP

            shell.message("Helpers (Python functions; help(name) for details):")
            for name in self.NAMES:
                method = getattr(self, name)
                first = (inspect.getdoc(method) or "").splitlines()[0]
                shell.message(f"  {name}{inspect.signature(method)}\n      {first}")
            shell.message(HELP.rstrip())
            return
        if inspect.ismethod(obj) and obj.__self__ is self:
            shell.message(f"{obj.__name__}{inspect.signature(obj)}\n\n{inspect.getdoc(obj)}")
            return
        import pydoc

        shell.message(pydoc.plain(pydoc.render_doc(obj, title="Help on %s")))


__all__ = ["Helpers"]
