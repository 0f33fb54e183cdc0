"""Source listings for the shell: numbered lines, current-line marker, and
syntax highlighting with pygments when it is installed and colour is on."""

from __future__ import annotations

import linecache
import os
from typing import Any

_highlighted: dict[tuple[str, int], list[str]] = {}


def color_wanted(stream: object) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def _highlight(filename: str, lines: list[str]) -> list[str]:
    key = (filename, hash(tuple(lines)))
    cached = _highlighted.get(key)
    if cached is None:
        try:
            from pygments import highlight
            from pygments.formatters import TerminalFormatter
            from pygments.lexers import PythonLexer
        except ImportError:
            cached = [line.rstrip("\n") for line in lines]
        else:
            text = highlight("".join(lines), PythonLexer(stripnl=False, ensurenl=True), TerminalFormatter())
            cached = text.split("\n")
            if len(cached) < len(lines):  # pygments may drop blank lines at the edges
                cached = [line.rstrip("\n") for line in lines]
        _highlighted[key] = cached
    return cached


def get_lines(filename: str, module_globals: dict[str, Any] | None = None) -> list[str]:
    linecache.checkcache(filename)
    return linecache.getlines(filename, module_globals)


def format_lines(
    filename: str,
    first: int,
    last: int,
    current: int | None = None,
    breaks: frozenset[int] | set[int] = frozenset(),
    color: bool = False,
    module_globals: dict[str, Any] | None = None,
) -> list[str]:
    """Lines first..last (1-based, inclusive) as 'MB  NNN  text'."""
    lines = get_lines(filename, module_globals)
    if not lines:
        return [f"[source of {filename} not available]"]
    first = max(1, first)
    last = min(len(lines), last)
    shown = _highlight(filename, lines) if color else [line.rstrip("\n") for line in lines]
    width = len(str(last))
    out = []
    for number in range(first, last + 1):
        marker = "->" if number == current else "  "
        bp = "B" if number in breaks else " "
        out.append(f"{marker}{bp}{number:>{width}}  {shown[number - 1]}")
    return out


def context(filename: str, line: int, before: int, after: int, **kw: Any) -> list[str]:
    return format_lines(filename, line - before, line + after, current=line, **kw)


__all__ = ["color_wanted", "context", "format_lines", "get_lines"]
