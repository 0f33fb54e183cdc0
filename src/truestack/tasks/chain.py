"""A suspended task's await chain: its coroutine, what that awaits, ... the future at the end."""

from __future__ import annotations

import gc
import types
from typing import Any, NamedTuple

from ..samples import Frame, FrameKind

_MAX_CHAIN = 256  # a deeper chain is cut (a cycle cannot occur, but a bug elsewhere could make one)
_SYNTHETIC = FrameKind.TRUNCATED.value  # a frame that is not code (as the process roots of --subprocesses)


class AwaitChain(NamedTuple):
    frames: tuple[Frame, ...]  # root (the task's coroutine) first, ending with an `await <what>` frame
    awaited: Any  # the object at the end: a Future, a Task, ... or None
    children: tuple[Any, ...]  # tasks this one waits for directly (awaited Task, gather, TaskGroup)
    running: bool  # the task is being stepped right now (nothing awaited)


# (id of a code object, line) -> (that code, its Frame): chains repeat, frames are interned. By id,
# as hashing a code object hashes its constants every time (~2 us); the entry holds the code, so
# its id is not reused while the entry lives.
_frames: dict[tuple[int, int], tuple[Any, Frame]] = {}
_FRAMES_LIMIT = 100_000


def code_frame(code: Any, line: int) -> Frame:
    """The Frame the native engine makes for this code (qualified name, file, first line)."""
    key = (id(code), line)
    found = _frames.get(key)
    if found is None:
        if len(_frames) > _FRAMES_LIMIT:
            _frames.clear()
        frame = Frame(
            getattr(code, "co_qualname", code.co_name), code.co_filename, max(line or 0, 0), code.co_firstlineno
        )
        found = _frames[key] = (code, frame)
    return found[1]


# type -> (its suspended frame, what it awaits, is it running): one lookup per link
_LINKS: dict[type, tuple[str, str, str]] = {
    types.CoroutineType: ("cr_frame", "cr_await", "cr_running"),
    types.GeneratorType: ("gi_frame", "gi_yieldfrom", "gi_running"),
    types.AsyncGeneratorType: ("ag_frame", "ag_await", "ag_running"),
}


def _future_of(obj: Any) -> Any:
    """The future behind what `await future` left at the end of a chain.

    The C `Future.__await__` returns a `FutureIter`, which exposes nothing but
    refers to its future (gc sees it); the Python one is a generator frame
    whose `self` is the future."""
    if type(obj).__name__ == "FutureIter":
        found = [ref for ref in gc.get_referents(obj) if hasattr(ref, "add_done_callback")]
        return found[0] if found else obj
    return obj


def describe(awaited: Any, running: bool = False) -> str:
    """What a task waits on, as its chain's last frame names it."""
    if awaited is None:
        # Nothing awaited: being stepped right now, or scheduled (not started, or
        # after a bare `yield` such as `asyncio.sleep(0)`'s) and waiting for the loop.
        return "await (running)" if running else "await (ready to run)"
    if hasattr(awaited, "get_coro") and hasattr(awaited, "get_name"):
        return f"await task:{awaited.get_name()}"
    name = type(awaited).__name__
    return "await gather" if name == "_GatheringFuture" else f"await {name}"


def _shielded(future: Any) -> Any:
    """The task behind `asyncio.shield(task)`'s outer future, or None.

    The outer future knows its inner task only through the done-callback
    shield() adds to it (`_outer_done_callback`, a closure over `inner`; the
    same on 3.10-3.13)."""
    for entry in getattr(future, "_callbacks", None) or ():
        callback = entry[0] if isinstance(entry, tuple) else entry
        if getattr(callback, "__name__", "") != "_outer_done_callback":
            continue
        for cell in getattr(callback, "__closure__", None) or ():
            try:
                inner = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if hasattr(inner, "get_coro"):
                return inner
    return None


def _task_group_children(frame: Any) -> tuple[Any, ...]:
    """The tasks of the TaskGroup whose `__aexit__` runs in `frame` (3.11+)."""
    owner = frame.f_locals.get("self")
    tasks = getattr(owner, "_tasks", None) if type(owner).__name__ == "TaskGroup" else None
    return tuple(tasks) if tasks else ()


def await_chain(coro: Any) -> AwaitChain:
    """Walk `coro` (a task's coroutine, suspended) down its `cr_await`/`gi_yieldfrom` links."""
    frames: list[Frame] = []
    children: tuple[Any, ...] = ()
    obj, running = coro, False
    while obj is not None and len(frames) < _MAX_CHAIN:
        link = _LINKS.get(type(obj))
        frame = getattr(obj, link[0]) if link is not None else None
        if frame is None:
            break  # not a coroutine or generator (a Future, ...), or one that has finished
        running = running or getattr(obj, link[2])  # type: ignore[index]  # link is set when frame is
        code = frame.f_code
        frames.append(code_frame(code, frame.f_lineno))
        name = code.co_name
        if name == "__aexit__" or name == "_aexit":
            children = children or _task_group_children(frame)
        nxt = getattr(obj, link[1])  # type: ignore[index]
        if nxt is None and name == "__await__":  # Python Future.__await__: it yields its future
            nxt = frame.f_locals.get("self")
            if nxt is not None and not hasattr(nxt, "add_done_callback"):
                nxt = None
            if nxt is not None:
                frames.pop()  # the future is named next: its __await__ frame says nothing more
        obj = nxt
    awaited = None if obj is None or type(obj) in _LINKS else _future_of(obj)
    label = describe(awaited, running)
    if awaited is not None and hasattr(awaited, "get_coro"):
        children = (awaited,)
    elif awaited is not None and type(awaited).__name__ == "_GatheringFuture":
        children = tuple(getattr(awaited, "_children", ()))
    elif awaited is not None:
        inner = _shielded(awaited)
        if inner is not None:
            children, label = (inner,), "await shield"
    frames.append(_synthetic(label))
    return AwaitChain(tuple(frames), awaited, children, running and awaited is None)


_synthetic_frames: dict[str, Frame] = {}


def _synthetic(name: str) -> Frame:
    found = _synthetic_frames.get(name)
    if found is None:
        if len(_synthetic_frames) > _FRAMES_LIMIT:
            _synthetic_frames.clear()
        found = _synthetic_frames[name] = Frame(name, "", 0, 0, _SYNTHETIC)
    return found
