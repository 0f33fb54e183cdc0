"""Profiling from Python: a context manager, a decorator, start/stop, markers.

    with truestack.profile(mode="wall", rate="1k") as p:
        work()
    p.save("work.html")            # format from the extension (or format=...), as `record -o`

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

`ProfileSession` (in `session.py`) is also what `truestack record` runs, so
markers a recorded script sets land in its profile.
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

from .model import Marker, Profile
from .session import ProfileSession, active_sessions
from .settings import DEFAULT_MAX_DEPTH

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])

_started: ProfileSession | None = None  # the session truestack.start() opened


# -- context manager / decorator ---------------------------------------------
class _Profiled:
    """`truestack.profile(...)`: a ProfileSession context manager that is also a decorator."""

    def __init__(self, output: str | os.PathLike[str] | None = None, **options: Any) -> None:
        if output is not None:  # a name that says no format fails now, not after the run
            from .exporters import output_format

            output_format(os.fspath(output))
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
    if session.profile.sample_count == 0 and session.profile.meta.sampler_stats is None:
        return  # never called
    from .exporters.summary import render_summary

    sys.stderr.write(f"truestack: profile of every call of {name}:\n")
    sys.stderr.write(render_summary(session.profile, top=15))


def profile(
    func: Callable[..., Any] | None = None,
    /,
    *,
    mode: str = "cpu",
    rate: float | str = 100,
    engine: str = "auto",
    max_depth: int = DEFAULT_MAX_DEPTH,
    output: str | os.PathLike[str] | None = None,
    async_tasks: bool = False,
    native: bool | str = False,
) -> Any:
    """Profile a block (`with profile(...) as p`) or every call of a function (`@profile`).

    With `output`, the profile is saved there when the block ends (context
    manager) or after each call (decorator); the format follows the extension.
    With `async_tasks`, samples are split per asyncio task and, in wall mode,
    each pending task's await chain is recorded as `awaiting` time (`--async`).
    `native=True` adds the C frames (needs libunwind; `native="all"` keeps the
    interpreter's plumbing frames too).
    """
    profiled = _Profiled(output=output, **_session_options(mode, rate, engine, max_depth, async_tasks, native))
    if func is not None:
        if not callable(func):
            raise TypeError("truestack.profile() takes keyword options; use profile(mode=..., rate=...)")
        return profiled(func)
    return profiled


def _session_options(
    mode: str, rate: float | str, engine: str, max_depth: int, async_tasks: bool, native: bool | str
) -> dict[str, Any]:
    """ProfileSession's keyword arguments from the API's (`native` as True/False/"all")."""
    return {
        "mode": mode,
        "rate": rate,
        "engine": engine,
        "max_depth": max_depth,
        "async_tasks": async_tasks,
        "native": _native_setting(native),
    }


def _native_setting(native: bool | str) -> str:
    if native is True or native == "on":
        return "on"
    if native is False or native == "off":
        return "off"
    if native == "all":
        return "all"
    raise ValueError(f"native must be True, False or 'all', not {native!r}")


def start(
    mode: str = "cpu",
    rate: float | str = 100,
    engine: str = "auto",
    max_depth: int = DEFAULT_MAX_DEPTH,
    async_tasks: bool = False,
    native: bool | str = False,
) -> ProfileSession:
    """Start profiling the whole process until `stop()` (`async_tasks` and `native` as for `profile()`)."""
    global _started
    if _started is not None:
        raise RuntimeError("truestack.start() already called; call truestack.stop() first")
    session = ProfileSession(**_session_options(mode, rate, engine, max_depth, async_tasks, native))
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
def mark(label: str, **data: Any) -> None:
    """An instant marker on the calling thread in every active profile."""
    sessions = active_sessions()
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
    sessions = active_sessions()
    begin = time.monotonic_ns()
    try:
        yield
    finally:
        if sessions:
            end = time.monotonic_ns()
            tid = threading.get_native_id()
            for session in sessions:
                session.profile.add_marker(Marker(str(label), begin, end, tid, dict(data)))
