"""Raw frames drained from the native ring → interned `Frame`s.

The ring holds (code object, instruction offset) pairs, leaf first; a code
object that died before the drain arrives as the (name, file, first line)
tuple its destroy hook saved. Frames are interned per (code, offset): the
same few thousand code objects and offsets make up nearly every sample, so
each is resolved to a line once: the drain's C stack cache does that
interning and calls `frame` once per (code, offset), with or without
`--native`.
"""

from __future__ import annotations

import types
from collections.abc import Callable

from ..samples import Frame

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

_CACHE_LIMIT = 20_000  # frames of dead code objects kept interned


def _is_shim(code: types.CodeType) -> bool:
    # 3.13 pushes a static `__init__` cleanup shim (owned by the thread, so
    # the walker cannot tell it from a real frame); its filename gives it away.
    return code.co_filename == "__init__" and code.co_name == "__init__"


class CodeResolver:
    """Turns a raw frame into a Frame, for the drain's stack cache (`frame`)."""

    def __init__(self, code_line: Callable[[types.CodeType, int], int]) -> None:
        self._code_line = code_line
        self._dead_frames: dict[tuple[Any, int], Frame] = {}

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
