"""`Record`: equality and repr over `__slots__`, for the plain classes the
profiled program's process loads before the program starts.

`dataclasses` would write these for us, but importing it (it imports
`inspect`, `ast`, `dis`, `tokenize`) is the largest single item of
`record`'s start-up; these classes write their own `__init__` instead.
"""

from __future__ import annotations


class Record:
    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable, as a dataclass with eq

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"
