"""The live table behind `truestack top`: per-function own and total shares of a growing profile.

`LiveTable` follows a Profile as samples are added to it (by the stream
reader) and, at each `advance()`, folds the samples added since the previous
call into two sets of counts: the window (just those samples: "the last
interval") and the cumulative counts since the start. Both are kept per
thread, so a view can filter by thread. `advance()` returns a `Snapshot`, a
frozen copy that a paused view can go on sorting and filtering.

Shares are of sample weight: in cpu mode a sample weighs the CPU time its
thread used since its previous sample, in wall mode the interval, so a
function's own % is its share of the program's CPU (or wall) time. Wall mode's
idle samples (sleeping or blocked threads) are left out unless asked for, as
in `record`'s outputs. A function is counted once per sample in its total,
however deep it recursed. No terminal code here: the views format `Row`s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .profile import STATES, Profile, ThreadSamples

SORT_KEYS = ("own", "total", "name")
SCOPES = ("window", "cumulative")
_IDLE = STATES.index("idle")

Counts = dict[int, list[int]]  # func -> [own weight ns, total weight ns]


class Row(NamedTuple):
    """One function in a snapshot: its shares (percent of the scope's weight) and where it is."""

    func: int
    name: str
    location: str  # file:first line
    own: float
    total: float
    own_ns: int
    total_ns: int


class ThreadCounts(NamedTuple):
    tid: int
    name: str
    window: Counts
    cumulative: Counts
    window_ns: int  # weight of all the thread's samples in the window
    cumulative_ns: int


class Snapshot(NamedTuple):
    """The table at one refresh; sort, scope and thread are chosen when reading rows."""

    elapsed_s: float  # since the table started following the profile
    window_s: float  # the time the window covers
    threads: tuple[ThreadCounts, ...]  # in the order they were first seen
    labels: dict[int, tuple[str, str]]  # func -> (name, file:line)
    samples: int  # in the profile so far
    window_samples: int
    idle_left_out: int

    def rows(self, scope: str = "window", sort: str = "own", thread: int | None = None) -> list[Row]:
        """Rows of one scope ("window" or "cumulative"), over all threads or one (by tid), sorted by
        own %, total % (largest first) or name; percentages are of the chosen threads' weight."""
        if scope not in SCOPES:
            raise ValueError(f"unknown scope {scope!r}")
        if sort not in SORT_KEYS:
            raise ValueError(f"unknown sort key {sort!r}")
        chosen = [t for t in self.threads if thread is None or t.tid == thread]
        counts: Counts = {}
        grand = 0
        for t in chosen:
            part = t.window if scope == "window" else t.cumulative
            grand += t.window_ns if scope == "window" else t.cumulative_ns
            for func, (own, total) in part.items():
                entry = counts.setdefault(func, [0, 0])
                entry[0] += own
                entry[1] += total
        scale = 100.0 / grand if grand else 0.0
        rows = [
            Row(func, *self.labels[func], own * scale, total * scale, own, total)
            for func, (own, total) in counts.items()
        ]
        if sort == "own":
            rows.sort(key=lambda r: (-r.own_ns, -r.total_ns, r.name, r.location))
        elif sort == "total":
            rows.sort(key=lambda r: (-r.total_ns, -r.own_ns, r.name, r.location))
        else:
            rows.sort(key=lambda r: (r.name.lower(), r.location))
        return rows

    def weight_ns(self, scope: str = "window", thread: int | None = None) -> int:
        return sum(
            (t.window_ns if scope == "window" else t.cumulative_ns)
            for t in self.threads
            if thread is None or t.tid == thread
        )

    def thread_ids(self) -> list[int]:
        return [t.tid for t in self.threads]

    def thread_name(self, tid: int) -> str:
        return next((t.name for t in self.threads if t.tid == tid), str(tid))


class _Thread:
    __slots__ = ("cumulative", "cumulative_ns", "seen", "window", "window_ns")

    def __init__(self) -> None:
        self.seen = 0  # samples of the profile's thread already counted
        self.window: Counts = {}
        self.cumulative: Counts = {}
        self.window_ns = 0
        self.cumulative_ns = 0


class LiveTable:
    """Counts a growing profile's samples, window by window."""

    def __init__(self, profile: Profile, include_idle: bool = False, start_s: float = 0.0) -> None:
        self.profile = profile
        self.include_idle = include_idle
        self._threads: dict[int, _Thread] = {}
        self._stack_funcs: dict[int, tuple[int, tuple[int, ...]]] = {}  # stack -> (leaf func, funcs on it)
        self._labels: dict[int, tuple[str, str]] = {}
        self._start_s = start_s
        self._last_s = start_s
        self._idle_left_out = 0

    def has_new_samples(self) -> bool:
        """Whether samples were added since the last `advance()`."""
        seen = self._threads
        return any(len(t) > (seen[tid].seen if tid in seen else 0) for tid, t in list(self.profile.threads.items()))

    def advance(self, now_s: float) -> Snapshot:
        """Start a new window with the samples added since the last call; return the snapshot."""
        window_samples = 0
        for tid, samples in list(self.profile.threads.items()):
            state = self._threads.get(tid)
            if state is None:
                state = self._threads[tid] = _Thread()
            state.window, state.window_ns = {}, 0
            end = len(samples)
            if end > state.seen:
                window_samples += self._count(state, samples, state.seen, end)
                state.seen = end
        snapshot = Snapshot(
            elapsed_s=max(now_s - self._start_s, 0.0),
            window_s=max(now_s - self._last_s, 0.0),
            threads=tuple(
                ThreadCounts(
                    tid,
                    self.profile.threads[tid].name,
                    {f: list(v) for f, v in t.window.items()},
                    {f: list(v) for f, v in t.cumulative.items()},
                    t.window_ns,
                    t.cumulative_ns,
                )
                for tid, t in self._threads.items()
            ),
            labels=dict(self._labels),
            samples=self.profile.sample_count,
            window_samples=window_samples,
            idle_left_out=self._idle_left_out,
        )
        self._last_s = now_s
        return snapshot

    def _count(self, state: _Thread, samples: ThreadSamples, first: int, end: int) -> int:
        """Count samples[first:end] into the thread's window and cumulative counts; returns how many counted."""
        weights, states, stacks = samples.weight_ns, samples.state, samples.stack
        skip_idle = not self.include_idle and self.profile.meta.mode == "wall"
        by_stack: dict[int, int] = {}  # the same stacks recur: add up per stack, then per function
        counted = 0
        for i in range(first, end):
            if skip_idle and states[i] == _IDLE:
                self._idle_left_out += 1
                continue
            counted += 1
            by_stack[stacks[i]] = by_stack.get(stacks[i], 0) + (weights[i] or 1)
        for stack, weight in by_stack.items():
            state.window_ns += weight
            state.cumulative_ns += weight
            if stack < 0:
                continue
            leaf, funcs = self._funcs_of(stack)
            for counts in (state.window, state.cumulative):
                for func in funcs:
                    entry = counts.get(func)
                    if entry is None:
                        entry = counts[func] = [0, 0]
                    entry[1] += weight
                    if func == leaf:
                        entry[0] += weight
        return counted

    def _funcs_of(self, stack: int) -> tuple[int, tuple[int, ...]]:
        known = self._stack_funcs.get(stack)
        if known is not None:
            return known
        p = self.profile
        funcs: list[int] = []
        s = stack
        while s >= 0:
            func = p.frames[p.stacks.frame[s]].func
            if func not in funcs:
                funcs.append(func)
            if func not in self._labels:
                self._labels[func] = function_label(p, func)
            s = p.stacks.prefix[s]
        result = self._stack_funcs[stack] = (funcs[0], tuple(funcs))
        return result


ProcessProfiles = Callable[[], "list[tuple[int, Profile]]"]  # (pid, its growing profile) of followed children


class ProcessesLiveTable:
    """The program's profile and those of the child processes it starts (`--subprocesses`),
    counted as one table: functions are merged by name and location, so a function the
    workers run shows once with all their time, and each thread is named with its process."""

    def __init__(
        self,
        profile: Profile,
        pid: int,
        children: ProcessProfiles,
        include_idle: bool = False,
        start_s: float = 0.0,
    ) -> None:
        self.profile = profile  # the program's: its metadata heads the view
        self.include_idle = include_idle
        self._start_s = start_s
        self._children = children
        self._tables: dict[int, LiveTable] = {pid: LiveTable(profile, include_idle, start_s)}
        self._func_ids: dict[tuple[str, str], int] = {}
        self._thread_ids: dict[tuple[int, int], int] = {}

    def _follow_new_children(self) -> None:
        for pid, profile in self._children():
            if pid not in self._tables:
                self._tables[pid] = LiveTable(profile, self.include_idle, self._start_s)

    def has_new_samples(self) -> bool:
        self._follow_new_children()
        return any(table.has_new_samples() for table in self._tables.values())

    def advance(self, now_s: float) -> Snapshot:
        self._follow_new_children()
        snapshots = [(pid, table.advance(now_s)) for pid, table in self._tables.items()]
        labels: dict[int, tuple[str, str]] = {}
        threads: list[ThreadCounts] = []
        for pid, snap in snapshots:
            merged_id: dict[int, int] = {}
            for func, label in snap.labels.items():
                merged_id[func] = self._func_ids.setdefault(label, len(self._func_ids))
                labels[merged_id[func]] = label
            for t in snap.threads:
                tid = self._thread_ids.setdefault((pid, t.tid), len(self._thread_ids) + 1)
                threads.append(
                    ThreadCounts(
                        tid,
                        f"{t.name} (pid {pid})",
                        _merged_counts(t.window, merged_id),
                        _merged_counts(t.cumulative, merged_id),
                        t.window_ns,
                        t.cumulative_ns,
                    )
                )
        program = snapshots[0][1]
        return Snapshot(
            elapsed_s=program.elapsed_s,
            window_s=program.window_s,
            threads=tuple(threads),
            labels=labels,
            samples=sum(snap.samples for _, snap in snapshots),
            window_samples=sum(snap.window_samples for _, snap in snapshots),
            idle_left_out=sum(snap.idle_left_out for _, snap in snapshots),
        )


def _merged_counts(counts: Counts, merged_id: dict[int, int]) -> Counts:
    out: Counts = {}
    for func, (own, total) in counts.items():
        entry = out.setdefault(merged_id[func], [0, 0])
        entry[0] += own
        entry[1] = max(entry[1], total)  # two ids of one function are on the same stacks: not twice
    return out


def function_label(profile: Profile, func: int) -> tuple[str, str]:
    """(name, `file:first line`) of a function, the file shortened to its last two parts."""
    row = profile.funcs[func]
    name = profile.strings[row.name].replace("\n", " ")
    path = profile.strings[row.file]
    parts = path.replace("\\", "/").rsplit("/", 2)
    short = "/".join(parts[-2:]) if len(parts) > 1 else path
    if not short:
        return name, ""
    return name, f"{short}:{row.first_line}" if row.first_line > 0 else short
