"""pprof: decoded back with protobuf, plus an independent wire-level check of the
field numbers (so a wrong number in our descriptor cannot hide behind itself)."""
from __future__ import annotations

import gzip
import sys

import pytest
from profile_factory import INTERVAL_NS, SAMPLES, expected_total_weight_ns, make_profile

from truestack.exporters import export, pprof


def decode(data: bytes):
    msg = pprof.message_classes()["Profile"]()
    msg.ParseFromString(gzip.decompress(data))
    return msg


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def wire_fields(buf: bytes) -> list[tuple[int, int, object]]:
    """(field number, wire type, value) of one message, per the protobuf encoding spec."""
    out, pos = [], 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 2:
            size, pos = read_varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((number, wire, value))
    return out


def test_gzipped_and_wire_layout_matches_profile_proto():
    data = export(make_profile(), "pprof")
    assert data[:2] == b"\x1f\x8b"
    fields = wire_fields(gzip.decompress(data))
    strings = [v.decode() for n, w, v in fields if n == 6]  # repeated string string_table = 6
    assert strings[0] == "" and "fib" in strings and "samples" in strings
    assert dict((n, v) for n, w, v in fields if n == 9)[9] == 1_700_000_000_000_000_000  # time_nanos = 9
    sample_bytes = [v for n, w, v in fields if n == 2]  # repeated Sample sample = 2
    function_bytes = [v for n, w, v in fields if n == 5]  # repeated Function function = 5
    first = wire_fields(sample_bytes[0])
    assert {n for n, _, _ in first} == {1, 2, 3}  # location_id, value, label
    fn = dict((n, v) for n, w, v in wire_fields(function_bytes[0]))
    assert strings[fn[2]] and strings[fn[4]].startswith("/app/")  # name = 2, filename = 4


def test_totals_labels_and_types():
    msg = decode(export(make_profile(), "pprof"))
    s = msg.string_table
    assert [(s[t.type], s[t.unit]) for t in msg.sample_type] == [("samples", "count"), ("cpu", "nanoseconds")]
    assert s[msg.default_sample_type] == "cpu"
    assert (s[msg.period_type.type], msg.period) == ("cpu", INTERVAL_NS)
    assert msg.time_nanos == 1_700_000_000_000_000_000 and msg.duration_nanos > 0
    assert sum(x.value[0] for x in msg.sample) == len(SAMPLES)
    assert sum(x.value[1] for x in msg.sample) == expected_total_weight_ns()
    threads = {(s[lb.str]) for x in msg.sample for lb in x.label if s[lb.key] == "thread"}
    assert threads == {"MainThread", "worker-ü"}
    tids = {lb.num for x in msg.sample for lb in x.label if s[lb.key] == "thread_id"}
    assert tids == {1, 2}
    comments = [s[c] for c in msg.comment]
    assert "command: app.py --fast" in comments
    assert "marker: phase;2 at 5.000 ms for 35.000 ms (thread 1)" in comments


def test_every_reference_resolves():
    msg = decode(export(make_profile(), "pprof"))
    locations = {loc.id: loc for loc in msg.location}
    functions = {fn.id: fn for fn in msg.function}
    assert len(locations) == len(msg.location) and len(functions) == len(msg.function)
    assert 0 not in locations and 0 not in functions
    n = len(msg.string_table)
    for fn in msg.function:
        assert 0 <= fn.name < n and 0 <= fn.system_name < n and 0 <= fn.filename < n
    for sample in msg.sample:
        assert len(sample.value) == len(msg.sample_type)
        for loc_id in sample.location_id:
            assert loc_id in locations
        for label in sample.label:
            assert 0 <= label.key < n and 0 <= label.str < n
    for loc in msg.location:
        assert loc.line
        for line in loc.line:
            assert line.function_id in functions


def test_names_lines_and_leaf_first_order():
    msg = decode(export(make_profile(), "pprof"))
    s = msg.string_table
    locations = {loc.id: loc for loc in msg.location}
    functions = {fn.id: fn for fn in msg.function}

    def stack(sample):
        out = []
        for loc_id in sample.location_id:
            line = locations[loc_id].line[0]
            out.append((s[functions[line.function_id].name], line.line))
        return tuple(out)

    stacks = {stack(x): x.value[0] for x in msg.sample}
    assert stacks[(("fib", 6), ("fib", 6), ("fib", 5), ("run", 10), ("<module>", 3))] == 1
    assert stacks[(("time.sleep", 0), ("Worker.loop", 20))] == 1
    assert stacks[(("(no frames)", 0),)] == 1
    fib = next(f for f in msg.function if s[f.name] == "fib")
    assert (s[fib.filename], fib.start_line, s[fib.system_name]) == ("/app/math_utils.py", 4, "fib")
    assert any(s[f.name] == "Über.naïve_λ" for f in msg.function)


def test_wall_mode_sample_type():
    profile = make_profile()
    profile.meta.mode = "wall"
    msg = decode(export(profile, "pprof"))
    assert msg.string_table[msg.sample_type[1].type] == "wall"


def test_missing_protobuf_is_a_clear_error(monkeypatch):
    pprof.message_classes.cache_clear()
    for name in [m for m in sys.modules if m == "google.protobuf" or m.startswith("google.protobuf.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "google.protobuf", None)
    try:
        with pytest.raises(pprof.PprofUnavailable, match="protobuf"):
            export(make_profile(), "pprof")
    finally:
        pprof.message_classes.cache_clear()
