"""The records every engine produces and every consumer reads.

An engine turns whatever it captured (raw native frames, Python frame objects)
into `Sample`s made of interned `Frame`s, so the same frame is one object no
matter how many samples contain it.
"""

from __future__ import annotations

import enum

from .light_typing import NamedTuple
from .records import Record


class FrameKind(str, enum.Enum):
    """What a frame is. The order is the saved files' and the C core's numbering
    (`_native.FRAME_KINDS` mirrors the first three; a test checks)."""

    PYTHON = "python"  # a Python function's frame
    NATIVE = "native"  # a C function (builtin or extension)
    SHIM = "shim"  # an interpreter-internal frame, hidden from users
    TRUNCATED = "truncated"  # a synthetic root: stack cut at max_depth, or partial walk

    def __str__(self) -> str:
        return self.value


FRAME_KINDS: tuple[str, ...] = tuple(kind.value for kind in FrameKind)


class Frame(NamedTuple):
    """One resolved stack frame."""

    name: str  # qualified function name (co_qualname; co_name on 3.10)
    file: str
    line: int  # 0 when the instruction offset could not be mapped to a line
    first_line: int  # co_firstlineno: tells apart same-named functions in one file
    kind: str = FrameKind.PYTHON.value  # a FrameKind value


# Values of Sample.state
STATE_RUNNING = "running"  # on CPU when sampled
STATE_IDLE = "idle"  # sleeping or blocked when sampled
STATE_UNKNOWN = "unknown"  # sampled in wall mode, kernel state not read
STATE_AWAITING = "awaiting"  # an asyncio task suspended at an await (`--async`, wall mode)


# `--async`: each asyncio task is shown as a thread of its own, with an id from here up
TASK_TID_BASE = 1 << 48  # far above any kernel thread id


def is_task_thread(tid: int) -> bool:
    """Is this profile thread an asyncio task (`--async`) rather than an OS thread?"""
    return tid >= TASK_TID_BASE


class Sample(Record):
    """One stack sample of one thread."""

    __slots__ = (
        "coro",
        "cpu_delta_ns",
        "depth",
        "frames",
        "partial",
        "parts",
        "state",
        "thread_id",
        "thread_name",
        "time_ns",
        "weight_ns",
    )

    def __init__(
        self,
        thread_id: int,
        thread_name: str,
        time_ns: int,
        weight_ns: int,
        frames: tuple[Frame, ...],
        cpu_delta_ns: int = 0,
        state: str = STATE_UNKNOWN,
        depth: int = 0,
        partial: str | None = None,
        coro: int = 0,
    ) -> None:
        self.thread_id = thread_id  # native thread id (gettid)
        self.thread_name = thread_name
        self.time_ns = time_ns  # same clock as time.monotonic_ns()
        self.weight_ns = weight_ns  # CPU ns in cpu mode, the sampling interval in wall mode
        self.frames = frames  # outermost (root) first, leaf last
        self.cpu_delta_ns = cpu_delta_ns  # thread CPU time consumed since its previous sample, if known
        self.state = state
        self.depth = depth  # true stack depth (may exceed len(frames) when truncated)
        self.partial = partial  # reason code when the walk was incomplete or suspect
        self.coro = coro  # id() of the outermost coroutine on the stack (the task being stepped), or 0
        # (head, tail) with frames == head + tail, each part an object that recurs from sample to
        # sample (--async: a task's prefix, the stack from its coroutine up), or None. A new
        # combination of known parts is then interned part by part, not hashed whole.
        self.parts: tuple[tuple[Frame, ...], tuple[Frame, ...]] | None = None


class SamplerStats(Record):
    """What the sampler did, reported in every profile and summary."""

    __slots__ = (
        "achieved_rate_hz",
        "biased",
        "dropped",
        "duration_s",
        "engine",
        "extra",
        "mode",
        "notes",
        "partial",
        "requested_rate_hz",
        "samples",
        "timer",
    )

    def __init__(
        self,
        engine: str,
        mode: str,
        requested_rate_hz: float,
        achieved_rate_hz: float = 0.0,
        samples: int = 0,
        dropped: int = 0,
        partial: dict[str, int] | None = None,
        duration_s: float = 0.0,
        biased: bool = False,
        timer: str = "",
        notes: list[str] | None = None,
        extra: dict[str, object] | None = None,
    ) -> None:
        self.engine = engine  # "native-cpu" | "native-wall" | "safepoint"
        self.mode = mode  # "cpu" | "wall"
        self.requested_rate_hz = requested_rate_hz
        self.achieved_rate_hz = achieved_rate_hz
        self.samples = samples
        self.dropped = dropped
        self.partial: dict[str, int] = {} if partial is None else partial  # reason -> count
        self.duration_s = duration_s
        self.biased = biased  # True for engines that only see eval-breaker points
        self.timer = timer  # e.g. "perf_event task-clock", "timer_create CPU clock", "sampler thread"
        self.notes: list[str] = [] if notes is None else notes
        self.extra: dict[str, object] = {} if extra is None else extra  # engine specific (ring capacity, ...)

    def as_dict(self) -> dict[str, object]:
        return {
            "engine": self.engine,
            "mode": self.mode,
            "requested_rate_hz": self.requested_rate_hz,
            "achieved_rate_hz": self.achieved_rate_hz,
            "samples": self.samples,
            "dropped": self.dropped,
            "partial": dict(self.partial),
            "duration_s": self.duration_s,
            "biased": self.biased,
            "timer": self.timer,
            "notes": list(self.notes),
            "extra": dict(self.extra),
        }
