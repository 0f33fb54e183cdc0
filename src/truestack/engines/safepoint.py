"""Pure-Python fallback engine: a thread that samples `sys._current_frames()`.

It only sees threads at eval-breaker checks and GIL switches (safepoint bias:
straight-line code and long C calls vanish), so every profile it produces is
labelled biased. It exists so truestack still works where the extension
cannot be built or loaded.
"""

from __future__ import annotations

import sys
import threading
import time
import types

from ..samples import STATE_IDLE, STATE_RUNNING, Frame, Sample, SamplerStats
from .base import Engine

_OWN_THREAD_NAME = "truestack-safepoint-sampler"


class SafepointEngine(Engine):
    name = "safepoint"
    biased = True

    def __init__(self, mode: str, rate_hz: float, max_depth: int) -> None:
        super().__init__(mode, rate_hz, max_depth)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._pending: list[Sample] = []
        self._frame_cache: dict[tuple[types.CodeType, int], Frame] = {}
        self._last_cpu: dict[int, int] = {}
        self._samples = 0
        self._ticks = 0
        self._started_at = 0.0
        self._elapsed = 0.0

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("engine already started")
        self._stop.clear()
        self._started_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=_OWN_THREAD_NAME, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._elapsed += time.monotonic() - self._started_at

    def drain(self) -> list[Sample]:
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def stats(self) -> SamplerStats:
        elapsed = self._elapsed + (time.monotonic() - self._started_at if self._thread else 0.0)
        return SamplerStats(
            engine=self.name,
            mode=self.mode,
            requested_rate_hz=self.rate_hz,
            achieved_rate_hz=self._ticks / elapsed if elapsed > 0 else 0.0,
            samples=self._samples,
            duration_s=elapsed,
            biased=True,
            timer="sys._current_frames() sampler thread",
            notes=["safepoint engine: sees threads only at eval-breaker checks and GIL switches (biased)"],
        )

    def _run(self) -> None:
        interval = 1.0 / self.rate_hz
        weight = int(interval * 1e9)
        own = threading.get_ident()
        next_tick = time.monotonic()
        while not self._stop.is_set():
            next_tick += interval
            self._take(own, weight)
            delay = next_tick - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_tick = time.monotonic()  # fell behind: don't burst to catch up

    def _take(self, own_ident: int, interval_ns: int) -> None:
        now = time.monotonic_ns()
        names = {t.ident: t for t in threading.enumerate()}
        batch = []
        for ident, frame in sys._current_frames().items():
            if ident == own_ident:
                continue
            thread = names.get(ident)
            if thread is not None and thread.name.startswith("truestack-"):
                continue
            native_id = getattr(thread, "native_id", None) or ident
            cpu_delta = self._cpu_delta(ident)
            if self.mode == "cpu":
                if cpu_delta <= 0:
                    continue  # the thread used no CPU since its last sample
                weight = cpu_delta
                state = STATE_RUNNING
            else:
                weight = interval_ns
                state = STATE_RUNNING if cpu_delta * 2 >= interval_ns else STATE_IDLE
            frames = self._resolve(frame)
            batch.append(
                Sample(
                    thread_id=native_id,
                    thread_name=thread.name if thread else f"thread-{ident}",
                    time_ns=now,
                    weight_ns=weight,
                    frames=frames,
                    cpu_delta_ns=max(cpu_delta, 0),
                    state=state,
                    depth=len(frames),
                )
            )
        self._ticks += 1
        if batch:
            with self._lock:
                self._pending.extend(batch)
                self._samples += len(batch)

    def _cpu_delta(self, ident: int) -> int:
        """CPU ns the thread used since its previous sample (-1 if unreadable)."""
        try:
            now = time.clock_gettime_ns(time.pthread_getcpuclockid(ident))
        except (OSError, AttributeError):
            return -1
        last = self._last_cpu.get(ident)
        self._last_cpu[ident] = now
        return now - last if last is not None else 0

    def _resolve(self, frame: types.FrameType | None) -> tuple[Frame, ...]:
        stack: list[Frame] = []
        while frame is not None and len(stack) < self.max_depth:
            code = frame.f_code
            key = (code, frame.f_lineno or 0)
            resolved = self._frame_cache.get(key)
            if resolved is None:
                resolved = Frame(
                    getattr(code, "co_qualname", code.co_name),
                    code.co_filename,
                    frame.f_lineno or 0,
                    code.co_firstlineno,
                )
                if len(self._frame_cache) > 200_000:
                    self._frame_cache.clear()  # bound memory under code churn
                self._frame_cache[key] = resolved
            stack.append(resolved)
            frame = frame.f_back
        stack.reverse()
        return tuple(stack)
