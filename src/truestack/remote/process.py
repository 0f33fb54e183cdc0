"""The target process: is it there, is it Python, which version, where is its runtime.

The interpreter's symbols (`_PyRuntime`, the type objects) are found in the
ELF file that holds them (libpython, or the executable when Python is linked
statically), mapped in /proc/PID/maps: when the target maps the very file
this interpreter runs, our own address of each symbol, moved by the
difference of the two load addresses, is the target's; otherwise the file's
symbol table is read with pyelftools (the `dump` extra).
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import sys
from dataclasses import dataclass

from ..errors import TruestackError

SUPPORTED = ((3, 10), (3, 11), (3, 12), (3, 13))
SYMBOLS = (
    "_PyRuntime",
    "PyCode_Type",
    "PyFrame_Type",
    "PyGen_Type",
    "PyCoro_Type",
    "PyAsyncGen_Type",
    "PyLong_Type",
    "PyBool_Type",
    "PyFloat_Type",
    "PyUnicode_Type",
    "PyBytes_Type",
    "PyTuple_Type",
    "PyList_Type",
    "PyDict_Type",
    "PyCell_Type",
    "PyFunction_Type",
    "_Py_NoneStruct",
    "_Py_TrueStruct",
    "_Py_FalseStruct",
)
_LIBPYTHON = re.compile(r"/libpython(\d)\.(\d+)[^/]*\.so")
_EXE_VERSION = re.compile(r"python(\d)\.(\d+)")


class RemoteError(TruestackError):
    """The target cannot be read; the message is one line that says why and what to do."""


class VersionMismatch(RemoteError):
    """The target runs another Python version than this interpreter: dump must run under one of that version."""

    def __init__(self, version: tuple[int, int], candidates: list[str]) -> None:
        self.version = version
        self.candidates = candidates
        super().__init__(f"the target runs Python {version[0]}.{version[1]}")


def permission_message(pid: int, command: str = "dump") -> str:
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as fh:
            scope = fh.read().strip()
    except OSError:
        scope = ""
    yama = f"kernel.yama.ptrace_scope is {scope}" if scope else "no kernel.yama.ptrace_scope on this kernel"
    return (
        f"permission denied reading process {pid}: run as its user or root (`sudo truestack {command} {pid}`); in a "
        f"container add `--cap-add SYS_PTRACE`; {yama} (`sudo sysctl kernel.yama.ptrace_scope=0` lets a user "
        "read its own processes)"
    )


@dataclass(frozen=True)
class Mapping:
    start: int
    offset: int
    dev: str
    inode: int
    path: str


@dataclass(frozen=True)
class Image:
    """The ELF file holding the interpreter, as mapped in one process."""

    path: str
    base: int  # where its first page (file offset 0) is mapped
    dev: str
    inode: int


def check_pid(pid: int) -> None:
    if pid <= 0 or not os.path.isdir(f"/proc/{pid}"):
        raise RemoteError(f"no such process: {pid}")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise RemoteError(f"no such process: {pid}") from None
    except PermissionError:
        pass  # another user's: reading it decides


def read_maps(pid: int) -> list[Mapping]:
    try:
        with open(f"/proc/{pid}/maps") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        raise RemoteError(f"no such process: {pid}") from None
    except PermissionError:
        raise RemoteError(permission_message(pid)) from None
    out = []
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            out.append(Mapping(int(parts[0].split("-")[0], 16), int(parts[2], 16), parts[3], int(parts[4]), parts[5]))
    return out


def exe_path(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except FileNotFoundError:
        raise RemoteError(f"no such process: {pid}") from None
    except PermissionError:
        raise RemoteError(permission_message(pid)) from None
    except OSError as exc:  # a kernel thread has no executable
        raise RemoteError(f"process {pid} is not a Python process ({exc.strerror})") from None


def find_image(pid: int) -> Image | None:
    """libpython when the process maps one, else its executable; None if neither is mapped."""
    maps = read_maps(pid)
    exe = exe_path(pid)
    for want in (lambda m: bool(_LIBPYTHON.search(m.path)), lambda m: m.path == exe):
        hits = [m for m in maps if want(m)]
        if hits:
            first = min(hits, key=lambda m: (m.offset, m.start))
            base = first.start - first.offset if first.offset else first.start
            return Image(first.path, base, first.dev, first.inode)
    return None


def _own_symbols(own: Image, target: Image) -> dict[str, int]:
    out = {}
    for name in (*SYMBOLS, "Py_Version"):
        try:
            ours = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, name))
        except ValueError:
            continue
        out[name] = ours - own.base + target.base
    return out


def _elf_symbols(pid: int, image: Image) -> tuple[dict[str, int], tuple[int, int] | None]:
    """Symbols of the image's file, moved to where the target maps it, and its Py_Version when it has one."""
    try:
        from elftools.elf.elffile import ELFFile
        from elftools.elf.sections import SymbolTableSection
    except ImportError:
        if not re.search(r"python", os.path.basename(image.path)):
            raise RemoteError(f"process {pid} is not a Python process (it runs {image.path})") from None
        raise RemoteError(
            f"process {pid} runs {image.path}, not the interpreter running truestack: reading its symbols needs "
            "pyelftools (`pip install 'truestack[dump]'`)"
        ) from None
    path = image.path if os.path.exists(image.path) else f"/proc/{pid}/root{image.path}"
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below, after the lazy section reads
    except OSError as exc:
        raise RemoteError(f"cannot open {image.path} of process {pid}: {exc.strerror}") from None
    with fh:
        try:
            elf = ELFFile(fh)
            loads = [seg["p_vaddr"] for seg in elf.iter_segments() if seg["p_type"] == "PT_LOAD"]
            bias = 0 if elf["e_type"] == "ET_EXEC" else image.base - (min(loads) & ~0xFFF if loads else 0)
            found: dict[str, int] = {}
            for section in elf.iter_sections():
                if not isinstance(section, SymbolTableSection):
                    continue
                for name in (*SYMBOLS, "Py_Version"):
                    if name in found:
                        continue
                    symbols = section.get_symbol_by_name(name)
                    if symbols and symbols[0]["st_value"]:
                        found[name] = symbols[0]["st_value"]
            version = None
            if "Py_Version" in found:
                version = _read_version(elf, found["Py_Version"])
        except Exception as exc:  # pyelftools raises its own errors on a malformed file
            raise RemoteError(f"cannot read the symbols of {image.path}: {exc}") from None
    return {name: value + bias for name, value in found.items()}, version


def _read_version(elf: object, vaddr: int) -> tuple[int, int] | None:
    for section in elf.iter_sections():  # type: ignore[attr-defined]
        addr, size = section["sh_addr"], section["sh_size"]
        if section["sh_type"] != "SHT_NOBITS" and addr <= vaddr < addr + size:
            data = section.data()[vaddr - addr : vaddr - addr + 4]
            value = int.from_bytes(data, "little")
            return (value >> 24) & 0xFF, (value >> 16) & 0xFF
    return None


@dataclass
class Target:
    pid: int
    exe: str
    image: Image
    version: tuple[int, int]
    symbols: dict[str, int]
    how: str  # "same interpreter file" or "ELF symbols"


def _target_path(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = dict(item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item)
    except OSError:
        return []
    return [d for d in env.get(b"PATH", b"").decode(errors="replace").split(":") if d.startswith("/")]


def interpreter_candidates(pid: int, exe: str) -> list[str]:
    """Interpreters to run dump under for this target: the argv[0] it was started as (a venv's python keeps
    its site-packages), then its executable."""
    out = []
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv0 = fh.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        argv0 = ""
    if argv0 and "/" not in argv0:  # found on the target's PATH
        argv0 = next((p for p in (os.path.join(d, argv0) for d in _target_path(pid)) if os.access(p, os.X_OK)), "")
    elif argv0 and not argv0.startswith("/"):  # relative to the target's working directory
        try:
            argv0 = os.path.join(os.readlink(f"/proc/{pid}/cwd"), argv0)
        except OSError:
            argv0 = ""
    if argv0 and os.access(argv0, os.X_OK):
        out.append(os.path.abspath(argv0))
    if exe not in out and os.access(exe, os.X_OK):
        out.append(exe)
    return out


def locate(pid: int) -> Target:
    """Everything needed to read the target, or RemoteError saying why it cannot be read."""
    check_pid(pid)
    image = find_image(pid)
    exe = exe_path(pid)
    if image is None:
        raise RemoteError(f"process {pid} is not a Python process (it runs {exe})")
    own = find_image(os.getpid())
    version: tuple[int, int] | None
    same_file = own is not None and (own.dev, own.inode) == (image.dev, image.inode)
    if same_file and own is not None and os.environ.get("TRUESTACK_DUMP_SYMBOLS") != "elf":
        symbols, version, how = _own_symbols(own, image), sys.version_info[:2], "same interpreter file"
    else:
        symbols, version = _elf_symbols(pid, image)
        how = "ELF symbols"
    if version is None:  # 3.10 and older have no Py_Version: the file's name tells
        m = _LIBPYTHON.search(image.path) or _EXE_VERSION.search(os.path.basename(image.path))
        version = (int(m.group(1)), int(m.group(2))) if m else None
    if version is not None and version not in SUPPORTED:
        raise RemoteError(
            f"unsupported Python version {version[0]}.{version[1]} in process {pid} (truestack supports "
            "CPython 3.10–3.13)"
        )
    if "_PyRuntime" not in symbols:
        raise RemoteError(f"process {pid} is not a Python process (no _PyRuntime in {image.path})")
    if version is None:
        raise RemoteError(f"cannot tell which Python version process {pid} runs ({image.path})")
    if version != sys.version_info[:2]:
        raise VersionMismatch(version, interpreter_candidates(pid, exe))
    missing = [name for name in SYMBOLS if name not in symbols]
    if missing:
        raise RemoteError(f"{image.path} of process {pid} lacks the symbols {', '.join(missing)}")
    return Target(pid, exe, image, version, symbols, how)


def os_error_message(pid: int, exc: OSError) -> str:
    if exc.errno == errno.EPERM or exc.errno == errno.EACCES:
        return permission_message(pid)
    if exc.errno == errno.ESRCH:
        return f"no such process: {pid} (it ended)"
    return f"cannot read process {pid}: {exc.strerror or exc}"
