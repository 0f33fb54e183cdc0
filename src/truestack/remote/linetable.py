"""Byte offset → line number from a code object's line table, out of process.

What `PyCode_Addr2Line(code, offset)` computes, from the table's bytes: the
3.10 format (PEP 626: pairs of unsigned byte delta, signed line delta) and
the 3.11+ location table (Objects/locations.md).
"""

from __future__ import annotations

from collections.abc import Iterator


def _ranges_310(table: bytes, firstlineno: int) -> Iterator[tuple[int, int, int]]:
    line, end = firstlineno, 0
    for i in range(0, len(table) - 1, 2):
        start, end = end, end + table[i]
        delta = table[i + 1] - 256 if table[i + 1] > 127 else table[i + 1]
        if delta == -128:
            yield start, end, -1
        else:
            line += delta
            yield start, end, line


def _varint(table: bytes, i: int) -> tuple[int, int]:
    b = table[i]
    value, shift = b & 63, 0
    while b & 64:
        i += 1
        b = table[i]
        shift += 6
        value |= (b & 63) << shift
    return value, i + 1


def _svarint(table: bytes, i: int) -> tuple[int, int]:
    value, i = _varint(table, i)
    return (-(value >> 1) if value & 1 else value >> 1), i


def _ranges_311(table: bytes, firstlineno: int) -> Iterator[tuple[int, int, int]]:
    line, addr, i = firstlineno, 0, 0
    while i < len(table):
        head = table[i]
        code, length = (head >> 3) & 15, (head & 7) + 1
        i += 1
        delta, known = 0, True
        if code == 15:
            known = False
        elif code == 14:
            delta, i = _svarint(table, i)
            for _ in range(3):  # end line delta, start column, end column
                _, i = _varint(table, i)
        elif code == 13:
            delta, i = _svarint(table, i)
        elif code >= 10:
            delta, i = code - 10, i + 2
        else:
            i += 1
        line += delta
        yield addr, addr + 2 * length, line if known else -1
        addr += 2 * length


def addr2line(table: bytes, firstlineno: int, offset: int, version: tuple[int, int]) -> int:
    """The line of the instruction at byte `offset`, -1 where the table has none."""
    if offset < 0:
        return firstlineno
    ranges = _ranges_310 if version < (3, 11) else _ranges_311
    try:
        for start, end, line in ranges(table, firstlineno):
            if start <= offset < end:
                return line
    except IndexError:  # a table cut short: not a line we can vouch for
        return -1
    return -1
