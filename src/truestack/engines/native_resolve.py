"""Raw frames drained from the native ring → interned `Frame`s.

The ring holds (code object, instruction offset) pairs, leaf first; a code
object that died before the drain arrives as the (name, file, first line)
tuple its destroy hook saved. Frames are interned per (code, offset): the
same few thousand code objects and offsets make up nearly every sample, so
each is resolved to a line once. Without `--native` the drain's C stack
cache does that interning and calls `frame` once per (code, offset); with
it, calling the resolver interns here.
"""

from __future__ import annotations

import types
from collections.abc import Callable

from ..samples import Frame

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

_CACHE_LIMIT = 20_000  # code objects whose frames stay interned (pinned) at once


def _is_shim(code: types.CodeType) -> bool:
    # 3.13 pushes a static `__init__` cleanup shim (owned by the thread, so
    # the walker cannot tell it from a real frame); its filename gives it away.
    return code.co_filename == "__init__" and code.co_name == "__init__"


class CodeResolver:
    """Calling it turns one sample's raw frames into Frames, root first."""

    def __init__(self, code_line: Callable[[types.CodeType, int], int]) -> None:
        self._code_line = code_line
        self._codes: dict[int, tuple[types.CodeType, dict[int, Frame | None]]] = {}
        self._dead_frames: dict[tuple[Any, int], Frame] = {}

    def __call__(self, flat: tuple[Any, ...], keep_shims: bool = False) -> tuple[Frame, ...]:
        """Raw leaf-first (obj, n) pairs → interned Frames, root first (a shim as None if keep_shims)."""
        frames: list[Any] = []
        codes = self._codes
        for i in range(len(flat) - 2, -1, -2):
            obj, n = flat[i], flat[i + 1]
            if type(obj) is tuple:  # the code died before this drain: resolved by the destroy hook
                frames.append(self._dead(obj, n))
                continue
            entry = codes.get(id(obj))
            if entry is None or entry[0] is not obj:
                if len(codes) > _CACHE_LIMIT:
                    codes.clear()  # releases the pinned code objects
                entry = codes[id(obj)] = (obj, {})
            by_off = entry[1]
            if n in by_off:
                frame = by_off[n]
            else:
                frame = by_off[n] = None if _is_shim(obj) else self._frame(obj, n)
            if frame is not None or keep_shims:
                frames.append(frame)
        return tuple(frames)

    def frame(self, obj: Any, n: int) -> Frame | None:
        """One raw frame resolved (not interned here): None for a shim."""
        if type(obj) is tuple:
            return self._dead(obj, n)
        return None if _is_shim(obj) else self._frame(obj, n)

    def _frame(self, code: types.CodeType, offset: int) -> Frame:
        return Frame(
            getattr(code, "co_qualname", code.co_name),
            code.co_filename,
            max(self._code_line(code, offset), 0),
            code.co_firstlineno,
        )

    def _dead(self, saved: tuple[Any, ...], line: int) -> Frame:
        key = (saved, line)
        frame = self._dead_frames.get(key)
        if frame is None:
            if len(self._dead_frames) > _CACHE_LIMIT:
                self._dead_frames.clear()
            frame = self._dead_frames[key] = Frame(saved[0], saved[1], line, saved[2])
        return frame
