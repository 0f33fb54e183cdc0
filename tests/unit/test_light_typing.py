"""`light_typing`'s stand-ins build what `typing` would, for the classes truestack declares with them."""

from __future__ import annotations

import pickle
import typing

import pytest

from truestack import light_typing


class Light(light_typing.NamedTuple):
    """A row."""

    name: str
    count: int = 0

    def doubled(self) -> int:
        return self.count * 2


class Typed(typing.NamedTuple):
    """A row."""

    name: str
    count: int = 0

    def doubled(self) -> int:
        return self.count * 2


@pytest.mark.parametrize("cls", [Light, Typed], ids=["light", "typing"])
def test_named_tuple_behaves_as_typings(cls):
    row = cls("a")
    assert row == ("a", 0) and row.count == 0 and row.doubled() == 0
    assert cls("b", 3).doubled() == 6
    assert row._replace(count=2) == ("a", 2)
    assert cls._fields == ("name", "count")
    assert cls._field_defaults == {"count": 0}
    assert cls.__doc__ == "A row."
    assert cls.__module__ == __name__ and cls.__qualname__ == cls.__name__
    assert repr(row) == f"{cls.__name__}(name='a', count=0)"
    assert pickle.loads(pickle.dumps(row)) == row
    assert isinstance(row, tuple)
    with pytest.raises(AttributeError):
        row.other = 1  # slots, as a namedtuple's


def test_named_tuple_without_defaults_requires_every_field():
    with pytest.raises(TypeError):
        Light()  # type: ignore[call-arg]


def test_generic_and_protocol_are_plain_bases_at_run_time():
    T = light_typing.TypeVar("T")

    class Box(light_typing.Generic[T]):  # type: ignore[valid-type,misc]
        def __init__(self, value: object) -> None:
            self.value = value

    class Sized(light_typing.Protocol):
        def size(self) -> int: ...

    assert Box(3).value == 3
    assert light_typing.Generic[int, str] is light_typing.Generic
    assert Sized.__mro__[1] is light_typing.Protocol
