"""Running a program under the debugger (what `truestack debug` does)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from types import FrameType

from ..own_files import is_own_file
from ..target import Target, exit_code_of, load_target
from . import api
from .core import DebuggerQuit
from .shell import ConsoleDebugger


def run(target: Target, stop: bool = True, post_mortem: bool = True, shell: str | None = None) -> int:
    """Run `target` like python would, with breakpoint() landing in truestack."""
    debugger = ConsoleDebugger(shell=shell)
    api.install(debugger)
    old_hook = sys.breakpointhook
    sys.breakpointhook = api.breakpoint
    old_sigint = None
    if threading.current_thread() is threading.main_thread():
        old_sigint = signal.signal(signal.SIGINT, _sigint_handler(debugger))
    code, globs = load_target(target)
    if stop:
        debugger.set_entry(code)
    status = 0
    try:
        exec(code, globs)
    except DebuggerQuit:
        status = 0
    except SystemExit as exc:
        status = exit_code_of(exc)
    except BaseException as exc:
        if not debugger.quitting:
            debugger.shutdown()
            _print_traceback(exc)
            status = 130 if isinstance(exc, KeyboardInterrupt) else 1
            if post_mortem and exc.__traceback__ is not None:
                debugger.post_mortem(exc.__traceback__, exc)
    finally:
        debugger.shutdown()
        sys.breakpointhook = old_hook
        if old_sigint is not None:
            signal.signal(signal.SIGINT, old_sigint)
    if debugger.quitting:
        # Quit means quit: don't wait for the program's other threads.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


def _sigint_handler(debugger: ConsoleDebugger) -> Callable[[int, FrameType | None], None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        if getattr(debugger._tls, "busy", False) or debugger.quitting:
            raise KeyboardInterrupt  # in the shell: cancel the line being typed
        debugger.message("\nInterrupted: stopping at the next line")
        debugger.interrupt()

    return handler


def _print_traceback(exc: BaseException) -> None:
    tb = exc.__traceback__
    while tb is not None and is_own_file(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)
    sys.stderr.flush()
