"""Native engines: stacks walked by a C signal handler (`truestack._native`).

`NativeCpuEngine` samples each thread in proportion to its own CPU time
(perf_event task-clock per thread when the kernel allows it, else a
per-thread CPU-clock POSIX timer); each sample weighs the thread's CPU time
since its previous sample, read from its CPU clock inside the handler.
`NativeWallEngine` has a native control thread tick at the rate and sample
every registered thread, idle or not. A thread that used at least half an
interval of CPU since the previous tick is signalled and walks itself
("running"); any other thread is blocked or waiting, so the control thread
walks its frames itself with the same guarded loads ("idle") rather than
signal it: a caught signal would end `signal.pause()` and interrupt its
other waits.

Cost: the control thread measures what sampling costs (handler time plus the
kernel's signal delivery) and halves the rate while it exceeds a quarter of
the process's CPU time, doubling it back when it falls well below; the
profile's notes say when the rate was lowered. The ring is sized to the rate
(about two seconds of samples for every thread that can run) and its pages become
resident only as samples are written.

Threads: every Python thread of the main interpreter is sampled (a thread
running a sub-interpreter gives `[partial stack: subinterpreter]` samples) — threads
that existed before start(), `threading` threads (a wrapper of
`Thread._bootstrap_inner` registers each one as it starts; the program's
profile and trace hooks are left alone) and `_thread` threads (found by the walk of the
interpreter's thread states done at start and at every drain). A `threading`
thread deregisters itself as it ends, sampling or not; other threads whose
thread state is gone are deregistered at the next drain. A tid is armed only
once the kernel confirms it is a live thread of this process, so a stale
registration never signals another process. Threads named
``truestack-*`` (the collector) are not sampled.

fork(): the child stops sampling cleanly. No timer, sampler thread or
pending sample of the parent survives in it; `drain()` returns nothing and
`stats().notes` says so; the child may start a new engine.

One native engine can run at a time per process (the C core is global).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
import time

from ..own_files import is_own_thread
from ..samples import Frame, FrameKind, Sample, SamplerStats
from .base import Engine, EngineUnavailable
from .native_resolve import CodeResolver
from .native_stats import blocker_note, core_counters, sampler_notes, sigprof_blockers

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

try:
    from .. import _native
except ImportError as exc:  # extension not built for this interpreter
    _native = None  # type: ignore[assignment]
    _IMPORT_ERROR: str = str(exc)
else:
    _IMPORT_ERROR = ""

_TRUNCATED = Frame("[truncated]", "", 0, 0, FrameKind.TRUNCATED.value)
_SYNC_INTERVAL_S = 0.02
_STACK_CACHE_COUNTS = ("stacks", "frames", "hits", "misses", "uncacheable")  # _native.stack_cache_counts()
_RING_SECONDS = 2.0  # samples the ring holds between drains, at the full rate
_RING_MIN, _RING_MAX = 1024, 65536
_active: _NativeEngine | None = None
_forked = False


def _with_root(frames: tuple[Frame, ...], partial: str | None, cut: bool) -> tuple[Frame, ...]:
    """The stack under a root saying the walk was partial, or cut at max_depth."""
    if partial is not None:
        return (_partial_root(partial), *frames)
    if cut:
        return (_TRUNCATED, *frames)
    return frames


@functools.cache  # a few reasons: one interned root frame each
def _partial_root(reason: str) -> Frame:
    return Frame(f"[partial stack: {reason}]", "", 0, 0, FrameKind.TRUNCATED.value)


class _NativeEngine(Engine):
    """Shared machinery of the two native engines (see the module docstring)."""

    biased = False

    sampling_mode = ""  # the one mode each subclass samples in

    def __init__(
        self,
        mode: str | None = None,
        rate_hz: float = 100,
        max_depth: int = 128,
        ring_slots: int | None = None,
        timer: str | None = None,
        native: bool = False,
        native_all: bool = False,
    ) -> None:
        mode = mode or self.sampling_mode
        if mode != self.sampling_mode:
            raise ValueError(f"{type(self).__name__} samples in {self.sampling_mode} mode")
        super().__init__(mode, rate_hz, max_depth)
        if _native is None:
            raise EngineUnavailable(f"truestack._native cannot be imported: {_IMPORT_ERROR}")
        if not _native.GUARDED_LOADS:
            raise EngineUnavailable(
                "the native sampler needs fault-tolerant loads, implemented for x86-64 only "
                f"(this is {os.uname().machine})"
            )
        if not 1 <= max_depth <= _native.MAX_DEPTH:
            raise ValueError(f"max_depth must be between 1 and {_native.MAX_DEPTH}")
        self._stacks: Any = None  # the --native side (native_stacks.NativeStacks)
        if native or native_all:  # imported only then: it costs every other run ~30 ms of start-up (ctypes)
            from .native_stacks import NativeStacks

            self._stacks = NativeStacks.wanted(native, native_all, _native)
        self.ring_slots = int(ring_slots) if ring_slots else 0  # 0: sized at start
        self.timer_pref = timer or os.environ.get("TRUESTACK_TIMER", "auto")
        self._interval_ns = max(10_000, round(1e9 / self.rate_hz))
        self._lock = threading.RLock()
        self._running = False
        self._timer = ""
        self._names: dict[int, str] = {}
        self._resolve = CodeResolver(_native.code_line)
        self._started_at = 0.0
        self._elapsed = 0.0
        self._base: dict[str, Any] = {}
        self._drained = 0
        self._partial: dict[str, int] = {}
        self._hooked = False
        self._hook_used = False
        self._hook: Any = None  # the Thread._bootstrap_inner wrapper while installed
        self._last_sync = 0.0

    # -- lifecycle -------------------------------------------------------
    def start(self) -> None:
        global _active, _forked
        with self._lock:
            _forked = False
            if self._running:
                raise RuntimeError("engine already started")
            if _active is not None and _active is not self:
                raise RuntimeError("another native engine is already running in this process")
            try:
                slots, native = self.ring_slots or self._ring_size(), self._stacks.depth if self._stacks else 0
                self._timer = _native.start(
                    self.mode, self._interval_ns, self.max_depth, slots, self.timer_pref, native
                )
            except (OSError, ValueError) as exc:
                raise EngineUnavailable(f"cannot start native {self.mode} sampling: {exc}") from exc
            _active = self
            self._running = True
            if not self._base:
                self._base = _native.stats()
            self._started_at = time.monotonic()
            self._install_thread_hook()
            self._sync_threads(force=True)

    def stop(self) -> None:
        global _active
        with self._lock:
            if not self._running:
                return
            _native.stop()
            self._running = False
            if _active is self:
                _active = None
            self._remove_thread_hook()
            self._elapsed += time.monotonic() - self._started_at

    def _ring_size(self) -> int:
        # Enough for the drain to fall seconds behind with every thread sampled
        # at the full rate (in cpu mode no more threads run at once than there
        # are CPUs). Threads started later share the headroom: a full ring
        # drops samples and counts them, it never blocks.
        threads = max(threading.active_count(), 4)
        streams = min(threads, os.cpu_count() or 1) if self.mode == "cpu" else threads
        return int(min(max(self.rate_hz * streams * _RING_SECONDS, _RING_MIN), _RING_MAX))

    # -- threads -----------------------------------------------------------
    def _register_thread(self, name: str) -> None:
        try:
            if self._running and not is_own_thread(name):
                self._names[_native.register_current()] = name
        except Exception:  # never break the user's thread
            pass

    def _unregister_thread(self) -> None:
        with contextlib.suppress(Exception):  # never break the user's thread, even at shutdown
            _native.unregister_current()

    def _install_thread_hook(self) -> None:
        # New `threading` threads register themselves as they start, through a
        # wrapper of Thread._bootstrap_inner: unlike a threading.setprofile hook
        # it is invisible to the program (sys.getprofile, threading.getprofile
        # stay as the program set them) and works beside other profilers.
        if self._hooked:
            return
        original = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]
        engine = self

        def _bootstrap_inner(thread: threading.Thread) -> None:
            engine._register_thread(thread.name)
            try:
                original(thread)
            finally:  # its tid may be reused by another process once it ends
                engine._unregister_thread()

        _bootstrap_inner.__wrapped__ = original  # type: ignore[attr-defined]
        threading.Thread._bootstrap_inner = _bootstrap_inner  # type: ignore[attr-defined]
        self._hook = _bootstrap_inner
        self._hooked = self._hook_used = True

    def _remove_thread_hook(self) -> None:
        hook = self._hook
        if self._hooked and hook is not None and threading.Thread._bootstrap_inner is hook:  # type: ignore[attr-defined]
            threading.Thread._bootstrap_inner = hook.__wrapped__  # type: ignore[attr-defined]
        self._hooked = False

    def _sync_threads(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_sync < _SYNC_INTERVAL_S:
            return
        self._last_sync = now
        by_ident = {t.ident: t.name for t in threading.enumerate() if t.ident is not None}
        exclude = {ident for ident, name in by_ident.items() if is_own_thread(name)}
        for ident, tid in _native.sync_threads(exclude):
            name = by_ident.get(ident)
            if name is not None or tid not in self._names:
                self._names[tid] = name or f"thread-{tid}"

    # -- samples -------------------------------------------------------------
    @staticmethod
    def _whole_stack(frames: tuple[Frame, ...], partial: str | None, depth: int) -> tuple[Frame, ...]:
        """A drained stack (root first) as the profile keeps it: under a root saying when the walk was
        partial (the leaf end is right and its callers are missing, or nothing could be walked: a
        sub-interpreter's thread, no thread state) or cut at max_depth. The drain's stack cache calls
        it once per distinct stack and hands the same tuple back for every later sample of that stack."""
        return _with_root(frames, partial, depth > len(frames))

    @staticmethod
    def _python_half(frames: tuple[Frame | None, ...], partial: str | None, depth: int) -> tuple[Frame | None, ...]:
        """--native: the drain's cache keeps a stack's Python frames as they are (shims as None,
        to place the C frames); the root is added once they are merged (NativeStacks.sample_stack)."""
        return frames

    def drain(self) -> list[Sample]:
        with self._lock:
            if _forked:
                return []
            if self._running:
                self._sync_threads()
            out = []
            native = self._stacks is not None
            names = self._names
            partials = self._partial
            resolvers = (
                (self._resolve.frame, self._python_half, True) if native else (self._resolve.frame, self._whole_stack)
            )
            for raw in _native.drain(*resolvers):
                partial = raw.partial
                if partial is not None:
                    partials[partial] = partials.get(partial, 0) + 1
                tid = raw.tid
                out.append(
                    Sample(
                        tid,
                        names.get(tid) or f"thread-{tid}",
                        raw.time_ns,
                        raw.weight_ns,
                        self._stacks.sample_stack(raw, _with_root) if native else raw.frames,
                        raw.cpu_delta_ns,
                        raw.state,
                        raw.depth,
                        partial,
                        raw.coro,
                    )
                )
            self._drained += len(out)
            if not self._running:  # the last drain of this run: the cache's pins are let go
                _native.stack_cache_clear()
                if native:
                    self._stacks.forget_merges()
            return out

    def charge_collector(self, cpu_ns: int) -> None:
        if not _forked:
            _native.charge_collector(cpu_ns)

    # -- stats ---------------------------------------------------------------
    def stats(self) -> SamplerStats:
        raw = _native.stats()
        base = self._base or raw

        def delta(key: str) -> int:
            return int(raw[key]) - int(base.get(key, 0))

        elapsed = self._elapsed + (time.monotonic() - self._started_at if self._running else 0.0)
        samples = delta("samples")
        if self.mode == "cpu":
            cpu_s = delta("weight_ns") / 1e9
            achieved = samples / cpu_s if cpu_s > 0 else 0.0  # per second of sampled CPU time
        else:
            achieved = delta("wakeups") / elapsed if elapsed > 0 else 0.0  # sampler rounds actually run
        partial: dict[str, int] = {}
        for reason, count in raw["partial"].items():
            n = count - base["partial"].get(reason, 0) if base is not raw else count
            if n:
                partial[reason] = n
        notes = sampler_notes(raw, delta, self._names) + (self._stacks.notes() if self._stacks else [])
        if not self._running:  # the run's last stats: what the threads still alive block
            notes += blocker_note(sigprof_blockers(self._names))
        if _forked:
            notes.append("forked child: sampling stopped at fork (the parent keeps profiling)")
        return SamplerStats(
            engine=self.name,
            mode=self.mode,
            requested_rate_hz=self.rate_hz,
            achieved_rate_hz=achieved,
            samples=samples,
            dropped=delta("dropped"),
            partial=partial,
            duration_s=elapsed,
            biased=False,
            timer=self._timer or raw["timer"],
            notes=notes,
            extra={
                **core_counters(raw, delta, self._names),
                "threads_registered": raw["threads"],
                "layout": raw["layout"],
                "code_hook": raw["code_hook"],
                "samples_drained": self._drained,
                "interval_ns": self._interval_ns,
                "max_depth": self.max_depth,
                "thread_hook": "Thread._bootstrap_inner" if self._hook_used else "thread-state walk only",
                "codes_resolved_at_death": _native.codes_resolved_at_death(),
                "stack_cache": dict(zip(_STACK_CACHE_COUNTS, _native.stack_cache_counts(), strict=True)),
                **(self._stacks.counters(delta) if self._stacks else {}),
            },
        )


class NativeCpuEngine(_NativeEngine):
    """CPU-time sampling: each thread in proportion to its own CPU time."""

    name = "native-cpu"
    sampling_mode = "cpu"


class NativeWallEngine(_NativeEngine):
    """Wall-clock sampling: every registered thread at the rate, idle ones too."""

    name = "native-wall"
    sampling_mode = "wall"


def _stop_active_at_exit() -> None:
    # Timers must not fire into a half-finalised interpreter.
    engine = _active
    if engine is not None:
        try:
            engine.stop()
        except Exception:
            _native.stop()


def _after_fork_in_child() -> None:
    global _forked, _active
    if _active is not None or _forked:
        _forked = True
        _active = None
    _native.after_fork_child()


if _native is not None:
    atexit.register(_stop_active_at_exit)
    os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["NativeCpuEngine", "NativeWallEngine"]
