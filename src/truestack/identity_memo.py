"""`IdentityMemo`: what was worked out for an object, found by its identity.

The native drain hands every sample of a stack it has seen before over as
the very same tuple (its C stack cache). Looking such a stack up by value
hashes every frame of it, sample after sample; by identity it is one probe
on an int. The memo holds its keys alive, so an id cannot be reused by a
new object while it is remembered, and starts over at `limit` entries.
"""

from __future__ import annotations

from .light_typing import Generic, TypeVar

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

K = TypeVar("K")
V = TypeVar("V")
MISSING: Any = object()


class IdentityMemo(Generic[K, V]):
    __slots__ = ("_limit", "_memo")

    def __init__(self, limit: int = 20_000) -> None:
        self._limit = limit
        self._memo: dict[int, tuple[K, V]] = {}

    def get(self, key: K) -> V:
        """The value remembered for this very object, or MISSING."""
        entry = self._memo.get(id(key))
        return entry[1] if entry is not None and entry[0] is key else MISSING

    def put(self, key: K, value: V) -> None:
        memo = self._memo
        if len(memo) >= self._limit:
            memo.clear()
        memo[id(key)] = (key, value)

    def clear(self) -> None:
        self._memo.clear()
