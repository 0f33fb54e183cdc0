"""The console front end: a Python REPL in the stopped frame.

`ConsoleDebugger` implements the engine's hooks for a terminal. All output
goes through `message`/`error`, so another front end (remote, GUI) can
subclass it and only replace I/O.
"""

from __future__ import annotations

import builtins
import codeop
import contextlib
import linecache
import os
import pprint
import re
import sys
import traceback
import types
from typing import TYPE_CHECKING, Any

from ..own_files import is_own_file
from .commands import parse, split_break_arg
from .core import Debugger, Stop
from .frame_eval import run_in_frame
from .helpers import Helpers
from .source import color_wanted, format_lines

if TYPE_CHECKING:
    from .ipython_shell import IPythonRepl


class ConsoleDebugger(Debugger):
    prompt = "(ts) "
    continuation = "...  "
    context_lines = (2, 2)

    def __init__(self, stdin=None, stdout=None, shell: str | None = None) -> None:
        super().__init__()
        # "python" (built in) or "ipython"; TRUESTACK_SHELL covers breakpoint()/set_trace() users.
        self.shell_name = shell or os.environ.get("TRUESTACK_SHELL", "python")
        self._ipython: IPythonRepl | None = None
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.color = color_wanted(self.stdout)
        self.helpers = Helpers(self)
        self.scratch: dict[str, Any] = {}
        self.displays: list[str] = []
        self.stack: list[tuple[types.FrameType, int]] = []
        self.index = 0
        self._resume: tuple[str, object] | None = None
        self._post_mortem = False
        self._readline_tried = False

    # ------------------------------------------------------------ output
    def message(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    @property
    def current_frame(self) -> types.FrameType | None:
        return self.stack[self.index][0] if self.stack else None

    # ------------------------------------------------------------- hooks
    def user_line(self, frame: types.FrameType, stop: Stop) -> None:
        self._post_mortem = False
        self._set_stack([(f, f.f_lineno) for f in _callers(frame)])
        self._announce(stop)
        self._repl()
        self._apply_resume()

    def user_exception(self, tb: types.TracebackType, exc: BaseException) -> None:
        self._post_mortem = True
        entries = []
        walk: types.TracebackType | None = tb
        while walk is not None:
            entries.append((walk.tb_frame, walk.tb_lineno))
            walk = walk.tb_next
        self._set_stack(entries)
        if not self.stack:
            return
        self.message("Uncaught exception: entering post-mortem debugging (c or q to finish)")
        self._announce(Stop("post-mortem", exception=exc))
        self._repl()
        self._resume = None

    def _set_stack(self, entries) -> None:
        entries = list(entries)
        # Frames outside truestack's runner (runpy, our CLI) are not the user's program.
        is_ours = [is_own_file(f.f_code.co_filename) for f, _line in entries]
        if any(is_ours):
            start = is_ours.index(True)
            while start < len(entries) and is_ours[start]:
                start += 1
            entries = entries[start:]
        self.stack = [(f, line) for f, line in entries if not is_own_file(f.f_code.co_filename)]
        self.index = len(self.stack) - 1
        self._resume = None

    def _announce(self, stop: Stop) -> None:
        if stop.returned is not None:
            name, value = stop.returned
            self.message(f"{name}() returned {_safe_repr(value)}")
        reason = {
            "breakpoint": lambda: (
                f"breakpoint {stop.breakpoint.id}, hit {stop.hit}" if stop.breakpoint else "breakpoint"
            ),
            "post-mortem": lambda: f"post-mortem: {type(stop.exception).__name__}: {stop.exception}",
        }.get(stop.reason, lambda: stop.reason)()
        if stop.thread.name != "MainThread":
            reason += f", thread {stop.thread.name!r}"
        self._show_frame(reason)
        self.show_displays(self.displays)

    def _show_frame(self, reason: str = "") -> None:
        frame, line = self.stack[self.index]
        suffix = f"  [{reason}]" if reason else ""
        self.message(f"> {frame.f_code.co_filename}:{line} in {frame.f_code.co_name}(){suffix}")
        before, after = self.context_lines
        self.show_source(frame.f_code.co_filename, line - before, line + after, line, frame)

    def show_source(self, filename: str, first: int, last: int, current: int | None, frame) -> None:
        lines = self.breaks.lines_in(filename) or {}
        breaks = {line for line, bps in lines.items() if any(bp.enabled for bp in bps)}
        for text in format_lines(
            filename,
            first,
            last,
            current,
            breaks,
            self.color,
            module_globals=frame.f_globals if frame is not None else None,
        ):
            self.message(text)

    def source_line(self, frame: types.FrameType, line: int) -> str:
        return linecache.getline(frame.f_code.co_filename, line, frame.f_globals).strip()

    def show_displays(self, exprs) -> None:
        for expr in exprs:
            try:
                value = _safe_repr(self._eval(expr))
            except Exception as exc:
                value = f"<{type(exc).__name__}: {exc}>"
            self.message(f"display {expr}: {value}")

    def select(self, index: int) -> None:
        if not 0 <= index < len(self.stack):
            self.error("oldest frame" if index < 0 else "newest frame")
            return
        self.index = index
        self._show_frame()

    # -------------------------------------------------------------- REPL
    def resume(self, kind: str, arg: object = None) -> None:
        if self._post_mortem and kind not in ("cont", "quit"):
            self.error("post-mortem: the program has ended; use c to leave or q to quit")
            return
        self._resume = (kind, arg)

    def _apply_resume(self) -> None:
        kind, arg = self._resume or ("cont", None)
        frame, line = self.stack[self.index] if self.stack else (None, 0)
        if kind == "step":
            self.set_step()
        elif kind == "next" and frame is not None:
            self.set_next(frame)
        elif kind == "step_out" and frame is not None:
            self.set_return(frame)
        elif kind == "until" and frame is not None:
            self.set_until(frame, int(str(arg)) if arg is not None else line + 1)
        elif kind == "quit":
            self.set_quit()
        else:
            self.set_continue()
        self._resume = None
        self.stack = []

    def _read(self, prompt: str) -> str:
        if self.stdin is sys.stdin and sys.stdin.isatty():
            if not self._readline_tried:
                self._readline_tried = True
                with contextlib.suppress(ImportError):
                    import readline  # noqa: F401 - line editing and history for input()
            return input(prompt)
        self.stdout.write(prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    def _repl(self) -> None:
        if self.shell_name == "ipython":
            if self._ipython is None:
                from . import ipython_shell

                if ipython_shell.available():
                    self._ipython = ipython_shell.IPythonRepl(self)
                else:
                    self.error("IPython is not installed; using the plain shell")
                    self.shell_name = "python"
            if self._ipython is not None:
                self._ipython.run()
                return
        buffer: list[str] = []
        while self._resume is None:
            try:
                line = self._read(self.continuation if buffer else self.prompt)
            except EOFError:
                self.message("")
                self.resume("quit")
                break
            except KeyboardInterrupt:
                self.message("\nKeyboardInterrupt")
                buffer.clear()
                continue
            if not buffer:
                command = parse(line)
                if command is not None:
                    self._run_command(*command)
                    continue
                if line.lstrip().startswith("!"):
                    line = line.lstrip()[1:]
                if not line.strip():
                    continue
            buffer.append(line)
            try:
                code = codeop.compile_command("\n".join(buffer), "<debug>", "single")
            except (SyntaxError, OverflowError, ValueError) as exc:
                buffer.clear()
                self._show_exception(exc)
                continue
            if code is None:
                continue
            buffer.clear()
            self._run_python(code)

    def _run_python(self, code: types.CodeType) -> object:
        if self.current_frame is None:
            return None
        # Expression results go through message() too, so a front end sees all output.
        saved_hook = sys.displayhook
        sys.displayhook = self._displayhook
        try:
            return run_in_frame(code, self.current_frame, self.helpers.namespace(), self.scratch)
        except BaseException as exc:
            self._show_exception(exc)
            return None
        finally:
            sys.displayhook = saved_hook

    def _displayhook(self, value: object) -> None:
        if value is None:
            return
        builtins._ = value  # type: ignore[attr-defined]
        self.message(_safe_repr(value))

    def _eval(self, expr: str) -> object:
        code = compile(expr, "<debug>", "eval")
        frame = self.current_frame
        if frame is None:
            raise RuntimeError("no frame to evaluate in")
        return run_in_frame(code, frame, self.helpers.namespace(), self.scratch)

    def _show_exception(self, exc: BaseException) -> None:
        tb = exc.__traceback__
        while tb is not None and is_own_file(tb.tb_frame.f_code.co_filename):
            tb = tb.tb_next
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        self.message(text.rstrip())

    # ---------------------------------------------------------- commands
    def _run_command(self, name: str, arg: str) -> None:
        h = self.helpers
        simple = {
            "cont": h.cont,
            "step": h.step,
            "next": h.next,
            "step_out": h.step_out,
            "where": h.where,
            "longlist": h.show_function,
            "quit": h.exit,
        }
        if name in simple:
            simple[name]()
        elif name == "until":
            h.until(int(arg) if arg else None)
        elif name in ("break", "tbreak"):
            if not arg:
                h.breaks()
            else:
                self._break_command(arg, temporary=name == "tbreak")
        elif name == "clear":
            if not arg:
                self.clear_all_breaks()
                self.message("Deleted all breakpoints")
            for bp_id in arg.split():
                h.remove_break(int(bp_id))
        elif name in ("disable", "enable"):
            for bp_id in arg.split():
                getattr(h, name)(int(bp_id))
        elif name in ("up", "down"):
            getattr(h, name)(int(arg) if arg else 1)
        elif name == "list":
            self._list_command(arg)
        elif name in ("p", "pp"):
            try:
                value = self._eval(arg)
            except BaseException as exc:
                self.message(f"*** {type(exc).__name__}: {exc}")
                return
            self.message(pprint.pformat(value) if name == "pp" else _safe_repr(value))
        elif name == "display":
            h.display(arg or None)
        elif name == "undisplay":
            h.undisplay(int(arg) if arg else None)
        elif name == "skip_breaks":
            h.skip_breaks(int(arg))
        elif name == "ignore":
            bp_id, _, count = arg.partition(" ")
            h.ignore(int(bp_id), int(count.strip() or 0))
        elif name == "condition":
            bp_id, _, cond = arg.partition(" ")
            h.condition(int(bp_id), cond.strip() or None)
        elif name == "help":
            h.help(getattr(h, arg) if arg in h.NAMES else None)

    def _break_command(self, arg: str, temporary: bool) -> None:
        location, cond = split_break_arg(arg)
        match = re.fullmatch(r"(.+):(\d+)", location)
        if match:
            self.helpers.break_at_line(match.group(1), int(match.group(2)), cond, temporary)
        elif location.isdigit():
            self.helpers.break_at_line(None, int(location), cond, temporary)
        else:
            self.helpers.break_at_func(location, None, cond, temporary)

    def _list_command(self, arg: str) -> None:
        if not arg or arg == ".":
            self.helpers.context()
            return
        frame, line = self.stack[self.index]
        if "," in arg:
            first, last = (int(part) for part in arg.split(","))
        else:
            first, last = int(arg) - 5, int(arg) + 5
        self.show_source(frame.f_code.co_filename, first, last, line, frame)


def _callers(frame: types.FrameType | None):
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return reversed(frames)


def _safe_repr(value: object) -> str:
    try:
        return repr(value)
    except Exception as exc:
        return f"<repr failed: {type(exc).__name__}: {exc}>"
