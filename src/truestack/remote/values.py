"""Objects of the target read from outside: strings, numbers, short previews, code objects.

Only the target's memory is read, never its code run: a value is shown when
its type is one whose layout we know (int, float, str, bytes, bool, None,
and previews of tuple, list and dict), else as `<type at 0x...>`. Offsets
come from the compiled headers (truestack._remote.OFFSETS); a read that
fails reads as "<unreadable>", never as a value.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from .linetable import addr2line

MAX_STR = 200
MAX_ITEMS = 5
MAX_INT_DIGITS = 40
CO_FAST_CELL, CO_FAST_FREE = 0x40, 0x80
INLINE_VALUES, MANAGED_DICT = 1 << 2, 1 << 4  # Py_TPFLAGS_*


class Unreadable(Exception):
    """A read of the target failed (freed or moving memory)."""


@dataclass(frozen=True)
class CodeInfo:
    name: str
    filename: str
    firstlineno: int
    linetable: bytes
    local_names: tuple[str, ...]
    local_kinds: bytes  # CO_FAST_* per slot (3.10: made up from co_nlocals, co_cellvars and co_freevars)


class Memory:
    """Typed reads of the target through `read(addr, n) -> bytes` (OSError when it fails)."""

    def __init__(
        self,
        read: Callable[[int, int], bytes],
        offsets: dict[str, int],
        symbols: dict[str, int],
        version: tuple[int, int],
    ) -> None:
        self._read = read
        self.off = offsets
        self.sym = symbols
        self.version = version
        self._codes: dict[int, CodeInfo] = {}

    def read(self, addr: int, n: int) -> bytes:
        if addr < 4096:
            raise Unreadable(hex(addr))
        try:
            return self._read(addr, n)
        except OSError as exc:
            if exc.errno in (1, 3):  # EPERM, ESRCH: not a torn read, the caller must know
                raise
            raise Unreadable(hex(addr)) from None

    def u64(self, addr: int) -> int:
        return int.from_bytes(self.read(addr, 8), "little")

    def i64(self, addr: int) -> int:
        return int.from_bytes(self.read(addr, 8), "little", signed=True)

    def i32(self, addr: int) -> int:
        return int.from_bytes(self.read(addr, 4), "little", signed=True)

    def type_of(self, obj: int) -> int:
        return self.u64(obj + self.off["ob_type"])

    def is_a(self, obj: int, type_name: str) -> bool:
        return self.type_of(obj) == self.sym[type_name]

    def cstring(self, addr: int, limit: int = 80) -> str:
        data = b""
        for chunk in range(0, limit, 16):
            try:
                part = self.read(addr + chunk, 16)
            except Unreadable:
                break
            data += part
            if b"\0" in part:
                break
        return data.split(b"\0")[0].decode(errors="replace")

    def string(self, obj: int, limit: int = MAX_STR) -> tuple[str, bool]:
        """(text, cut short?) of an exact str."""
        if not self.is_a(obj, "PyUnicode_Type"):
            raise Unreadable("not a str")
        state = self.i32(obj + self.off["str_state"])
        kind, compact, ascii_ = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
        length = self.i64(obj + self.off["str_length"])
        if not compact or kind not in (1, 2, 4) or length < 0:
            raise Unreadable("legacy str")
        data = obj + self.off["str_ascii_data" if ascii_ else "str_compact_data"]
        n = min(length, limit)
        raw = self.read(data, n * kind) if n else b""
        text = raw.decode({1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind], errors="replace")
        return text, length > limit

    def bytes_(self, obj: int, limit: int = MAX_STR) -> tuple[bytes, bool]:
        """(data, cut short?) of an exact bytes."""
        if not self.is_a(obj, "PyBytes_Type"):
            raise Unreadable("not a bytes")
        size = self.i64(obj + self.off["ob_size"])
        if size < 0:
            raise Unreadable("bad bytes")
        return (self.read(obj + self.off["bytes_data"], min(size, limit)) if size else b""), size > limit

    def int_(self, obj: int) -> int | str:
        if self.off["long_tag"] >= 0:
            tag = self.u64(obj + self.off["long_tag"])
            ndigits, sign = tag >> 3, 1 - (tag & 3)
        else:
            size = self.i64(obj + self.off["ob_size"])
            ndigits, sign = abs(size), (size > 0) - (size < 0)
        if ndigits > MAX_INT_DIGITS:
            return f"<int of {ndigits * self.off['long_shift']} bits>"
        raw = self.read(obj + self.off["long_digits"], 4 * ndigits) if ndigits else b""
        value = 0
        for i in range(ndigits - 1, -1, -1):
            value = (value << self.off["long_shift"]) | int.from_bytes(raw[4 * i : 4 * i + 4], "little")
        return sign * value

    def code(self, code: int) -> CodeInfo:
        """Names, file, line table and local names of a code object (cached per snapshot attempt)."""
        if code in self._codes:
            return self._codes[code]
        off = self.off
        name_field = off["co_qualname"] if off["co_qualname"] >= 0 else off["co_name"]
        name, _ = self.string(self.u64(code + name_field))
        filename, _ = self.string(self.u64(code + off["co_filename"]), limit=4096)
        firstlineno = self.i32(code + off["co_firstlineno"])
        table, _ = self.bytes_(self.u64(code + off["co_linetable"]), limit=1 << 22)
        if off["co_localsplusnames"] >= 0:
            names_tuple = self.u64(code + off["co_localsplusnames"])
            kinds, _ = self.bytes_(self.u64(code + off["co_localspluskinds"]), limit=1 << 16)
            count = self.i32(code + off["co_nlocalsplus"])
            names = self._names(names_tuple, count)
        else:  # 3.10: f_localsplus holds the locals, then the cells, then the free variables
            names = self._names(self.u64(code + off["co_varnames"]), self.i32(code + off["co_nlocals"]))
            cells = self._names(self.u64(code + off["co_cellvars"]), 4096)
            frees = self._names(self.u64(code + off["co_freevars"]), 4096)
            kinds = bytes(len(names)) + bytes([CO_FAST_CELL]) * len(cells) + bytes([CO_FAST_FREE]) * len(frees)
            names += cells + frees
        info = CodeInfo(name, filename, firstlineno, table, names, kinds)
        self._codes[code] = info
        return info

    def _names(self, tup: int, count: int) -> tuple[str, ...]:
        size = self.i64(tup + self.off["ob_size"])
        count = max(0, min(count, size, 4096))
        items = self.read(tup + self.off["tuple_items"], 8 * count) if count else b""
        return tuple(self.string(int.from_bytes(items[8 * i : 8 * i + 8], "little"))[0] for i in range(count))

    def line(self, info: CodeInfo, offset: int) -> int:
        return addr2line(info.linetable, info.firstlineno, offset, self.version)

    def forget_codes(self) -> None:
        self._codes.clear()

    def local_slots(self, frame: int, info: CodeInfo) -> bytes:
        """The frame's local variable slots, raw: the same twice means the frame held still between."""
        n = len(info.local_names)
        return self.read(frame + self.off["frame_localsplus"], 8 * n) if n else b""

    def locals_(self, raw: bytes, info: CodeInfo) -> dict[str, str]:
        """The bound local variables (cells read through) of slots `raw`, as previews."""
        out: dict[str, str] = {}
        for i, name in enumerate(info.local_names):
            value = int.from_bytes(raw[8 * i : 8 * i + 8], "little")
            if not value:
                continue
            try:
                kind = info.local_kinds[i] if i < len(info.local_kinds) else 0
                if kind & (CO_FAST_CELL | CO_FAST_FREE) and self.is_a(value, "PyCell_Type"):
                    value = self.u64(value + self.off["cell_ref"])
                    if not value:
                        continue
                out[name] = self.preview(value)
            except Unreadable:
                out[name] = "<unreadable>"
        return out

    def preview(self, obj: int, depth: int = 0) -> str:
        """repr() of simple values, short previews of containers, `<type at 0x...>` for the rest."""
        sym = self.sym
        if obj == sym["_Py_NoneStruct"]:
            return "None"
        if obj == sym["_Py_TrueStruct"]:
            return "True"
        if obj == sym["_Py_FalseStruct"]:
            return "False"
        t = self.type_of(obj)
        if t == sym["PyLong_Type"]:
            return str(self.int_(obj))
        if t == sym["PyFloat_Type"]:
            return repr(struct.unpack("<d", self.read(obj + self.off["float_value"], 8))[0])
        if t == sym["PyUnicode_Type"]:
            text, cut = self.string(obj)
            return repr(text) + ("..." if cut else "")
        if t == sym["PyBytes_Type"]:
            data, cut = self.bytes_(obj)
            return repr(data) + ("..." if cut else "")
        if t in (sym["PyTuple_Type"], sym["PyList_Type"]):
            return self._sequence(obj, t == sym["PyTuple_Type"], depth)
        if t == sym["PyDict_Type"]:
            return self._dict(obj, depth)
        if t == sym["PyFunction_Type"]:
            return f"<function {self.string(self.u64(obj + self.off['func_qualname']))[0]} at {obj:#x}>"
        return f"<{self.cstring(self.u64(t + self.off['tp_name']))} object at {obj:#x}>"

    def _items(self, addrs: list[int], depth: int) -> list[str]:
        return [self.preview(a, depth + 1) if a else "<NULL>" for a in addrs]

    def _sequence(self, obj: int, is_tuple: bool, depth: int) -> str:
        size = self.i64(obj + self.off["ob_size"])
        if depth >= 2:
            return f"({'...' if size else ''})" if is_tuple else f"[{'...' if size else ''}]"
        n = max(0, min(size, MAX_ITEMS))
        base = obj + self.off["tuple_items"] if is_tuple else self.u64(obj + self.off["list_items"])
        raw = self.read(base, 8 * n) if n else b""
        items = self._items([int.from_bytes(raw[8 * i : 8 * i + 8], "little") for i in range(n)], depth)
        if size > n:
            items.append(f"... ({size} items)")
        body = ", ".join(items) + ("," if is_tuple and size == 1 else "")
        return f"({body})" if is_tuple else f"[{body}]"

    def _entries(self, keys: int, values: int, limit: int = 64) -> list[tuple[int, int]]:
        """(key, value) addresses of a dict's keys object, in entry order; `values`: a split table's values."""
        off = self.off
        nentries = self.i64(keys + off["dk_nentries"])
        if "dk_size" in off:  # 3.10
            size = self.i64(keys + off["dk_size"])
            width = 1 if size <= 0xFF else 2 if size <= 0xFFFF else 4 if size <= 0xFFFFFFFF else 8
            entries, entry_size, key_at = keys + off["dk_indices"] + size * width, 24, 8
        else:
            index_bytes = 1 << self.read(keys + off["dk_log2_index_bytes"], 1)[0]
            general = self.read(keys + off["dk_kind"], 1)[0] == 0
            entries = keys + off["dk_indices"] + index_bytes
            entry_size, key_at = (24, 8) if general else (16, 0)
        n = max(0, min(nentries, limit))
        raw = self.read(entries, n * entry_size) if n else b""
        split = self.read(values + off["dict_values_items"], 8 * n) if values and n else b""
        out = []
        for i in range(n):
            key = int.from_bytes(raw[i * entry_size + key_at : i * entry_size + key_at + 8], "little")
            at = i * entry_size + key_at + 8
            value = int.from_bytes(split[8 * i : 8 * i + 8] if split else raw[at : at + 8], "little")
            if key and value:
                out.append((key, value))
        return out

    def _dict(self, obj: int, depth: int) -> str:
        used = self.i64(obj + self.off["dict_used"])
        if depth >= 2 or used == 0:
            return "{...}" if used else "{}"
        keys, values = self.u64(obj + self.off["dict_keys"]), self.u64(obj + self.off["dict_values"])
        pairs = [
            f"{self.preview(k, depth + 1)}: {self.preview(v, depth + 1)}"
            for k, v in self._entries(keys, values, limit=MAX_ITEMS if not values else 64)[:MAX_ITEMS]
        ]
        if used > len(pairs):
            pairs.append(f"... ({used} items)")
        return "{" + ", ".join(pairs) + "}"

    def _lookup(self, keys: int, values: int, name: str) -> int:
        for key, value in self._entries(keys, values, limit=256):
            if self.is_a(key, "PyUnicode_Type") and self.string(key)[0] == name:
                return value
        return 0

    def attribute(self, obj: int, name: str) -> int:
        """The value of `obj.name` found in its instance attributes (no descriptor, no code run), or 0."""
        off, t = self.off, self.type_of(obj)
        flags = self.u64(t + off["tp_flags"])

        def keys() -> int:  # a split table's keys, shared by the type's instances
            return self.u64(t + off["ht_cached_keys"])

        if self.version >= (3, 11) and flags & MANAGED_DICT:
            if self.version >= (3, 13):
                values = obj + self.i64(t + off["tp_basicsize"])
                if flags & INLINE_VALUES and self.read(values + 3, 1)[0]:  # PyDictValues.valid
                    return self._lookup(keys(), values, name)
                d = self.u64(obj - 24)
            elif self.version >= (3, 12):
                dorv = self.u64(obj - 24)
                if dorv & 1:
                    return self._lookup(keys(), dorv + 1, name)
                d = dorv
            else:
                values = self.u64(obj - 32)
                if values:
                    return self._lookup(keys(), values, name)
                d = self.u64(obj - 24)
        else:
            at = self.i64(t + off["tp_dictoffset"])
            d = self.u64(obj + at) if at > 0 else 0
        if not d or not self.is_a(d, "PyDict_Type"):
            return 0
        return self._lookup(self.u64(d + off["dict_keys"]), self.u64(d + off["dict_values"]), name)
