"""--native: names of code generated at run time, from the process's perf map.

Code that a program generates into anonymous memory has no ELF file to read
symbols from. Generators that want profilers to name it write
`/tmp/perf-<pid>.map`, one line per piece of code: `START SIZE NAME`, start
and size in hex (the format `perf` defined). CPython 3.12+ does so under
`python -X perf` (or `sys.activate_stack_trampoline("perf")`): every call
from C into the eval loop then goes through a small trampoline of its own,
named `py::<qualname>:<file>`; JITs with a perf-map option do the same.

The file only grows while the process runs: it is read again, from where the
last read stopped, when an address is in none of the entries read so far.
"""

from __future__ import annotations

import bisect
import os

PERF_MAP_DIR = "/tmp"


class PerfMap:
    """The entries of this process's perf map, by address."""

    def __init__(self, directory: str = PERF_MAP_DIR) -> None:
        self._directory = directory
        self._pid = 0
        self._read_to = 0  # bytes of the file taken in (whole lines only)
        self._starts: list[int] = []
        self._entries: list[tuple[int, int, str]] = []  # (start, end, name), by start

    @property
    def path(self) -> str:
        return os.path.join(self._directory, f"perf-{os.getpid()}.map")

    def name(self, addr: int) -> str | None:
        """The name of the generated code holding `addr`, None if the map has none."""
        found = self._lookup(addr)
        if found is None and self._read_more():
            found = self._lookup(addr)
        return found

    def _lookup(self, addr: int) -> str | None:
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr < self._entries[i][1]:
            return self._entries[i][2]
        return None

    def _read_more(self) -> bool:
        """Take in what was appended since the last read; False if nothing was."""
        if self._pid != os.getpid():  # a forked child writes a file of its own, from its start;
            self._pid, self._read_to = os.getpid(), 0  # the code its parent generated is still there
        try:
            with open(self.path, "rb") as f:
                f.seek(self._read_to)
                data = f.read()
        except OSError:
            return False
        end = data.rfind(b"\n") + 1  # a line being written is taken in next time
        if end == 0:
            return False
        self._read_to += end
        added = []
        for line in data[:end].decode(errors="replace").splitlines():
            parts = line.split(None, 2)
            try:
                start, size = int(parts[0], 16), int(parts[1], 16)
            except (ValueError, IndexError):
                continue  # not an entry: passed over
            added.append((start, start + size, parts[2] if len(parts) > 2 else f"[jit]+0x{start:x}"))
        if not added:
            return False
        self._entries = sorted(self._entries + added)
        self._starts = [e[0] for e in self._entries]
        return True


__all__ = ["PerfMap"]
