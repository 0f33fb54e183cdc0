"""The records every engine produces and every consumer reads.

An engine turns whatever it captured (raw native frames, Python frame objects)
into `Sample`s made of interned `Frame`s, so the same frame is one object no
matter how many samples contain it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple


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


@dataclass(slots=True)
class Sample:
    """One stack sample of one thread."""

    thread_id: int  # native thread id (gettid)
    thread_name: str
    time_ns: int  # same clock as time.monotonic_ns()
    weight_ns: int  # CPU ns in cpu mode, the sampling interval in wall mode
    frames: tuple[Frame, ...]  # outermost (root) first, leaf last
    cpu_delta_ns: int = 0  # thread CPU time consumed since its previous sample, if known
    state: str = STATE_UNKNOWN
    depth: int = 0  # true stack depth (may exceed len(frames) when truncated)
    partial: str | None = None  # reason code when the walk was incomplete or suspect


@dataclass(slots=True)
class SamplerStats:
    """What the sampler did, reported in every profile and summary."""

    engine: str  # "native-cpu" | "native-wall" | "safepoint"
    mode: str  # "cpu" | "wall"
    requested_rate_hz: float
    achieved_rate_hz: float = 0.0
    samples: int = 0
    dropped: int = 0
    partial: dict[str, int] = field(default_factory=dict)  # reason -> count
    duration_s: float = 0.0
    biased: bool = False  # True for engines that only see eval-breaker points
    timer: str = ""  # e.g. "perf_event task-clock", "timer_create CPU clock", "sampler thread"
    notes: list[str] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)  # engine specific (ring capacity, ...)

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
