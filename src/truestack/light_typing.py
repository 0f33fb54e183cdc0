"""The names of `typing` that a class statement needs at run time, without importing `typing`.

Importing `typing` costs ~14 ms at start-up and ~10 ms more when the
interpreter exits, on a 2-vCPU VM, and `truestack record` waits for both:
the profiled program's process imports the model before the program starts,
and ends with the program. Annotations are strings in every module
(`from __future__ import annotations`), so only base classes and type
variables are left, and here they are: `typing`'s own for the type checker,
and at run time light stand-ins that build the same classes.
"""

from __future__ import annotations

import collections

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Generic as Generic
    from typing import NamedTuple as NamedTuple
    from typing import Protocol as Protocol
    from typing import TypeVar as TypeVar
else:

    class _NamedTupleMeta(type):
        """`class Row(NamedTuple): a: int; b: str = ""` gives the class `collections.namedtuple`
        builds, with the body's docstring, methods and defaults, as `typing.NamedTuple` does."""

        def __new__(mcls, name, bases, namespace):
            if not bases:  # `NamedTuple` itself
                return super().__new__(mcls, name, bases, namespace)
            fields = list(namespace.get("__annotations__", {}))
            defaults = [namespace[field] for field in fields if field in namespace]
            cls = collections.namedtuple(name, fields, defaults=defaults, module=namespace["__module__"])
            for key, value in namespace.items():
                if key not in fields and key not in ("__annotations__", "__module__", "__slots__"):
                    setattr(cls, key, value)
            return cls

    class NamedTuple(metaclass=_NamedTupleMeta):
        pass

    class Generic:
        """A base for generic classes: `Generic[T]` is `Generic` (type parameters matter only
        to the type checker)."""

        __slots__ = ()

        def __class_getitem__(cls, parameters):
            return cls

    class Protocol:
        """A base for protocols, which only the type checker reads."""

        __slots__ = ()

    def TypeVar(name, *constraints, **options):  # typing's name
        return name
