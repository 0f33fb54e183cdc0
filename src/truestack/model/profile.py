"""The profile model: one in-memory form that every exporter reads.

Memory grows with unique stacks plus ~21 bytes per sample: samples are kept
as typed columns per thread, stacks as a prefix tree, and every string,
function and frame is stored once.
"""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Iterable, Iterator, Mapping

from ..identity_memo import MISSING, IdentityMemo
from ..light_typing import NamedTuple
from ..records import Record
from ..samples import Frame, Sample
from .meta import ProfileMeta
from .tables import KINDS, FrameRow, Func, InternTable, StackTable, StringTable

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

STATES = ("unknown", "running", "idle", "awaiting")
_STATE_INDEX = {name: i for i, name in enumerate(STATES)}
_WEIGHT_MAX = 2**64 - 1  # weights are uint64: a 5 s wall interval must not saturate
_new = tuple.__new__


class ThreadSamples(Record):
    """All samples of one thread, as columns."""

    __slots__ = ("cpu_delta_ns", "name", "stack", "state", "tid", "time_ns", "weight_ns")

    def __init__(
        self,
        tid: int,
        name: str,
        time_ns: array[int] | None = None,
        stack: array[int] | None = None,
        weight_ns: array[int] | None = None,
        cpu_delta_ns: array[int] | None = None,
        state: array[int] | None = None,
    ) -> None:
        self.tid = tid
        self.name = name
        self.time_ns: array[int] = array("q") if time_ns is None else time_ns
        self.stack: array[int] = array("i") if stack is None else stack  # -1: empty stack
        self.weight_ns: array[int] = array("Q") if weight_ns is None else weight_ns
        self.cpu_delta_ns: array[int] = array("Q") if cpu_delta_ns is None else cpu_delta_ns
        self.state: array[int] = array("b") if state is None else state  # index into STATES

    def __len__(self) -> int:
        return len(self.stack)


class Marker(Record):
    """A labelled instant (end_ns None) or interval on a thread."""

    __slots__ = ("data", "end_ns", "name", "start_ns", "thread_id")

    def __init__(
        self,
        name: str,
        start_ns: int,
        end_ns: int | None = None,
        thread_id: int = 0,
        data: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.thread_id = thread_id
        self.data: dict[str, Any] = {} if data is None else data

    def as_dict(self) -> dict[str, Any]:
        """The saved form: the constructor's keyword arguments."""
        return {name: getattr(self, name) for name in self.__slots__}


class SampleRow(NamedTuple):
    thread: ThreadSamples
    time_ns: int
    stack: int
    weight_ns: int
    cpu_delta_ns: int
    state: str


class Profile:
    """Threads of samples over shared string/function/frame/stack tables."""

    def __init__(self, meta: ProfileMeta | Mapping[str, Any] | None = None) -> None:
        self.strings = StringTable()
        self.funcs: InternTable[Func] = InternTable()
        self.frames: InternTable[FrameRow] = InternTable()
        self.stacks = StackTable()
        self.threads: dict[int, ThreadSamples] = {}
        self.markers: list[Marker] = []
        if meta is None:
            meta = ProfileMeta()
        elif not isinstance(meta, ProfileMeta):
            meta = ProfileMeta.from_dict(meta)
        self.meta: ProfileMeta = meta
        self._frame_ids: dict[Frame, int] = {}
        self._stack_ids: dict[tuple[Frame, ...], int] = {}
        self._stack_objs: IdentityMemo[tuple[Frame, ...], int] = IdentityMemo()  # the drain's recurring tuples
        self._tail_frames: IdentityMemo[tuple[Frame, ...], tuple[int, ...]] = IdentityMemo()  # Sample.parts' tails

    # -- building --------------------------------------------------------
    def intern_frame(self, frame: Frame) -> int:
        idx = self._frame_ids.get(frame)
        if idx is None:
            # tuple.__new__: half the time of a namedtuple's own __new__ (--async makes a frame per task)
            strings = self.strings
            func_row = (strings.intern(frame.name), strings.intern(frame.file), frame.first_line)
            func = self.funcs.intern(_new(Func, func_row))
            kind = KINDS.index(frame.kind) if frame.kind in KINDS else 0
            idx = self._frame_ids[frame] = self.frames.intern(_new(FrameRow, (func, frame.line, kind)))
        return idx

    def intern_stack(self, frames: tuple[Frame, ...]) -> int:
        idx: int = self._stack_objs.get(frames)
        if idx is not MISSING:
            return idx
        found = self._stack_ids.get(frames)
        if found is None:
            found = -1
            for frame in frames:
                found = self.stacks.intern(found, self.intern_frame(frame))
            self._stack_ids[frames] = found
        self._stack_objs.put(frames, found)
        return found

    def intern_parts(self, head: tuple[Frame, ...], tail: tuple[Frame, ...]) -> int:
        """The stack head + tail (`Sample.parts`). --async makes one per task, most of them seen
        once: they are neither hashed whole nor remembered, only their parts are."""
        ids = self._tail_frames.get(tail)
        if ids is MISSING:
            ids = tuple(map(self.intern_frame, tail))
            self._tail_frames.put(tail, ids)
        found = self.intern_stack(head)
        intern = self.stacks.intern
        for frame in ids:
            found = intern(found, frame)
        return found

    def thread(self, tid: int, name: str) -> ThreadSamples:
        thread = self.threads.get(tid)
        if thread is None:
            thread = self.threads[tid] = ThreadSamples(tid, name)
        elif name and thread.name != name:
            thread.name = name  # threads may be renamed after they start
        return thread

    def add_sample(self, sample: Sample) -> None:
        self.add_samples((sample,))

    def add_samples(self, samples: Iterable[Sample]) -> None:
        # append()'s work, inlined: the collector runs this for every sample of a run.
        threads, intern_stack = self.threads, self.intern_stack
        for sample in samples:
            thread = threads.get(sample.thread_id)
            if thread is None or thread.name != sample.thread_name:
                thread = self.thread(sample.thread_id, sample.thread_name)
            weight, cpu = sample.weight_ns, sample.cpu_delta_ns
            thread.time_ns.append(sample.time_ns)
            parts = sample.parts
            thread.stack.append(intern_stack(sample.frames) if parts is None else self.intern_parts(*parts))
            thread.weight_ns.append(weight if 0 <= weight <= _WEIGHT_MAX else min(max(weight, 0), _WEIGHT_MAX))
            thread.cpu_delta_ns.append(cpu if 0 <= cpu <= _WEIGHT_MAX else min(max(cpu, 0), _WEIGHT_MAX))
            thread.state.append(_STATE_INDEX.get(sample.state, 0))

    def append(
        self,
        thread: ThreadSamples,
        time_ns: int,
        stack: int,
        weight_ns: int,
        cpu_delta_ns: int = 0,
        state: str = "unknown",
    ) -> None:
        thread.time_ns.append(time_ns)
        thread.stack.append(stack)
        thread.weight_ns.append(min(max(weight_ns, 0), _WEIGHT_MAX))
        thread.cpu_delta_ns.append(min(max(cpu_delta_ns, 0), _WEIGHT_MAX))
        thread.state.append(_STATE_INDEX.get(state, 0))

    def add_marker(self, marker: Marker) -> None:
        self.markers.append(marker)

    def note_interrupted(self, reason: str, thread_id: int | None = None) -> None:
        """Record why the run ended early, in meta (the first reason stays) and as a marker on the timeline."""
        if not self.meta.interrupted:
            self.meta.interrupted = reason
        tid = thread_id if thread_id is not None else threading.get_native_id()
        self.add_marker(Marker(f"interrupted: {reason}", time.monotonic_ns(), None, tid, {"reason": reason}))

    # -- reading ---------------------------------------------------------
    @property
    def sample_count(self) -> int:
        return sum(len(t) for t in self.threads.values())

    @property
    def total_weight_ns(self) -> int:
        return sum(sum(t.weight_ns) for t in self.threads.values())

    def iter_samples(self) -> Iterator[SampleRow]:
        for thread in self.threads.values():
            for i in range(len(thread)):
                yield SampleRow(
                    thread,
                    thread.time_ns[i],
                    thread.stack[i],
                    thread.weight_ns[i],
                    thread.cpu_delta_ns[i],
                    STATES[thread.state[i]],
                )

    def func_name(self, func: int) -> str:
        return self.strings[self.funcs[func].name]

    def func_file(self, func: int) -> str:
        return self.strings[self.funcs[func].file]

    def frame_func(self, frame: int) -> int:
        return self.frames[frame].func

    def frame_line(self, frame: int) -> int:
        return self.frames[frame].line

    def frame_kind(self, frame: int) -> str:
        return KINDS[self.frames[frame].kind]

    def frame_label(self, frame: int, function_level: bool = False) -> str:
        """`qualname (path:line)`, or `qualname (path)` at function level."""
        row = self.frames[frame]
        func = self.funcs[row.func]
        name, path = self.strings[func.name], self.strings[func.file]
        if function_level or row.line <= 0:
            return f"{name} ({path})"
        return f"{name} ({path}:{row.line})"

    def func_label(self, func: int) -> str:
        row = self.funcs[func]
        return f"{self.strings[row.name]} ({self.strings[row.file]}:{row.first_line})"

    def stack_frames(self, stack: int) -> list[int]:
        """Frame indices of a stack, root first (empty for -1)."""
        return self.stacks.frames_of(stack)

    def merged_lines(self) -> Profile:
        """A copy in which frames of one function are merged (line set to 0)."""
        out = Profile(self.meta.copy())
        out.meta.function_level = True
        remap_frame: dict[int, int] = {}
        for idx, row in enumerate(self.frames):
            func = self.funcs[row.func]
            out_func = out.funcs.intern(
                Func(
                    out.strings.intern(self.strings[func.name]),
                    out.strings.intern(self.strings[func.file]),
                    func.first_line,
                )
            )
            remap_frame[idx] = out.frames.intern(FrameRow(out_func, 0, row.kind))
        remap_stack: dict[int, int] = {-1: -1}
        for idx in range(len(self.stacks)):
            remap_stack[idx] = out.stacks.intern(
                remap_stack[self.stacks.prefix[idx]], remap_frame[self.stacks.frame[idx]]
            )
        for tid, thread in self.threads.items():
            copy = out.thread(tid, thread.name)
            copy.time_ns.extend(thread.time_ns)
            copy.stack.extend(remap_stack[s] for s in thread.stack)
            copy.weight_ns.extend(thread.weight_ns)
            copy.cpu_delta_ns.extend(thread.cpu_delta_ns)
            copy.state.extend(thread.state)
        out.markers = list(self.markers)
        return out

    def without_idle(self) -> Profile:
        """Drop samples taken while their thread was idle (wall mode)."""
        idle = _STATE_INDEX["idle"]
        out = self._shallow_copy()
        for tid, thread in self.threads.items():
            copy = out.thread(tid, thread.name)
            for i in range(len(thread)):
                if thread.state[i] != idle:
                    out.append(
                        copy,
                        thread.time_ns[i],
                        thread.stack[i],
                        thread.weight_ns[i],
                        thread.cpu_delta_ns[i],
                        STATES[thread.state[i]],
                    )
        return out

    def _shallow_copy(self) -> Profile:
        """New profile sharing the tables (read-only use) but with no samples."""
        out = Profile(self.meta.copy())
        out.strings, out.funcs, out.frames, out.stacks = self.strings, self.funcs, self.frames, self.stacks
        out.markers = list(self.markers)
        return out

    @property
    def duration_ns(self) -> int:
        times = [t.time_ns for t in self.threads.values() if len(t)]
        if not times:
            return 0
        return max(max(t) for t in times) - min(min(t) for t in times)
