"""pprof: google/pprof's profile.proto, gzipped (go tool pprof, Pyroscope, Grafana).

The message classes are built at run time from a FileDescriptorProto written
out below (field numbers as in perftools.profiles' profile.proto), so no
protoc-generated module is shipped; `protobuf` is an optional dependency
needed only for this format.

Mapping from the model:
  sample_type   [samples/count, cpu|wall/nanoseconds]; default the second
  sample        one per (thread, unique stack), values [count, weight ns],
                labels thread (name) and thread_id (num), with --subprocesses also
                process (`process <pid> <cmdline>`) and pid (num); location_id leaf first
  location      one per model frame (id = frame + 1), one Line each; a native
                (C) frame's location also names the mapping of its module
  mapping       one per module of native frames (--native): filename, has_functions
  function      one per model function (id = func + 1): name, system_name,
                filename, start_line
  time_nanos    wall-clock start; duration_nanos; period_type/period the
                nominal interval
"""

from __future__ import annotations

import gzip
from functools import lru_cache
from typing import Any

from ..model import Profile
from ..model.aggregate import EMPTY_STACK_LABEL, aggregate, nominal_interval_ns
from ..model.facts import sampling_facts
from ..model.processes import process_of_thread
from ..model.tables import KINDS
from ..samples import is_task_thread

_NATIVE_KIND = KINDS.index("native")

PACKAGE = "perftools.profiles"
_MAX_MARKER_COMMENTS = 1000

# message -> [(field name, number, type, repeated, message type name)]
_T_INT64, _T_UINT64, _T_STRING, _T_BOOL, _T_MESSAGE = "int64", "uint64", "string", "bool", "message"
_SCHEMA: dict[str, list[tuple[str, int, str, bool, str | None]]] = {
    "Profile": [
        ("sample_type", 1, _T_MESSAGE, True, "ValueType"),
        ("sample", 2, _T_MESSAGE, True, "Sample"),
        ("mapping", 3, _T_MESSAGE, True, "Mapping"),
        ("location", 4, _T_MESSAGE, True, "Location"),
        ("function", 5, _T_MESSAGE, True, "Function"),
        ("string_table", 6, _T_STRING, True, None),
        ("drop_frames", 7, _T_INT64, False, None),
        ("keep_frames", 8, _T_INT64, False, None),
        ("time_nanos", 9, _T_INT64, False, None),
        ("duration_nanos", 10, _T_INT64, False, None),
        ("period_type", 11, _T_MESSAGE, False, "ValueType"),
        ("period", 12, _T_INT64, False, None),
        ("comment", 13, _T_INT64, True, None),
        ("default_sample_type", 14, _T_INT64, False, None),
    ],
    "ValueType": [("type", 1, _T_INT64, False, None), ("unit", 2, _T_INT64, False, None)],
    "Sample": [
        ("location_id", 1, _T_UINT64, True, None),
        ("value", 2, _T_INT64, True, None),
        ("label", 3, _T_MESSAGE, True, "Label"),
    ],
    "Label": [
        ("key", 1, _T_INT64, False, None),
        ("str", 2, _T_INT64, False, None),
        ("num", 3, _T_INT64, False, None),
        ("num_unit", 4, _T_INT64, False, None),
    ],
    "Mapping": [
        ("id", 1, _T_UINT64, False, None),
        ("memory_start", 2, _T_UINT64, False, None),
        ("memory_limit", 3, _T_UINT64, False, None),
        ("file_offset", 4, _T_UINT64, False, None),
        ("filename", 5, _T_INT64, False, None),
        ("build_id", 6, _T_INT64, False, None),
        ("has_functions", 7, _T_BOOL, False, None),
        ("has_filenames", 8, _T_BOOL, False, None),
        ("has_line_numbers", 9, _T_BOOL, False, None),
        ("has_inline_frames", 10, _T_BOOL, False, None),
    ],
    "Location": [
        ("id", 1, _T_UINT64, False, None),
        ("mapping_id", 2, _T_UINT64, False, None),
        ("address", 3, _T_UINT64, False, None),
        ("line", 4, _T_MESSAGE, True, "Line"),
        ("is_folded", 5, _T_BOOL, False, None),
    ],
    "Line": [
        ("function_id", 1, _T_UINT64, False, None),
        ("line", 2, _T_INT64, False, None),
        ("column", 3, _T_INT64, False, None),
    ],
    "Function": [
        ("id", 1, _T_UINT64, False, None),
        ("name", 2, _T_INT64, False, None),
        ("system_name", 3, _T_INT64, False, None),
        ("filename", 4, _T_INT64, False, None),
        ("start_line", 5, _T_INT64, False, None),
    ],
}


class PprofUnavailable(RuntimeError):
    """The optional `protobuf` package is missing."""


@lru_cache(maxsize=1)
def message_classes() -> dict[str, Any]:
    """Message classes for profile.proto, by message name."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        raise PprofUnavailable(
            "the pprof format needs the 'protobuf' package: pip install protobuf (or pip install 'truestack[pprof]')"
        ) from None
    fdp = descriptor_pb2.FileDescriptorProto(name="truestack/profile.proto", package=PACKAGE, syntax="proto3")
    F = descriptor_pb2.FieldDescriptorProto
    types = {
        _T_INT64: F.TYPE_INT64,
        _T_UINT64: F.TYPE_UINT64,
        _T_STRING: F.TYPE_STRING,
        _T_BOOL: F.TYPE_BOOL,
        _T_MESSAGE: F.TYPE_MESSAGE,
    }
    for msg_name, fields in _SCHEMA.items():
        msg = fdp.message_type.add(name=msg_name)
        for name, number, kind, repeated, type_name in fields:
            field = msg.field.add(
                name=name, number=number, type=types[kind], label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL
            )
            if type_name:
                field.type_name = f".{PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()  # private pool: never clashes with another profile.proto
    pool.Add(fdp)
    file_desc = pool.FindFileByName(fdp.name)
    out = {}
    for name in _SCHEMA:
        desc = file_desc.message_types_by_name[name]
        out[name] = message_factory.GetMessageClass(desc)
    return out


class _Strings:
    def __init__(self) -> None:
        self.table: list[str] = [""]
        self.index: dict[str, int] = {"": 0}

    def __call__(self, s: str) -> int:
        idx = self.index.get(s)
        if idx is None:
            idx = self.index[s] = len(self.table)
            self.table.append(s)
        return idx


def build(profile: Profile) -> Any:
    """The Profile message (not serialized)."""
    cls = message_classes()
    out = cls["Profile"]()
    strings = _Strings()
    mode = "wall" if profile.meta.mode == "wall" else "cpu"
    out.sample_type.add(type=strings("samples"), unit=strings("count"))
    out.sample_type.add(type=strings(mode), unit=strings("nanoseconds"))
    out.default_sample_type = strings(mode)
    interval = nominal_interval_ns(profile)
    out.period_type.type = strings(mode)
    out.period_type.unit = strings("nanoseconds")
    if interval:
        out.period = round(interval)
    out.time_nanos = profile.meta.start_time_unix_ns
    out.duration_nanos = int(profile.duration_ns)

    used_frames: set[int] = set()
    key_thread, key_tid = strings("thread"), strings("thread_id")
    owner = process_of_thread(profile.meta.processes)  # record --subprocesses: each sample says its process
    key_process, key_pid = (strings("process"), strings("pid")) if owner else (0, 0)
    key_task = strings("task") if any(is_task_thread(tid) for tid in profile.threads) else 0  # --async
    empty_location = 0
    locations_of: dict[int, list[int]] = {}
    for tid, thread in profile.threads.items():
        totals = aggregate(profile).thread_stack_totals(tid)
        if not totals:
            continue
        name_idx = strings(thread.name or f"thread {tid}")
        for stack, (count, weight) in totals.items():
            loc_ids = locations_of.get(stack)
            if loc_ids is None:
                if stack < 0:
                    if not empty_location:
                        empty_location = len(profile.frames) + 1
                    loc_ids = [empty_location]
                else:
                    frames = profile.stack_frames(stack)
                    used_frames.update(frames)
                    loc_ids = [f + 1 for f in reversed(frames)]
                locations_of[stack] = loc_ids
            sample = out.sample.add(location_id=loc_ids, value=[count, weight])
            sample.label.add(key=key_thread, str=name_idx)
            sample.label.add(key=key_tid, num=tid)
            if tid in owner:
                sample.label.add(key=key_process, str=strings(owner[tid].label))
                sample.label.add(key=key_pid, num=owner[tid].pid)
            if key_task and is_task_thread(tid):
                sample.label.add(key=key_task, str=name_idx)

    used_funcs: set[int] = set()
    mappings: dict[str, int] = {}
    for f in sorted(used_frames):
        row = profile.frames[f]
        used_funcs.add(row.func)
        loc = out.location.add(id=f + 1)
        if row.kind == _NATIVE_KIND:  # a C frame: its module is the mapping
            module = profile.strings[profile.funcs[row.func].file]
            if module not in mappings:
                mappings[module] = len(mappings) + 1
                out.mapping.add(id=mappings[module], filename=strings(module), has_functions=True)
            loc.mapping_id = mappings[module]
        loc.line.add(function_id=row.func + 1, line=max(row.line, 0))
    for func in sorted(used_funcs):
        func_row = profile.funcs[func]
        name = strings(profile.strings[func_row.name])
        out.function.add(
            id=func + 1,
            name=name,
            system_name=name,
            filename=strings(profile.strings[func_row.file]),
            start_line=max(func_row.first_line, 0),
        )
    if empty_location:
        func_id = len(profile.funcs) + 1
        name = strings(EMPTY_STACK_LABEL)
        out.function.add(id=func_id, name=name, system_name=name)
        out.location.add(id=empty_location).line.add(function_id=func_id)

    if profile.meta.command:
        out.comment.append(strings("command: " + " ".join(profile.meta.command)))
    for label, value in sampling_facts(profile):
        out.comment.append(strings(f"{label}: {value}"))
    if profile.meta.python_version:
        out.comment.append(strings(f"python_version: {profile.meta.python_version}"))
    origin = profile.meta.start_monotonic_ns
    for m in profile.markers[:_MAX_MARKER_COMMENTS]:  # pprof has no markers: keep them as metadata
        at = (m.start_ns - origin) / 1e6
        span = f" for {(m.end_ns - m.start_ns) / 1e6:.3f} ms" if m.end_ns is not None else ""
        out.comment.append(strings(f"marker: {m.name} at {at:.3f} ms{span} (thread {m.thread_id})"))
    out.string_table.extend(strings.table)
    return out


def export(profile: Profile) -> bytes:
    return gzip.compress(build(profile).SerializeToString(), compresslevel=6, mtime=0)
