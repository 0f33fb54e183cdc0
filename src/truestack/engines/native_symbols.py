"""--native: C return addresses → `Frame`s (module, symbol), in the sampled process.

Addresses are mapped to modules through /proc/self/maps (read again when an
address falls outside every known module: a module loaded since), and to
functions through the module's ELF symbol table, read with pyelftools once
per file and kept across runs (`native_symcache.py`): `.symtab` when the
file has one (static functions such as zlib's `deflate_slow` are only
there), else `.dynsym`. A symbol is used only if the
address lies inside it (start + size): the nearest preceding exported symbol
of a stripped library is usually a different function. Anything else reads
`module+0xoffset`: the start of the function holding the address, from
the unwind table's search index (`.eh_frame_hdr`, which stripped files keep),
so that one function's samples count together; the address's own offset when
even that is missing. Offsets are in the file's address space, as
`addr2line` and `perf` want them. C++ names are demangled with the C++ runtime's own
`__cxa_demangle` when libstdc++ can be loaded.

The vDSO, the code the kernel maps into every process with no file behind
it (`clock_gettime`, `gettimeofday`: every clock read of a Python program
runs there), is a module like the others: its ELF image is read from memory.
Code generated at run time into anonymous memory (CPython's perf
trampolines, JITs) is named from the process's perf map
(`native_perfmap.py`), else `[generated code]`, one frame per mapping; an
address in anonymous executable memory already seen does not make
/proc/self/maps be read again.

The symbol's own offset is left out of the frame on purpose: every sample in
one C function then counts for one function, as Python frames count per
function and line.
"""

from __future__ import annotations

import bisect
import ctypes
import ctypes.util
import functools
import io
import os
import struct

from ..samples import Frame, FrameKind
from . import native_symcache
from .native_perfmap import PerfMap

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")

_NATIVE = FrameKind.NATIVE.value
_CACHE_LIMIT = 200_000  # addresses kept resolved
VDSO = "[vdso]"  # the kernel's code mapped into every process: clock_gettime and co. run there
# Executable mappings of generated code that name something, but no ELF file: memfd, shared
# anonymous memory, anonymous memory given a name (prctl PR_SET_VMA_ANON_NAME).
_NO_FILE = ("/memfd:", "/dev/zero", "[anon")
_FUNC_TYPES = ("STT_FUNC", "STT_GNU_IFUNC")
_STT_FUNC, _STT_GNU_IFUNC = 2, 10


class _Module:
    """One mapped ELF file (or in-memory image): its symbols, sorted by address (load bias applied)."""

    def __init__(self, path: str, bias: int, image: tuple[int, int] | None = None) -> None:
        self.path = path
        self.name = os.path.basename(path)
        self.bias = bias
        self.image = image  # (address, size) of a module mapped from no file (the vDSO): read from memory
        self._identity: list[Any] | None = None  # the cache's key for an image (a file's is its stat)
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.names: list[str] = []
        self.error = ""
        self._fde_starts: list[int] | None = None  # function starts from .eh_frame_hdr, read on demand
        self._cached: dict[str, Any] = {}  # what native_symcache kept for this file

    def load(self) -> None:
        image = ctypes.string_at(*self.image) if self.image is not None else None
        if image is not None:  # cached by content: the same kernel maps the same image into every process
            self._identity = native_symcache.image_identity(self.path, image)
        self._cached = cached = native_symcache.load(self.path, self._identity)
        first_vaddr = cached.get("first_vaddr")
        starts, ends = _column(cached, "starts", int), _column(cached, "ends", int)
        names = _column(cached, "names", str)
        if (
            starts is not None
            and ends is not None
            and names is not None
            and isinstance(first_vaddr, int)
            and len(starts) == len(ends) == len(names)
        ):
            self.starts, self.ends, self.names = starts, ends, names
            self.bias -= first_vaddr
            return
        try:
            from elftools.elf.elffile import ELFFile
            from elftools.elf.sections import SymbolTableSection
        except ImportError:
            self.error = "pyelftools is not installed (pip install 'truestack[native]')"
            return
        try:
            if image is not None:  # mapped from no file (the vDSO): its ELF image, read from memory
                first_vaddr = self._take_symbols(ELFFile(io.BytesIO(image)), SymbolTableSection)
            else:
                with open(self.path, "rb") as f:
                    first_vaddr = self._take_symbols(ELFFile(f), SymbolTableSection)
        except Exception as exc:  # a malformed or vanished file: addresses stay module+offset
            self.error = f"{self.path}: {exc}"
            return
        native_symcache.store(
            self.path, self._identity, first_vaddr=first_vaddr, starts=self.starts, ends=self.ends, names=self.names
        )

    def _take_symbols(self, elf: Any, table_type: type) -> int:
        """Keep `elf`'s sized functions (.symtab's, else .dynsym's) by address; returns its first
        load address, which the bias now has taken out."""
        first_vaddr = _first_load_vaddr(elf)
        symbols: list[tuple[int, int, str]] = []
        for section_name in (".symtab", ".dynsym"):
            section = elf.get_section_by_name(section_name)
            if isinstance(section, table_type):
                symbols = _functions(elf, section)
            if symbols:
                break
        self.bias -= first_vaddr
        symbols.sort()
        for start, size, name in symbols:
            self.starts.append(start)
            self.ends.append(start + size)
            self.names.append(name)
        return first_vaddr

    def function_start(self, vaddr: int) -> int | None:
        """Start of the function holding vaddr, from the unwind table (which stripped files keep)."""
        if self._fde_starts is None:
            cached = _column(self._cached, "function_starts", int)
            if cached is not None:
                self._fde_starts = cached
            else:
                self._fde_starts = _eh_frame_starts(self.path) if self.image is None else []
                native_symcache.store(self.path, self._identity, function_starts=self._fde_starts)
        i = bisect.bisect_right(self._fde_starts, vaddr) - 1
        return self._fde_starts[i] if i >= 0 else None

    def symbol(self, vaddr: int) -> str | None:
        i = bisect.bisect_right(self.starts, vaddr) - 1
        # Aliases share a start; the sort put one of them first, any is right.
        while i >= 0 and self.starts[i] <= vaddr:
            if vaddr < self.ends[i]:
                return self.names[i]
            if i == 0 or self.starts[i - 1] != self.starts[i]:
                break
            i -= 1
        return None


def _column(cached: dict[str, Any], name: str, kind: type[T]) -> list[T] | None:
    """A cached list of `kind`s, None if there is none. The cache decodes a column whole, as
    one type, so its first element tells that type."""
    column = cached.get(name)
    if isinstance(column, list) and (not column or type(column[0]) is kind):
        return column
    return None


def _functions(elf: Any, section: Any) -> list[tuple[int, int, str]]:
    """(start, size, name) of the sized functions of a symbol table section.

    pyelftools finds the sections; the fixed-size symbol records are decoded
    here in bulk (its per-symbol objects took 1.4 s for libpython's .symtab,
    with the GIL held, at the first drain)."""
    if elf.elfclass != 64:  # rare here: pyelftools' own (slower) iteration
        return [
            (sym["st_value"], sym["st_size"], sym.name)
            for sym in section.iter_symbols()
            if sym["st_size"] and sym["st_value"] and sym["st_info"]["type"] in _FUNC_TYPES
        ]
    order = "<" if elf.little_endian else ">"
    strtab = elf.get_section(section["sh_link"]).data()
    out = []
    for name, info, _other, _shndx, value, size in struct.iter_unpack(order + "IBBHQQ", section.data()):
        if size and value and (info & 0xF) in (_STT_FUNC, _STT_GNU_IFUNC):
            end = strtab.find(b"\0", name)
            out.append((value, size, strtab[name:end].decode(errors="replace")))
    return out


def _eh_frame_starts(path: str) -> list[int]:
    """Sorted function starts of .eh_frame_hdr's search table (LSB: version 1, encodings as every
    toolchain writes them: pcrel/sdata4 pointer, udata4 count, datarel/sdata4 table); [] otherwise."""
    try:
        from elftools.elf.elffile import ELFFile

        with open(path, "rb") as f:
            section = ELFFile(f).get_section_by_name(".eh_frame_hdr")
            if section is None:
                return []
            data, base = section.data(), section["sh_addr"]
    except Exception:
        return []
    if len(data) < 12 or tuple(data[:4]) != (1, 0x1B, 0x03, 0x3B):
        return []
    (count,) = struct.unpack_from("<I", data, 8)
    table = data[12 : 12 + 8 * count]
    return sorted(base + start for start, _fde in struct.iter_unpack("<ii", table))


def _first_load_vaddr(elf: Any) -> int:
    loads = [seg["p_vaddr"] for seg in elf.iter_segments() if seg["p_type"] == "PT_LOAD"]
    return (min(loads) & ~0xFFF) if loads else 0


@functools.cache
def _demangler() -> Any:
    name = ctypes.util.find_library("stdc++") or "libstdc++.so.6"
    try:
        fn = ctypes.CDLL(name).__cxa_demangle
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    return fn


def demangle(name: str) -> str:
    """A C++ symbol's readable name (unchanged when not mangled or no demangler)."""
    if not name.startswith("_Z"):
        return name
    fn = _demangler()
    if fn is None:
        return name
    status = ctypes.c_int(0)
    ptr = fn(name.encode(), None, None, ctypes.byref(status))
    if not ptr or status.value != 0:
        return name
    try:
        return ctypes.string_at(ptr).decode(errors="replace")
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(ptr))


class Symbolizer:
    """Addresses of this process → interned native Frames, cached per address and module."""

    def __init__(self) -> None:
        self._ranges: list[tuple[int, int, str]] = []  # (start, end, path) of executable mappings
        self._starts: list[int] = []
        self._bias: dict[str, int] = {}
        self._modules: dict[str, _Module] = {}
        self._frames: dict[int, Frame] = {}
        self._vdso: tuple[int, int] | None = None  # (address, size) of this process's vDSO
        # Executable memory mapped from no file (generated code: CPython's perf trampolines, JITs):
        # an address there is named from the perf map, without reading /proc/self/maps again.
        self._anonymous: list[tuple[int, int]] = []
        self._perf_map = PerfMap()
        # One object per distinct frame: the addresses of one function share it, so a stack's
        # C half can be told apart from another's by identity (the collector's merge cache).
        self._interned: dict[Frame, Frame] = {}
        self.errors: list[str] = []

    def _read_maps(self) -> None:
        ranges: list[tuple[int, int, str]] = []
        anonymous: list[tuple[int, int]] = []
        bias: dict[str, int] = {}
        try:
            with open("/proc/self/maps") as f:
                lines = f.read().splitlines()
        except OSError:
            lines = []
        for line in lines:
            parts = line.split(None, 5)
            if "x" in parts[1] and (len(parts) == 5 or parts[5].startswith(_NO_FILE)):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                anonymous.append((lo, hi))
                continue
            if len(parts) < 6 or not (parts[5].startswith("/") or parts[5] == VDSO):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5]
            if path == VDSO:
                self._vdso = (lo, hi - lo)
            if int(parts[2], 16) == 0:
                bias[path] = min(bias.get(path, lo), lo)
            if "x" in parts[1]:
                ranges.append((lo, hi, path))
        ranges.sort()
        self._ranges, self._starts, self._bias = ranges, [r[0] for r in ranges], bias
        self._anonymous = sorted(anonymous)

    def _find(self, addr: int) -> tuple[int, str] | None:
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr < self._ranges[i][1]:
            path = self._ranges[i][2]
            return self._bias.get(path, self._ranges[i][0]), path
        return None

    def _anonymous_mapping(self, addr: int) -> tuple[int, int] | None:
        """The executable mapping of no file that holds `addr`, as of the last read of the maps."""
        i = bisect.bisect_right(self._anonymous, (addr, 1 << 64)) - 1
        return self._anonymous[i] if i >= 0 and addr < self._anonymous[i][1] else None

    def _generated(self, addr: int) -> Frame:
        """The frame of code outside every module: named by the perf map; else one frame per
        mapping of generated code (its samples count together, as one unnamed function's would);
        else, in no executable mapping at all, by its address."""
        name = self._perf_map.name(addr)
        if name is not None:
            return Frame(name, self._perf_map.path, 0, 0, _NATIVE)
        mapping = self._anonymous_mapping(addr)
        if mapping is not None:
            return Frame("[generated code]", f"[anon:0x{mapping[0]:x}]", 0, 0, _NATIVE)
        return Frame(f"[unknown]+0x{addr:x}", "", 0, 0, _NATIVE)

    def _module(self, path: str, base: int) -> _Module:
        mod = self._modules.get(path)
        if mod is None:
            mod = self._modules[path] = _Module(path, base, self._vdso if path == VDSO else None)
            mod.load()
            if mod.error and len(self.errors) < 5:
                self.errors.append(mod.error)
        return mod

    def frame(self, addr: int, leaf: bool) -> Frame:
        """The frame of return address `addr` (the interrupted instruction itself when `leaf`)."""
        # A return address points after its call: the call itself is one byte back
        # (a call that never returns can end its function).
        key = addr if leaf else addr - 1
        frame = self._frames.get(key)
        if frame is not None:
            return frame
        found = self._find(key)
        if found is None and self._anonymous_mapping(key) is None:
            self._read_maps()  # a module loaded since
            found = self._find(key)
        if found is None:
            frame = self._generated(key)
        else:
            mod = self._module(found[1], found[0])
            vaddr = key - mod.bias
            name = mod.symbol(vaddr)
            if name:
                label = demangle(name)
            else:  # stripped: name the function by where it starts, so its samples count together
                start = mod.function_start(vaddr)
                label = f"{mod.name}+0x{start if start is not None else vaddr:x}"
            frame = Frame(label, mod.path, 0, 0, _NATIVE)
        if len(self._frames) > _CACHE_LIMIT:
            self._frames.clear()
            self._interned.clear()
        frame = self._frames[key] = self._interned.setdefault(frame, frame)
        return frame


__all__ = ["Symbolizer", "demangle"]
