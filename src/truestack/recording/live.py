"""What `truestack top` adds to the supervisor: a live view of the profile as it streams in.

The supervisor (`supervisor.py`) runs the program exactly as for `record`
and, when given a `LiveView`, lets it look at the growing profile on every
turn of its loop (about every 50 ms) and wait on its input. The views:

- `BatchView` (here): stdout is not a terminal (or `--batch`): a plain-text
  snapshot every interval, `top -b` style, and a last one when sampling ends
  at least half an interval after the previous one (or the first).
- `ScreenView` (`screen.py`): the full-screen curses table with keys.

Quitting a view stops the program: the supervisor sends it SIGINT, then
follows record's stop path (the profile is written within a second, and
the program killed if it has not stopped by then).
"""

from __future__ import annotations

import os
import sys
from typing import Protocol

from ..exporters.top_text import render_snapshot
from ..model import Profile
from ..model.live import LiveTable, ProcessesLiveTable, ProcessProfiles, Snapshot


class LiveView(Protocol):
    def prepare_child(self) -> None:
        """In the program's process, right after the fork, before it runs."""
        ...

    def open(self, profile: Profile, pid: int, now: float, children: ProcessProfiles | None = None) -> None:
        """In the supervisor, after the fork: start following `profile` (the program's process is `pid`),
        and with `children` (`--subprocesses`) the profiles of the processes it starts."""
        ...

    def fileno(self) -> int | None:
        """A file descriptor the supervisor should wake up for (the keyboard), or None."""
        ...

    def step(self, now: float) -> bool:
        """Take input, refresh when due; True once the user asked to quit."""
        ...

    def close(self, now: float) -> None:
        """Sampling ended, or the supervisor is leaving: last refresh, give the terminal back. Idempotent."""
        ...

    def finish(self) -> None:
        """The program's process has exited (or is abandoned): anything still to print."""
        ...


class ProcessCpu:
    """The program's process CPU time from /proc, as a percentage of one CPU between readings."""

    def __init__(self, pid: int, now: float) -> None:
        self.path = f"/proc/{pid}/stat"
        self._ticks = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
        self._last = (now, self.cpu_s())

    def cpu_s(self) -> float | None:
        try:
            with open(self.path, "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / self._ticks  # utime, stime
        except (OSError, IndexError, ValueError):
            return None

    def percent(self, now: float) -> float | None:
        """CPU % since the previous call (None when /proc cannot tell)."""
        cpu = self.cpu_s()
        then, before = self._last
        self._last = (now, cpu)
        if cpu is None or before is None or now - then <= 0:
            return None
        return max(cpu - before, 0.0) * 100.0 / (now - then)


class Refresher:
    """The part every view shares: the live table, the refresh clock and the program's CPU."""

    def __init__(self, interval: float, include_idle: bool) -> None:
        self.interval = interval
        self.include_idle = include_idle
        self.table: LiveTable | ProcessesLiveTable | None = None
        self.cpu: ProcessCpu | None = None
        self.cpu_percent: float | None = None
        self.snapshot: Snapshot | None = None
        self.next_at = 0.0

    def open(self, profile: Profile, pid: int, now: float, children: ProcessProfiles | None = None) -> None:
        if children is None:
            self.table = LiveTable(profile, self.include_idle, now)
        else:
            self.table = ProcessesLiveTable(profile, pid, children, self.include_idle, now)
        self.cpu = ProcessCpu(pid, now)
        self.next_at = now + self.interval

    def due(self, now: float) -> bool:
        return self.table is not None and now >= self.next_at

    def advance(self, now: float) -> Snapshot:
        assert self.table is not None and self.cpu is not None
        self.snapshot = self.table.advance(now)
        self.cpu_percent = self.cpu.percent(now)
        self.next_at = max(self.next_at + self.interval, now + self.interval / 2)
        return self.snapshot


class BatchView:
    """Stdout is not a terminal: a plain snapshot every interval, and one at the end."""

    def __init__(self, interval: float, rows: int, sort: str, include_idle: bool) -> None:
        self.refresher = Refresher(interval, include_idle)
        self.rows, self.sort = rows, sort
        self.closed = False

    def prepare_child(self) -> None:
        pass

    def open(self, profile: Profile, pid: int, now: float, children: ProcessProfiles | None = None) -> None:
        self.refresher.open(profile, pid, now, children)

    def fileno(self) -> int | None:
        return None

    def step(self, now: float) -> bool:
        if self.refresher.due(now) and not self.closed:
            self._print(now)
        return False

    def close(self, now: float) -> None:
        if self.closed:
            return
        self.closed = True
        # The rest of a last window: worth a snapshot when it is not a sliver (the summary has the totals).
        table, due = self.refresher.table, self.refresher.next_at - self.refresher.interval / 2
        if table is not None and table.has_new_samples() and (now >= due or self.refresher.snapshot is None):
            self._print(now)

    def finish(self) -> None:
        pass

    def _print(self, now: float) -> None:
        snapshot = self.refresher.advance(now)
        assert self.refresher.table is not None
        text = render_snapshot(
            snapshot, self.refresher.table.profile.meta, self.refresher.cpu_percent, self.rows, self.sort
        )
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except (OSError, ValueError):  # the reader went away (`| head`): the program and its profile go on
            pass
