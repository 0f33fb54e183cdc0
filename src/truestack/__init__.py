"""truestack: an accurate, low-overhead sampling profiler and debugger for CPython."""
from __future__ import annotations

__version__ = "0.1.0"

from .samples import Frame, Sample, SamplerStats  # noqa: E402
