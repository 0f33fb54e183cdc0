"""Interning tables shared by the profile model: strings, functions, frames, stacks."""

from __future__ import annotations

from array import array
from collections.abc import Iterator

from ..light_typing import Generic, NamedTuple, TypeVar
from ..samples import FRAME_KINDS

KINDS = FRAME_KINDS  # FrameRow.kind indexes this


class StringTable:
    """Strings stored once, referred to by index."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self._index: dict[str, int] = {}

    def intern(self, value: str) -> int:
        idx = self._index.get(value)
        if idx is None:
            idx = self._index[value] = len(self.strings)
            self.strings.append(value)
        return idx

    def __getitem__(self, idx: int) -> str:
        return self.strings[idx]

    def __len__(self) -> int:
        return len(self.strings)


class Func(NamedTuple):
    name: int  # string index of the qualified name
    file: int  # string index of the file path
    first_line: int


class FrameRow(NamedTuple):
    func: int  # index into Profile.funcs
    line: int  # 0 if unknown
    kind: int  # index into KINDS


RowT = TypeVar("RowT", Func, FrameRow)


class InternTable(Generic[RowT]):
    """Rows stored once (functions or frames), referred to by index."""

    def __init__(self) -> None:
        self.rows: list[RowT] = []
        self._index: dict[RowT, int] = {}

    def intern(self, row: RowT) -> int:
        idx = self._index.get(row)
        if idx is None:
            idx = self._index[row] = len(self.rows)
            self.rows.append(row)
        return idx

    def __getitem__(self, idx: int) -> RowT:
        return self.rows[idx]

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[RowT]:
        return iter(self.rows)


class StackTable:
    """Stacks as a prefix tree: stack i = stack prefix[i] + frame frame[i].

    prefix[i] is -1 for a root stack. A stack's prefix always has a smaller
    index than the stack itself, so a forward pass visits parents first.
    """

    def __init__(self) -> None:
        self.prefix: array[int] = array("i")
        self.frame: array[int] = array("i")
        self._index: dict[tuple[int, int], int] = {}

    def intern(self, prefix: int, frame: int) -> int:
        key = (prefix, frame)
        idx = self._index.get(key)
        if idx is None:
            idx = self._index[key] = len(self.frame)
            self.prefix.append(prefix)
            self.frame.append(frame)
        return idx

    def frames_of(self, stack: int) -> list[int]:
        """Frame indices of a stack, root first."""
        out = []
        while stack >= 0:
            out.append(self.frame[stack])
            stack = self.prefix[stack]
        out.reverse()
        return out

    def depth_of(self, stack: int) -> int:
        depth = 0
        while stack >= 0:
            depth += 1
            stack = self.prefix[stack]
        return depth

    def __len__(self) -> int:
        return len(self.frame)
