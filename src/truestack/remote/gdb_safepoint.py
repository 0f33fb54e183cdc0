"""Run by gdb's own Python (`gdb -batch -x` this file), never imported by truestack.

Loads the attach agent into process TRUESTACK_GDB_PID with `dlopen`, called
in a thread stopped where that cannot deadlock. A thread ptrace stops at an
arbitrary instruction may be inside `malloc` holding its arena's lock, or
inside the dynamic loader, `pthread_create` or `fork`; `dlopen` and the
agent's `pthread_create` take those same locks in the same thread and would
wait forever, and the target with them (a tight `bytearray` loop hung on
about one attach in five when injected at whatever instruction it was at).

So every thread's backtrace is read first, and the call goes to a thread none
of whose frames is in those parts of the C library. When none qualifies,
gdb detaches, lets the process run 10 ms, and looks again, for at most
TRUESTACK_GDB_WINDOW seconds. No breakpoint is ever written into the target:
if gdb itself dies, the kernel detaches and the target runs on untouched.

Prints one line for the caller: `TRUESTACK-INJECT <ok|failed|refused|unsafe> <detail>`.
"""

from __future__ import annotations

import os
import sys
import time

import gdb  # type: ignore[import-untyped,import-not-found,unused-ignore]  # gdb's own module

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gdb's Python knows nothing of truestack
from safepoint_names import PROCESS_LOCK_PREFIXES, bare, holds  # type: ignore[import-not-found]

_PID = int(os.environ["TRUESTACK_GDB_PID"])
_AGENT = os.environ["TRUESTACK_GDB_AGENT"]
_WINDOW_S = float(os.environ.get("TRUESTACK_GDB_WINDOW", "5"))
_RETRY_S = 0.01
_MAX_FRAMES = 256


def _say(kind: str, detail: str) -> None:
    print(f"TRUESTACK-INJECT {kind} {' '.join(detail.split())}", flush=True)


def _frame_names(thread: object) -> list[str] | None:
    """Its function names, innermost first; None when its stack cannot be read."""
    thread.switch()  # type: ignore[attr-defined]
    names: list[str] = []
    try:
        frame = gdb.newest_frame()
        while frame is not None and len(names) < _MAX_FRAMES:
            name = frame.name()
            if name:
                names.append(bare(name))
            frame = frame.older()
    except gdb.error:
        return None
    return names


def _safe_thread() -> tuple[object | None, str]:
    """A thread where dlopen can be called now, or None and why not."""
    candidate = None
    for thread in sorted(gdb.selected_inferior().threads(), key=lambda t: t.num):
        names = _frame_names(thread)
        if names is None:
            continue  # not a place to call into; says nothing of the others
        allocator, process_lock = holds(names)
        if process_lock:
            inside = next(n for n in names if n.startswith(PROCESS_LOCK_PREFIXES))
            return None, f"thread {thread.ptid[1]} is inside {inside}"
        if candidate is None and not allocator:
            candidate = thread
    return candidate, "every thread was inside malloc or had an unreadable stack"


def _load_agent() -> None:
    handle = int(gdb.parse_and_eval(f'(void *)dlopen("{_AGENT}", 2)'))  # RTLD_NOW
    if handle:
        _say("ok", hex(handle))
        return
    try:
        why = gdb.parse_and_eval("(char *)dlerror()").string()
    except gdb.error as exc:
        why = str(exc)
    _say("failed", f"dlopen: {why}")


def main() -> None:
    for command in (
        "set confirm off",
        "set pagination off",
        "set print thread-events off",
        "handle all nostop noprint pass",
    ):  # a sampler's SIGPROFs, the program's own signals
        gdb.execute(command, to_string=True)
    deadline = time.monotonic() + _WINDOW_S
    looks = 0
    while True:
        try:
            gdb.execute(f"attach {_PID}", to_string=True)
        except gdb.error as exc:
            _say("refused", str(exc))
            return
        looks += 1
        try:
            thread, why = _safe_thread()
            if thread is not None:
                thread.switch()  # type: ignore[attr-defined]
                _load_agent()
                return
        except gdb.error as exc:
            _say("failed", str(exc))
            return
        finally:
            gdb.execute("detach", to_string=True)
        if time.monotonic() > deadline:
            _say("unsafe", f"no safe point in {_WINDOW_S:g} s ({looks} looks; last: {why})")
            return
        time.sleep(_RETRY_S)


main()
