"""The Firefox Profiler's processed profile format (profiler.firefox.com).

We write preprocessedProfileVersion 50: each thread carries its own
stackTable / frameTable / funcTable / stringArray (the layout of format
versions 41-55); the profiler upgrades older processed versions on load, so
a fixed, fully specified version keeps working as the viewer moves on.

Times are milliseconds since `meta.startTime` (the wall-clock start of the
recording); every sample time is relative to the model's monotonic origin.
Sample weights are weighted sample counts (weightType "samples"), the CPU
time each thread used between samples goes into threadCPUDelta (ns), so the
activity graph shows CPU use. Markers come from `Profile.markers` (instants
and intervals) plus a note when the run was interrupted.
"""

from __future__ import annotations

import json
from array import array
from typing import Any

from ..model import Profile, ThreadSamples
from ..model.aggregate import nominal_interval_ns
from ..model.facts import sampling_facts
from ..model.processes import ProcessInfo, process_of_thread
from ..model.tables import KINDS
from ..samples import is_task_thread

PREPROCESSED_PROFILE_VERSION = 50
GECKO_PROFILE_VERSION = 30  # the Gecko format that processed version 50 was produced from

CATEGORIES = [
    {"name": "Other", "color": "grey", "subcategories": ["Other"]},  # the required grey default
    {"name": "Python", "color": "yellow", "subcategories": ["Other"]},
    {"name": "Native", "color": "blue", "subcategories": ["Other"]},
]
_CATEGORY_OF_KIND = [{"python": 1, "native": 2}.get(kind, 0) for kind in KINDS]
_PY_KIND = KINDS.index("python")
# --async: a task's awaiting samples end in a synthetic `await <what>` frame; only
# profiles with tasks list this category, so other profiles stay as they were.
AWAITING_CATEGORY = {"name": "Awaiting", "color": "purple", "subcategories": ["Other"]}
_AWAITING = len(CATEGORIES)
_SYNTHETIC_KIND = KINDS.index("truncated")

MARKER_TYPE = "TruestackMarker"
NOTE_TYPE = "TruestackNote"
MARKER_SCHEMA = [
    {
        "name": MARKER_TYPE,
        "display": ["marker-chart", "marker-table", "timeline-overview"],
        "chartLabel": "{marker.name}",
        "tooltipLabel": "{marker.name}",
        "tableLabel": "{marker.name} {marker.data.detail}",
        "data": [{"key": "detail", "label": "Details", "format": "string", "searchable": True}],
    },
    {
        "name": NOTE_TYPE,
        "display": ["marker-chart", "marker-table", "timeline-overview"],
        "chartLabel": "{marker.name}",
        "tooltipLabel": "{marker.name}",
        "tableLabel": "{marker.name}",
        "data": [{"key": "reason", "label": "Reason", "format": "string", "searchable": True}],
    },
]
PHASE_INSTANT, PHASE_INTERVAL = 0, 1


def _ms(ns: int) -> float:
    # Whole microseconds keep the JSON short (1234.567, not 1234.5670000001).
    return ns // 1000 / 1000


class _ThreadTables:
    """Thread-local stack/frame/func/string tables for the stacks one thread uses."""

    def __init__(self, profile: Profile, stacks_used: set[int]) -> None:
        self.strings: list[str] = []
        self._string_index: dict[str, int] = {}
        prefix, frame = profile.stacks.prefix, profile.stacks.frame
        n_stacks = len(profile.stacks)
        # Mark the used stacks and all their ancestors in one backward pass: a
        # prefix always has a smaller index than its stack, so sorted order also
        # puts every prefix before the stacks that extend it.
        used = bytearray(n_stacks)
        for s in stacks_used:
            if s >= 0:
                used[s] = 1
        for s in range(n_stacks - 1, -1, -1):
            if used[s] and prefix[s] >= 0:
                used[prefix[s]] = 1
        self.lut: list[int | None] = [None] * (n_stacks + 1)  # lut[-1] is the empty stack
        frame_map: dict[int, int] = {}
        func_map: dict[int, int] = {}
        frames, funcs, strings = profile.frames.rows, profile.funcs.rows, profile.strings.strings
        st_frame: list[int] = []
        st_category: list[int] = []
        st_prefix: list[int | None] = []
        ft_func: list[int] = []
        ft_category: list[int] = []
        ft_line: list[int | None] = []
        fn: dict[str, Any] = {
            k: [] for k in ("name", "isJS", "relevantForJS", "resource", "fileName", "lineNumber", "columnNumber")
        }
        lut, string = self.lut, self.string
        for s in (i for i in range(n_stacks) if used[i]):
            f = frame[s]
            row = frames[f]
            category = _CATEGORY_OF_KIND[row.kind] if row.kind < len(_CATEGORY_OF_KIND) else 0
            if row.kind == _SYNTHETIC_KIND and strings[funcs[row.func].name].startswith("await "):
                category = _AWAITING
            local_frame = frame_map.get(f)
            if local_frame is None:
                local_func = func_map.get(row.func)
                if local_func is None:
                    local_func = func_map[row.func] = len(fn["name"])
                    func = funcs[row.func]
                    path = strings[func.file]
                    fn["name"].append(string(strings[func.name] or "<unknown>"))
                    fn["isJS"].append(row.kind == _PY_KIND)  # lets the "JavaScript only" filter mean "Python only"
                    fn["fileName"].append(string(path) if path else None)
                    fn["lineNumber"].append(func.first_line if func.first_line > 0 else None)
                local_frame = frame_map[f] = len(ft_func)
                ft_func.append(local_func)
                ft_category.append(category)
                ft_line.append(row.line if row.line > 0 else None)
            lut[s] = len(st_frame)
            st_frame.append(local_frame)
            st_category.append(category)
            st_prefix.append(lut[prefix[s]])  # lut[-1] is None for a root
        n_frames, n_funcs = len(ft_func), len(fn["name"])
        fn["relevantForJS"] = [False] * n_funcs
        fn["resource"] = [-1] * n_funcs
        fn["columnNumber"] = [None] * n_funcs
        fn["length"] = n_funcs
        self.func_table = fn
        self.stack_table: dict[str, Any] = {
            "frame": st_frame,
            "category": st_category,
            "subcategory": [0] * len(st_frame),
            "prefix": st_prefix,
            "length": len(st_frame),
        }
        self.frame_table: dict[str, Any] = {
            "address": [-1] * n_frames,
            "inlineDepth": [0] * n_frames,
            "category": ft_category,
            "subcategory": [0] * n_frames,
            "func": ft_func,
            "nativeSymbol": [None] * n_frames,
            "innerWindowID": [None] * n_frames,
            "implementation": [None] * n_frames,
            "line": ft_line,
            "column": [None] * n_frames,
            "length": n_frames,
        }

    def string(self, s: str) -> int:
        idx = self._string_index.get(s)
        if idx is None:
            idx = self._string_index[s] = len(self.strings)
            self.strings.append(s)
        return idx


def _sorted_columns(thread: ThreadSamples) -> tuple[Any, Any, Any, Any]:
    times, stacks, weights, cpu = thread.time_ns, thread.stack, thread.weight_ns, thread.cpu_delta_ns
    if times.tolist() != sorted(times):  # rare: samples drained out of order
        order = sorted(range(len(times)), key=times.__getitem__)
        times = array("q", (times[i] for i in order))
        stacks = array("i", (stacks[i] for i in order))
        weights = array("Q", (weights[i] for i in order))
        cpu = array("Q", (cpu[i] for i in order))
    return times, stacks, weights, cpu


def _marker_detail(data: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in data.items())


_MarkerRow = tuple[str, float, "float | None", dict[str, Any]]  # name, start ms, end ms, data


def _markers_table(tables: _ThreadTables, markers: list[_MarkerRow]) -> dict[str, Any]:
    out: dict[str, Any] = {"data": [], "name": [], "startTime": [], "endTime": [], "phase": [], "category": []}
    for name, start, end, data in sorted(markers, key=lambda m: m[1]):
        out["name"].append(tables.string(name))
        out["startTime"].append(start)
        out["endTime"].append(end)
        out["phase"].append(PHASE_INSTANT if end is None else PHASE_INTERVAL)
        out["category"].append(0)
        out["data"].append(data)
    out["length"] = len(out["name"])
    return out


def build(profile: Profile) -> dict[str, Any]:
    """The processed profile as plain JSON-ready objects."""
    meta = profile.meta
    origin = meta.start_monotonic_ns
    interval = nominal_interval_ns(profile)
    inv = 1.0 / interval if interval else 0.0
    threads = list(profile.threads.values())
    if not threads:
        threads = [ThreadSamples(0, "MainThread")]  # somewhere to show the markers
    main = next((t for t in threads if t.name == "MainThread"), threads[0])
    threads.sort(key=lambda t: t is not main)

    end_ns = max([max(t.time_ns) for t in threads if len(t)] + [origin])
    markers_by_tid: dict[int, list[_MarkerRow]] = {t.tid: [] for t in threads}
    for m in profile.markers:
        end = _ms(m.end_ns - origin) if m.end_ns is not None else None
        data = {"type": MARKER_TYPE, "detail": _marker_detail(m.data)}
        markers_by_tid.get(m.thread_id, markers_by_tid[main.tid]).append((m.name, _ms(m.start_ns - origin), end, data))
        if m.end_ns is not None:
            end_ns = max(end_ns, m.end_ns)
    if meta.interrupted:
        reason = meta.interrupted
        markers_by_tid[main.tid].append(
            (f"Run interrupted: {reason}", _ms(end_ns - origin), None, {"type": NOTE_TYPE, "reason": reason})
        )

    pid = str(meta.pid)
    command_text = " ".join(meta.command)
    owner = process_of_thread(meta.processes)  # record --subprocesses: a process track per process
    if owner:
        order = {id(info): i for i, info in enumerate(meta.processes)}
        threads.sort(key=lambda t: (order.get(id(owner.get(t.tid)), -1), t is not main and t.tid != _pid_of(owner, t)))
    any_cpu = False
    out_threads = []
    for thread in threads:
        times, stacks, weights, cpu = _sorted_columns(thread)
        tables = _ThreadTables(profile, set(stacks))
        lut = tables.lut
        samples: dict[str, Any] = {
            "stack": [lut[s] for s in stacks],
            "time": [(t - origin) // 1000 / 1000 for t in times],
            "weight": [int(w * inv + 0.5) or 1 for w in weights] if interval else None,
            "weightType": "samples",
            "length": len(stacks),
        }
        if any(cpu):
            any_cpu = True
            samples["threadCPUDelta"] = cpu.tolist()
        out_threads.append(
            {
                "processType": "default",
                "processStartupTime": 0,
                "processShutdownTime": _ms(end_ns - origin),
                "registerTime": 0,
                "unregisterTime": None,
                "pausedRanges": [],
                "name": thread.name or f"thread {thread.tid}",
                "isMainThread": thread is main or thread.tid == _pid_of(owner, thread),
                "processName": owner[thread.tid].label if thread.tid in owner else (command_text or "python"),
                "pid": str(_pid_of(owner, thread)) if thread.tid in owner else pid,
                "tid": thread.tid,
                "samples": samples,
                "markers": _markers_table(tables, markers_by_tid[thread.tid]),
                "stackTable": tables.stack_table,
                "frameTable": tables.frame_table,
                "funcTable": tables.func_table,
                "resourceTable": {"length": 0, "lib": [], "name": [], "host": [], "type": []},
                "nativeSymbols": {"libIndex": [], "address": [], "name": [], "functionSize": [], "length": 0},
                "stringArray": tables.strings,
            }
        )

    out_meta: dict[str, Any] = {
        "interval": interval / 1e6 if interval else 1.0,
        "startTime": meta.start_time_unix_ns / 1e6,
        "profilingStartTime": 0,
        "profilingEndTime": _ms(end_ns - origin),
        "processType": 0,
        "product": f"truestack: {command_text}" if command_text else "truestack",
        "importedFrom": "truestack",
        "arguments": command_text,
        "stackwalk": 0,
        "version": GECKO_PROFILE_VERSION,
        "preprocessedProfileVersion": PREPROCESSED_PROFILE_VERSION,
        "categories": [*CATEGORIES, AWAITING_CATEGORY] if any(map(is_task_thread, profile.threads)) else CATEGORIES,
        "markerSchema": MARKER_SCHEMA,
        "symbolicated": True,
        "sourceCodeIsNotOnSearchfox": True,
        "keepProfileThreadOrder": True,
        "initialSelectedThreads": [0],
        "extra": [
            {
                "label": "truestack",
                "entries": [
                    {"label": label.capitalize(), "format": "string", "value": value}
                    for label, value in [*sampling_facts(profile), ("python", meta.python_version or "?")]
                ],
            }
        ],
    }
    if any_cpu:
        out_meta["sampleUnits"] = {"time": "ms", "eventDelay": "ms", "threadCPUDelta": "ns"}
    return {"meta": out_meta, "libs": [], "threads": out_threads}


def _pid_of(owner: dict[int, ProcessInfo], thread: ThreadSamples) -> int | None:
    info = owner.get(thread.tid)
    return info.pid if info is not None else None


def export(profile: Profile) -> bytes:
    return json.dumps(build(profile), ensure_ascii=False, separators=(",", ":"), default=str).encode()
