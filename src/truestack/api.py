"""Profiling from Python: a context manager, a decorator, start/stop, markers.

    with truestack.profile(mode="wall", rate="1k") as p:
        work()
    p.save("work.html")            # format from the extension; .tsp otherwise

    @truestack.profile(output="fib.html")
    def fib(n): ...

    truestack.start(rate=250); work(); profile = truestack.stop()

    truestack.mark("loaded")        # instant marker on the calling thread
    with truestack.span("phase 2"):  # interval marker
        ...

Decorator results: every call of the decorated function is profiled and the
calls accumulate in one Profile (`fn.profile`). With `output=PATH` the file is
rewritten after each outermost call so it always holds every call so far;
without it, a summary of all calls is printed on stderr when the interpreter
exits (like `kernprof`). Recursive or concurrent calls share one sampling
session: sampling starts with the first call in flight and stops with the last.

Unlike `truestack record`, the API keeps wall-mode idle samples in what it
saves; `p.profile.without_idle()` gives the py-spy-like view.

Markers go to every session active at the time (a no-op when none is), with
the calling thread's native id and `time.monotonic_ns()`, the clock samples
use.

`ProfileSession` is also what `truestack record` runs, so markers a recorded
script sets land in its profile.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .atomic_file import write_atomic
from .model import Marker, Profile
from .samples import Frame, Sample, SamplerStats
from .sampler import DEFAULT_MAX_DEPTH, Sampler

F = TypeVar("F", bound=Callable[..., Any])
# A stack (root first) -> the stack the profile keeps, or None to drop the sample.
StackFilter = Callable[[tuple[Frame, ...]], "tuple[Frame, ...] | None"]
_UNSEEN: Any = object()
_KEPT_LIMIT = 10_000  # stacks whose filtering is remembered

_active: list["ProfileSession"] = []
_active_lock = threading.Lock()
_started: "ProfileSession | None" = None  # the session truestack.start() opened


class ProfileSession:
    """One sampling session streaming into one Profile.

    Can be entered more than once in sequence (the decorator does): samples
    and markers of every run accumulate in the same Profile.
    """

    def __init__(self, mode: str = "cpu", rate: float | str = 100, engine: str = "auto",
                 max_depth: int = DEFAULT_MAX_DEPTH, command: list[str] | None = None,
                 stack_filter: StackFilter | None = None) -> None:
        self._filter = stack_filter
        self._kept: dict[tuple[Frame, ...], tuple[Frame, ...] | None] = {}  # stack -> what the profile keeps
        self.sampler = Sampler(mode=mode, rate=rate, max_depth=max_depth, engine=engine,
                               on_samples=self._on_samples)
        self.profile = Profile({
            "command": list(command if command is not None else sys.argv),
            "python_version": sys.version.split()[0],
            "truestack_version": _version(),
            "pid": os.getpid(),
            "mode": mode,
            "rate_hz": self.sampler.rate_hz,
            "engine": engine,
            "function_level": False,
            "interrupted": None,
        })
        self._starts = 0
        self._lock = threading.Lock()

    def _on_samples(self, batch: list[Sample]) -> None:
        # The same stacks recur sample after sample: decide once per stack.
        kept = self._kept
        out = []
        for sample in batch:
            frames = kept.get(sample.frames, _UNSEEN)
            if frames is _UNSEEN:
                frames = None if _in_sampler(sample.frames) else sample.frames
                if frames is not None and self._filter is not None:
                    frames = self._filter(frames)
                if len(kept) >= _KEPT_LIMIT:
                    kept.clear()
                kept[sample.frames] = frames
            if frames is not None:
                sample.frames = frames
                out.append(sample)
        self.profile.add_samples(out)

    # -- lifecycle -------------------------------------------------------
    def start(self) -> "ProfileSession":
        with self._lock:
            if self._starts == 0:
                # The origin of sample times is the first start: later runs
                # (decorator calls) are later on the same clock.
                self.profile.meta["start_time_unix_ns"] = time.time_ns()
                self.profile.meta["start_monotonic_ns"] = time.monotonic_ns()
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
            stats = self.sampler.stop()
            self._record_stats(stats)
        return self.profile

    @property
    def running(self) -> bool:
        return self.sampler.running

    @property
    def stats(self) -> SamplerStats:
        return self.sampler.stats()

    def _record_stats(self, stats: SamplerStats) -> None:
        meta = self.profile.meta
        meta["engine"] = stats.engine
        meta["sampler_stats"] = stats.as_dict()

    def __enter__(self) -> "ProfileSession":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            note_interrupted(self.profile, "KeyboardInterrupt (Ctrl-C)")
        self.stop()

    # -- results ---------------------------------------------------------
    def save(self, path: str | os.PathLike, format: str | None = None) -> str:
        """Write the profile; the format follows the extension, else truestack's own (.tsp).

        Returns the format written.
        """
        from . import exporters

        fmt = format or exporters.format_for_path(os.fspath(path)) or "truestack"
        write_atomic(path, exporters.export(self.profile, fmt))
        return fmt


_SAMPLER_FILES = tuple(os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
                       for name in ("sampler.py", "engines" + os.sep))


def _in_sampler(frames: tuple[Frame, ...]) -> bool:
    """Samples of the sampler starting or stopping itself are its overhead, not the program."""
    return any(frame.file.startswith(_SAMPLER_FILES) for frame in frames)


def note_interrupted(profile: Profile, reason: str, thread_id: int | None = None) -> None:
    """Record why a run ended early, in meta and as a marker on the timeline."""
    if not profile.meta.get("interrupted"):
        profile.meta["interrupted"] = reason
    profile.add_marker(Marker(f"interrupted: {reason}", time.monotonic_ns(), None,
                              thread_id if thread_id is not None else threading.get_native_id(),
                              {"reason": reason}))


def _version() -> str:
    from . import __version__

    return __version__


# -- context manager / decorator ---------------------------------------------
class _Profiled:
    """`truestack.profile(...)`: a ProfileSession context manager that is also a decorator."""

    def __init__(self, output: str | os.PathLike | None = None, **options: Any) -> None:
        self._options = options
        self.output = output
        self.session: ProfileSession | None = None

    # context manager
    def __enter__(self) -> ProfileSession:
        self.session = ProfileSession(**self._options)
        return self.session.start()

    def __exit__(self, *exc: Any) -> None:
        assert self.session is not None
        self.session.__exit__(*exc)
        if self.output is not None:
            self.session.save(self.output)

    # decorator
    def __call__(self, func: F) -> F:
        session = ProfileSession(**self._options)
        output = self.output
        depth = 0
        depth_lock = threading.Lock()

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            nonlocal depth
            with depth_lock:
                depth += 1
                if depth == 1:
                    session.start()
            try:
                return func(*args, **kwargs)
            finally:
                with depth_lock:
                    depth -= 1
                    if depth == 0:
                        session.stop()
                        if output is not None:
                            session.save(output)

        wrapper.profile = session.profile  # type: ignore[attr-defined]
        wrapper.session = session  # type: ignore[attr-defined]
        if output is None:
            atexit.register(_print_at_exit, func.__qualname__, session)
        return wrapper  # type: ignore[return-value]


def _print_at_exit(name: str, session: ProfileSession) -> None:
    if session.profile.sample_count == 0 and not session.profile.meta.get("sampler_stats"):
        return  # never called
    from .cli.summary import render_summary

    sys.stderr.write(f"truestack: profile of every call of {name}:\n")
    sys.stderr.write(render_summary(session.profile, top=15))


def profile(func: Callable[..., Any] | None = None, /, *, mode: str = "cpu", rate: float | str = 100,
            engine: str = "auto", max_depth: int = DEFAULT_MAX_DEPTH,
            output: str | os.PathLike | None = None) -> Any:
    """Profile a block (`with profile(...) as p`) or every call of a function (`@profile`).

    With `output`, the profile is saved there when the block ends (context
    manager) or after each call (decorator); the format follows the extension.
    """
    profiled = _Profiled(output=output, mode=mode, rate=rate, engine=engine, max_depth=max_depth)
    if func is not None:
        if not callable(func):
            raise TypeError("truestack.profile() takes keyword options; use profile(mode=..., rate=...)")
        return profiled(func)
    return profiled


def start(mode: str = "cpu", rate: float | str = 100, engine: str = "auto",
          max_depth: int = DEFAULT_MAX_DEPTH) -> ProfileSession:
    """Start profiling the whole process until `stop()`."""
    global _started
    if _started is not None:
        raise RuntimeError("truestack.start() already called; call truestack.stop() first")
    session = ProfileSession(mode=mode, rate=rate, engine=engine, max_depth=max_depth)
    session.start()
    _started = session
    return session


def stop() -> Profile:
    """Stop what `start()` began and return its Profile."""
    global _started
    if _started is None:
        raise RuntimeError("truestack.stop() called without truestack.start()")
    session, _started = _started, None
    return session.stop()


# -- markers -----------------------------------------------------------------
def _sessions() -> list[ProfileSession]:
    with _active_lock:
        return list(_active)


def mark(label: str, **data: Any) -> None:
    """An instant marker on the calling thread in every active profile."""
    sessions = _sessions()
    if not sessions:
        return
    marker_time = time.monotonic_ns()
    tid = threading.get_native_id()
    for session in sessions:
        session.profile.add_marker(Marker(str(label), marker_time, None, tid, dict(data)))


@contextlib.contextmanager
def span(label: str, **data: Any) -> Iterator[None]:
    """An interval marker from entry to exit on the calling thread (also a decorator).

    It goes to the profiles active at entry, even if one stops inside the span.
    """
    sessions = _sessions()
    begin = time.monotonic_ns()
    try:
        yield
    finally:
        if sessions:
            end = time.monotonic_ns()
            tid = threading.get_native_id()
            for session in sessions:
                session.profile.add_marker(Marker(str(label), begin, end, tid, dict(data)))
