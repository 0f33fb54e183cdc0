"""ProfileSession: one sampling session streaming into one Profile.

What the API's `profile()`/`start()`, `truestack record` and its children
share: a Sampler, a per-stack filter (truestack's own frames out, the
caller's filter on top), the profile's metadata and the list of active
sessions that markers go to.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from . import __version__
from .atomic_file import write_atomic
from .identity_memo import MISSING, IdentityMemo
from .model import Profile
from .model.meta import ProfileMeta
from .own_files import own_path
from .sampler import Sampler
from .samples import Frame, Sample, SamplerStats
from .settings import DEFAULT_MAX_DEPTH

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from .tasks import TaskTracker

# A stack (root first) -> the stack the profile keeps, or None to drop the sample.
StackFilter = Callable[[tuple[Frame, ...]], "tuple[Frame, ...] | None"]
_KEPT_LIMIT = 10_000  # stacks whose filtering is remembered
_ASYNC_DRAIN_S = 0.05  # --async: the drain interval (each drain walks await chains)

_active: list[ProfileSession] = []
_active_lock = threading.Lock()


class ProfileSession:
    """One sampling session streaming into one Profile.

    Can be entered more than once in sequence (the decorator does): samples
    and markers of every run accumulate in the same Profile.

    Nesting: a session started while another one samples (`truestack.profile()`
    in a program run under `truestack record`, or one block inside another)
    does not start a second sampler (the native core samples once per process).
    It rides on the running session: it gets that session's samples from its
    start to its stop, in its own Profile (its own output), with the outer
    session's mode and rate, which its notes state; the outer session goes on
    unaffected and keeps those samples too.
    """

    def __init__(
        self,
        mode: str = "cpu",
        rate: float | str = 100,
        engine: str = "auto",
        max_depth: int = DEFAULT_MAX_DEPTH,
        command: list[str] | None = None,
        stack_filter: StackFilter | None = None,
        async_tasks: bool = False,
        native: str = "off",
        drain_interval: float | None = None,  # None: by the rate (sampler.drain_interval_for)
    ) -> None:
        self._filter = stack_filter
        # --async: samples relabelled per asyncio task, awaiting samples added (wall mode)
        self._tasks: TaskTracker | None = None
        if async_tasks:  # imported only then: asyncio alone costs every other run tens of ms of start-up
            from .tasks import TaskTracker

            self._tasks = TaskTracker(wall=mode == "wall")
        self._kept: dict[tuple[Frame, ...], tuple[Frame, ...] | None] = {}  # stack -> what the profile keeps
        self._kept_objs: IdentityMemo[tuple[Frame, ...], tuple[Frame, ...] | None] = IdentityMemo(_KEPT_LIMIT)
        self.sampler = Sampler(
            mode=mode,
            rate=rate,
            max_depth=max_depth,
            engine=engine,
            on_samples=self._on_samples,
            native=native,
            # --async walks the pending tasks' await chains at each drain: keep them frequent.
            drain_interval=_ASYNC_DRAIN_S if async_tasks and drain_interval is None else drain_interval,
        )
        self.profile = Profile(
            ProfileMeta(
                command=list(command if command is not None else sys.argv),
                python_version=sys.version.split()[0],
                truestack_version=__version__,
                pid=os.getpid(),
                mode=mode,
                rate_hz=self.sampler.rate_hz,
                engine=engine,
            )
        )
        self._starts = 0
        self._lock = threading.Lock()
        self._riders: tuple[ProfileSession, ...] = ()  # nested sessions fed from this one
        self._host: ProfileSession | None = None  # the session this one rides on while started
        self._window = (0, 1 << 63)  # monotonic ns: the samples a rider keeps
        # Called on the collector thread after each batch reached the profile (the record child streams it).
        self.after_batch: Callable[[], None] | None = None

    def _on_samples(self, batch: list[Sample]) -> None:
        # The same stacks recur sample after sample: decide once per stack.
        kept, kept_objs = self._kept, self._kept_objs
        out = []
        first, last = self._window
        for sample in batch:
            if not first <= sample.time_ns <= last:  # a rider's batch straddles its start or stop
                continue
            frames = kept_objs.get(sample.frames)  # the drain hands a recurring stack over as the same tuple
            if frames is MISSING:
                frames = kept.get(sample.frames, MISSING)
                if frames is MISSING:
                    frames = _without_thread_hook(sample.frames)
                    frames = None if _in_sampler(frames) else frames
                    if frames is not None and self._filter is not None:
                        frames = self._filter(frames)
                    if len(kept) >= _KEPT_LIMIT:
                        kept.clear()
                    kept[sample.frames] = frames
                kept_objs.put(sample.frames, frames)
            if frames is not None:
                if frames is not sample.frames:  # (a rider's copy of its host's sample: parts no longer hold)
                    sample.frames, sample.parts = frames, None
                out.append(sample)
        if self._tasks is not None:
            out = self._tasks.process(out)
        self.profile.add_samples(out)
        if self.after_batch is not None:
            self.after_batch()
        for rider in self._riders:
            rider._on_samples(list(out))

    # -- lifecycle -------------------------------------------------------
    def start(self) -> ProfileSession:
        with self._lock:
            if self._starts == 0:
                # The origin of sample times is the first start: later runs
                # (decorator calls) are later on the same clock.
                self.profile.meta.start_time_unix_ns = time.time_ns()
                self.profile.meta.start_monotonic_ns = time.monotonic_ns()
            with _active_lock:
                host = next((s for s in reversed(_active) if s.running and s._host is None), None)
            if host is not None:
                self._host = host
                self._window = (time.monotonic_ns(), 1 << 63)
                host._riders = (*host._riders, self)
            else:
                self._window = (0, 1 << 63)
                if self._tasks is not None:
                    self._tasks.start()
                self.sampler.start()
            self._starts += 1
        with _active_lock:
            _active.append(self)
        return self

    def stop(self) -> Profile:
        with _active_lock:
            if self in _active:
                _active.remove(self)
        with self._lock:
            host = self._host
            if host is not None:
                self._window = (self._window[0], time.monotonic_ns())
                host.sampler.collect_now()  # everything sampled until now reaches this session too
                host._riders = tuple(r for r in host._riders if r is not self)
                self._host = None
                stats = host.sampler.stats()
                stats.samples = self.profile.sample_count  # this session's share; the rest is the host's run
                stats.notes = [
                    *stats.notes,
                    f"nested in a running session: sampled by it ({stats.mode} mode, "
                    f"{stats.requested_rate_hz:g} Hz), from this session's start to its stop",
                ]
            else:
                stats = self.sampler.stop()
                if self._tasks is not None:
                    self._tasks.stop()
                    stats.notes = [*stats.notes, *self._tasks.notes(stats.engine)]
            self.record_stats(stats)
        return self.profile

    @property
    def running(self) -> bool:
        return self._host is not None or self.sampler.running

    @property
    def stats(self) -> SamplerStats:
        return self.sampler.stats()

    def record_stats(self, stats: SamplerStats | None = None) -> None:
        """Put the sampler's stats (now, or the given ones) into the profile's metadata."""
        stats = stats if stats is not None else self.sampler.stats()
        self.profile.meta.engine = stats.engine
        self.profile.meta.sampler_stats = stats

    def __enter__(self) -> ProfileSession:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self.profile.note_interrupted("KeyboardInterrupt (Ctrl-C)")
        self.stop()

    # -- results ---------------------------------------------------------
    def save(self, path: str | os.PathLike[str], format: str | None = None) -> str:
        """Write the profile in `format`, else the one its extension names (as `record -o`
        does); an extension that names none is a ValueError (`exporters.UnknownFormat`).

        Returns the format written.
        """
        from . import exporters

        fmt = exporters.output_format(os.fspath(path), format)
        write_atomic(path, exporters.export(self.profile, fmt))
        return fmt


_SAMPLER_FILES = (own_path("sampler.py"), own_path("engines", ""))
_THREAD_HOOK_FILE = own_path("engines", "native.py")


def _in_sampler(frames: tuple[Frame, ...]) -> bool:
    """Samples of the sampler starting or stopping itself are its overhead, not the program."""
    return any(frame.file.startswith(_SAMPLER_FILES) for frame in frames)


def _without_thread_hook(frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """The stack without the native engine's wrapper of `Thread._bootstrap_inner` (it registers each
    `threading` thread), where the wrapper is running the thread: it sits under all of a thread's
    frames and is neither the program nor the sampler's overhead (it made every sample of every
    `threading` thread look like the sampler's own)."""
    for i in range(len(frames) - 1):
        hook, inner = frames[i], frames[i + 1]
        if (
            hook.file == _THREAD_HOOK_FILE
            and hook.name.endswith("_bootstrap_inner")
            and inner.name.endswith("_bootstrap_inner")
        ):
            return frames[:i] + frames[i + 1 :]
    return frames


def _forget_sessions_in_forked_child() -> None:
    """A forked child inherits the parent's list of sessions, but none of them samples there
    (the engine stopped at the fork): a session started in the child gets its own sampler."""
    global _active_lock
    _active_lock = threading.Lock()  # a parent thread may have held it at the fork
    _active.clear()


os.register_at_fork(after_in_child=_forget_sessions_in_forked_child)


def active_sessions() -> list[ProfileSession]:
    """The sessions sampling now (markers go to each)."""
    with _active_lock:
        return list(_active)
