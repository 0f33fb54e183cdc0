"""truestack: an accurate, low-overhead sampling profiler and debugger for CPython."""

from __future__ import annotations

__version__ = "0.1.0"

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Any

    from .samples import Frame as Frame
    from .samples import Sample as Sample
    from .samples import SamplerStats as SamplerStats

# Loaded on first use so `import truestack` (and the CLI) stays cheap and does
# not pull in the sampler before the target program runs.
_LAZY = {
    "Frame": ("samples", "Frame"),
    "Sample": ("samples", "Sample"),
    "SamplerStats": ("samples", "SamplerStats"),
    "Sampler": ("sampler", "Sampler"),
    "Profile": ("model", "Profile"),
    "load": ("model", "load"),
    "profile": ("api", "profile"),
    "start": ("api", "start"),
    "stop": ("api", "stop"),
    "mark": ("api", "mark"),
    "span": ("api", "span"),
}

__all__ = [*_LAZY]


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'truestack' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(f".{module_name}", __name__), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
