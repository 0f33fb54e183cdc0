"""One snapshot of every Python thread of a running process, read from outside.

The target runs on while it is read (it is never stopped). A thread's stack
is walked, resolved (names, lines, locals) and walked again: only when both
walks agree and the walker found nothing suspect is the stack reported as
read; otherwise the read is retried a few times, and a stack that kept
changing (a running thread) is reported flagged, never as fact.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass, field
from typing import Any

from .process import RemoteError, Target, locate, os_error_message, permission_message
from .values import Memory, Unreadable

ATTEMPTS = 5
MAX_THREADS = 4096
PROC_STATES = {
    "R": "running",
    "S": "waiting",
    "D": "waiting (uninterruptible)",
    "T": "stopped",
    "t": "stopped (traced)",
    "Z": "exited",
    "X": "exited",
    "I": "waiting",
}


@dataclass
class Frame:
    function: str
    filename: str
    line: int
    locals: dict[str, str] | None = None


@dataclass
class ThreadDump:
    native_id: int
    ident: int
    name: str | None
    holds_gil: bool
    state: str  # running / waiting / ... from /proc/PID/task/TID/stat
    frames: list[Frame] = field(default_factory=list)  # outermost first, as a traceback
    depth: int = 0
    consistent: bool = True  # two walks around the resolution agreed
    problem: str | None = None  # why the stack is partial or flagged


@dataclass
class ProcessDump:
    pid: int
    executable: str
    python: str
    threads: list[ThreadDump]
    seconds: float
    symbols_from: str

    def as_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "executable": self.executable,
            "python": self.python,
            "seconds": round(self.seconds, 4),
            "symbols_from": self.symbols_from,
            "threads": [
                {
                    "native_id": t.native_id,
                    "ident": t.ident,
                    "name": t.name,
                    "holds_gil": t.holds_gil,
                    "state": t.state,
                    "consistent": t.consistent,
                    "problem": t.problem,
                    "depth": t.depth,
                    "frames": [
                        {"function": f.function, "filename": f.filename, "line": f.line}
                        | ({"locals": f.locals} if f.locals is not None else {})
                        for f in t.frames
                    ],
                }
                for t in self.threads
            ],
        }


def _proc_state(pid: int, tid: int) -> str:
    try:
        with open(f"/proc/{pid}/task/{tid}/stat") as fh:
            text = fh.read()
    except OSError:
        return "unknown"
    letter = text[text.rfind(")") + 2 :][:1]
    return PROC_STATES.get(letter, letter or "unknown")


class Reader:
    """Reads one target process through truestack._remote (the walker compiled for remote loads)."""

    def __init__(self, target: Target) -> None:
        from .. import _remote

        self.t = target
        self.remote = _remote
        _remote.open(target.pid)
        self.mem = Memory(_remote.read, dict(_remote.OFFSETS), target.symbols, target.version)
        self.off = self.mem.off
        runtime = target.symbols["_PyRuntime"]
        self._check_layout(runtime)
        self.interp = self.mem.u64(runtime + self.off["runtime_main_interp"])
        if not self.interp:
            raise RemoteError(f"process {target.pid} has no Python interpreter running (starting or finalizing)")
        s = target.symbols
        _remote.configure(
            self.interp, s["PyCode_Type"], s["PyFrame_Type"], s["PyGen_Type"], s["PyCoro_Type"], s["PyAsyncGen_Type"]
        )
        gil_ptr = self.off["interp_gil_ptr"]
        self.gil = self.mem.u64(self.interp + gil_ptr) if gil_ptr >= 0 else runtime + self.off["runtime_gil"]

    def _check_layout(self, runtime: int) -> None:
        """3.13+: the target's _Py_DebugOffsets must equal ours (the same structure layout), version aside."""
        at = self.off["runtime_debug_offsets"]
        if at < 0:
            return
        theirs = self.mem.read(runtime + at, self.off["debug_offsets_size"])
        ours = self.remote.own_debug_offsets() or b""
        v = self.off["debug_offsets_version"]
        if theirs[:8] != b"xdebugpy" or theirs[:v] + theirs[v + 8 :] != ours[:v] + ours[v + 8 :]:
            raise RemoteError(
                f"process {self.t.pid}'s interpreter lays out its structures differently from this one "
                "(another build of the same version): run truestack with the target's own interpreter"
            )

    def thread_states(self) -> list[int]:
        """The main interpreter's thread states, read until two reads agree."""
        last: list[int] = []
        for _ in range(ATTEMPTS):
            out: list[int] = []
            seen: set[int] = set()
            t = self.mem.u64(self.interp + self.off["interp_threads_head"])
            while t and t not in seen and len(out) < MAX_THREADS:
                seen.add(t)
                out.append(t)
                t = self.mem.u64(t + self.off["ts_next"])
            if out == last:
                return out
            last = out
        return last

    def native_id(self, tstate: int) -> tuple[int, int]:
        ident = self.mem.u64(tstate + self.off["ts_thread_id"])
        if self.off["ts_native_thread_id"] >= 0:
            return self.mem.u64(tstate + self.off["ts_native_thread_id"]), ident
        tid = 0
        if self.off["pthread_tid"] >= 0 and ident:  # 3.10: glibc's thread descriptor holds it
            try:
                tid = self.mem.i32(ident + self.off["pthread_tid"])
            except Unreadable:
                tid = 0
        return (tid if tid > 0 and os.path.isdir(f"/proc/{self.t.pid}/task/{tid}") else 0), ident

    def gil_holder(self) -> int:
        if not self.gil or not self.mem.i32(self.gil + self.off["gil_locked"]):
            return 0
        return self.mem.u64(self.gil + self.off["gil_last_holder"])

    def thread_name(self, walk: list[tuple[int, int, int]]) -> str | None:
        """The `threading` name, from `self._name` of the thread's bootstrap frame (its outermost)."""
        for frame, code, _ in reversed(walk):
            info = self.mem.code(code)
            if info.name in ("Thread._bootstrap", "_bootstrap") and info.filename.endswith("threading.py"):
                if not info.local_names or info.local_names[0] != "self":
                    return None
                this = self.mem.u64(frame + self.off["frame_localsplus"])
                name = self.mem.attribute(this, "_name") if this else 0
                return self.mem.string(name)[0] if name else None
        return None

    def _resolve(self, walk: list[tuple[int, int, int]], with_locals: bool) -> tuple[list[Frame], list[bytes]]:
        """The walk's frames, innermost last like a traceback, and (with locals) each one's raw slots."""
        frames, slots = [], []
        for frame, code, offset in walk:
            info = self.mem.code(code)
            local_values = None
            if with_locals:
                slots.append(self.mem.local_slots(frame, info))
                local_values = self.mem.locals_(slots[-1], info)
            frames.append(Frame(info.name, info.filename, self.mem.line(info, offset), local_values))
        frames.reverse()
        return frames, slots

    def _slots_moved(self, walk: list[tuple[int, int, int]], slots: list[bytes]) -> bool:
        """Did a frame's locals change while they were read? Two equal walks do not say: a returning
        call's frame is reused at the same address by the next call (3.10's free list, 3.11+'s frame
        stack), and a deterministic program brings it back to the same instruction."""
        try:
            return [self.mem.local_slots(frame, self.mem.code(code)) for frame, code, _ in walk] != slots
        except Unreadable:
            return True

    def thread(self, tstate: int, with_locals: bool, max_depth: int) -> ThreadDump:
        tid, ident = self.native_id(tstate)
        name = "MainThread" if tid == self.t.pid else None
        result = ThreadDump(tid, ident, name, False, _proc_state(self.t.pid, tid) if tid else "unknown")
        consistent = False
        problem: str | None = "its frames changed while they were read"
        for _ in range(ATTEMPTS):
            self.mem.forget_codes()  # a code object seen in an earlier attempt may be gone
            first, depth, partial = self.remote.walk(tstate, max_depth)
            try:
                frames, slots = self._resolve(first, with_locals)
                name = self.thread_name(first) or result.name
            except Unreadable:
                consistent, problem = False, "its frames changed while they were read"
                continue
            second, _, partial2 = self.remote.walk(tstate, max_depth)
            result.frames, result.depth, result.name = frames, depth, name
            if first != second or partial2 != partial:
                consistent, problem = False, "its stack changed while it was read (the thread is running)"
                continue
            if with_locals and self._slots_moved(first, slots):
                consistent, problem = False, "its local variables changed while they were read"
                continue
            consistent, problem = True, (f"partial stack: {partial}" if partial else None)
            if partial is None:
                break
            # Read the same twice but partial: it may be a moment's state (a thread starting or ending).
        result.consistent = consistent
        result.problem = problem
        return result


def dump(pid: int, with_locals: bool = False, max_depth: int = 4096) -> ProcessDump:
    """Every Python thread's stack in process `pid`, read without stopping it or running code in it."""
    start = time.perf_counter()
    target = locate(pid)
    try:
        reader = Reader(target)
        threads = []
        holder = reader.gil_holder()
        for tstate in reversed(reader.thread_states()):  # oldest (the main thread) first
            try:
                t = reader.thread(tstate, with_locals, max_depth)
            except Unreadable:
                if tstate not in reader.thread_states():
                    continue  # the thread ended while it was read
                t = ThreadDump(
                    0, 0, None, False, "unknown", consistent=False, problem="its thread state was unreadable"
                )
            t.holds_gil = tstate == holder
            threads.append(t)
        # The GIL may have changed hands while the stacks were read: name a holder only if it held throughout.
        if reader.gil_holder() != holder:
            for t in threads:
                t.holds_gil = False
    except Unreadable as exc:
        raise RemoteError(f"process {pid} changed while it was read ({exc}); try again") from None
    except PermissionError:
        raise RemoteError(permission_message(pid)) from None
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            raise RemoteError(f"no such process: {pid} (it ended while it was read)") from None
        raise RemoteError(os_error_message(pid, exc)) from None
    version = f"{target.version[0]}.{target.version[1]}"
    return ProcessDump(pid, target.exe, version, threads, time.perf_counter() - start, target.how)
