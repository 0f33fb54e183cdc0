"""Firefox Profiler processed format (preprocessedProfileVersion 50): structure and table
invariants, per the format's types (src/types/profile.js of firefox-devtools/profiler)."""
from __future__ import annotations

import json

import pytest
from profile_factory import SAMPLES, T0, expected_total_count, make_profile, make_recursive_profile

from truestack.exporters import export
from truestack.exporters.firefox import PREPROCESSED_PROFILE_VERSION
from truestack.model import Marker, Profile
from truestack.model.aggregate import weighted_stack_counts
from truestack.samples import Frame, Sample

META_REQUIRED = {"interval", "startTime", "processType", "product", "stackwalk", "version",
                 "preprocessedProfileVersion", "categories", "markerSchema"}
THREAD_REQUIRED = {"processType", "processStartupTime", "processShutdownTime", "registerTime", "unregisterTime",
                   "pausedRanges", "name", "isMainThread", "pid", "tid", "samples", "markers", "stackTable",
                   "frameTable", "stringArray", "funcTable", "resourceTable", "nativeSymbols"}
TABLE_COLUMNS = {
    "stackTable": {"frame", "category", "subcategory", "prefix"},
    "frameTable": {"address", "inlineDepth", "category", "subcategory", "func", "nativeSymbol", "innerWindowID",
                   "implementation", "line", "column"},
    "funcTable": {"name", "isJS", "relevantForJS", "resource", "fileName", "lineNumber", "columnNumber"},
    "resourceTable": {"lib", "name", "host", "type"},
    "nativeSymbols": {"libIndex", "address", "name", "functionSize"},
    "markers": {"data", "name", "startTime", "endTime", "phase", "category"},
    "samples": {"stack", "time", "weight"},
}
COLORS = {"transparent", "purple", "green", "orange", "yellow", "lightblue", "grey", "blue", "brown", "magenta",
          "red", "lightgreen", "darkgray"}


def build(profile: Profile) -> dict:
    return json.loads(export(profile, "firefox").decode("utf-8"))


def check_invariants(doc: dict) -> None:
    meta = doc["meta"]
    assert set(meta) >= META_REQUIRED
    assert meta["preprocessedProfileVersion"] == PREPROCESSED_PROFILE_VERSION
    assert doc["libs"] == []
    categories = meta["categories"]
    assert any(c["color"] == "grey" for c in categories)  # the default category must exist
    for c in categories:
        assert c["color"] in COLORS and c["subcategories"][0] == "Other"
    schema_names = set()
    for schema in meta["markerSchema"]:
        assert {"name", "display", "data"} <= set(schema)
        schema_names.add(schema["name"])
        for field in schema["data"]:
            assert {"key", "label", "format"} <= set(field)
    for thread in doc["threads"]:
        assert set(thread) >= THREAD_REQUIRED, THREAD_REQUIRED - set(thread)
        assert isinstance(thread["pid"], str) and isinstance(thread["tid"], int)
        for table, columns in TABLE_COLUMNS.items():
            t = thread[table]
            assert columns <= set(t), (table, columns - set(t))
            for col in columns:
                if t[col] is not None:
                    assert len(t[col]) == t["length"], (table, col)
        strings = thread["stringArray"]
        stacks, frames, funcs = thread["stackTable"], thread["frameTable"], thread["funcTable"]
        for i in range(stacks["length"]):
            prefix = stacks["prefix"][i]
            assert prefix is None or 0 <= prefix < i  # prefix before stack
            assert 0 <= stacks["frame"][i] < frames["length"]
            assert 0 <= stacks["category"][i] < len(categories)
            assert stacks["category"][i] == frames["category"][stacks["frame"][i]]
        for i in range(frames["length"]):
            assert 0 <= frames["func"][i] < funcs["length"]
            assert frames["category"][i] is None or 0 <= frames["category"][i] < len(categories)
            assert frames["address"][i] == -1 and frames["nativeSymbol"][i] is None
            assert frames["line"][i] is None or frames["line"][i] > 0
        for i in range(funcs["length"]):
            assert 0 <= funcs["name"][i] < len(strings)
            assert funcs["fileName"][i] is None or 0 <= funcs["fileName"][i] < len(strings)
            assert funcs["resource"][i] == -1 or 0 <= funcs["resource"][i] < thread["resourceTable"]["length"]
        samples = thread["samples"]
        assert samples["weightType"] == "samples"
        assert all(s is None or 0 <= s < stacks["length"] for s in samples["stack"])
        times = samples["time"]
        assert all(a <= b for a, b in zip(times, times[1:]))  # times monotonic per thread
        if "threadCPUDelta" in samples:
            assert len(samples["threadCPUDelta"]) == samples["length"]
            assert meta["sampleUnits"]["threadCPUDelta"] == "ns"
        markers = thread["markers"]
        for i in range(markers["length"]):
            assert 0 <= markers["name"][i] < len(strings)
            assert 0 <= markers["category"][i] < len(categories)
            start, end, phase = markers["startTime"][i], markers["endTime"][i], markers["phase"][i]
            assert (phase, end is None) in ((0, True), (1, False))
            assert end is None or start <= end
            assert markers["data"][i]["type"] in schema_names
    assert sum(t["isMainThread"] for t in doc["threads"]) == 1


def thread_stacks(thread: dict) -> dict[tuple[str, ...], int]:
    """Weighted counts per stack of function names, as the call tree would add them up."""
    strings, st, ft, fn = thread["stringArray"], thread["stackTable"], thread["frameTable"], thread["funcTable"]
    samples = thread["samples"]
    out: dict[tuple[str, ...], int] = {}
    for stack, weight in zip(samples["stack"], samples["weight"] or [1] * samples["length"]):
        names = []
        while stack is not None:
            names.append(strings[fn["name"][ft["func"][st["frame"][stack]]]])
            stack = st["prefix"][stack]
        key = tuple(reversed(names))
        out[key] = out.get(key, 0) + weight
    return out


def test_structure_and_invariants():
    doc = build(make_profile())
    check_invariants(doc)
    meta = doc["meta"]
    assert meta["interval"] == pytest.approx(10.0)
    assert meta["startTime"] == pytest.approx(1_700_000_000_000.0)
    assert [t["name"] for t in doc["threads"]] == ["MainThread", "worker-ü"]
    assert doc["threads"][0]["isMainThread"]


def test_samples_weights_and_times():
    profile = make_profile()
    doc = build(profile)
    main, worker = doc["threads"]
    assert main["samples"]["length"] == sum(1 for s in SAMPLES if s[0] == 1)
    assert sum(main["samples"]["weight"]) + sum(worker["samples"]["weight"]) == expected_total_count()
    # first main sample: one interval after the origin, in ms since the start
    assert main["samples"]["time"][0] == pytest.approx(10.0)
    assert main["samples"]["threadCPUDelta"][:2] == [9_000_000, 10_000_000]
    assert main["samples"]["stack"].count(None) == 1  # the empty stack
    stacks = thread_stacks(main)
    assert stacks[("<module>", "run", "fib", "fib", "fib")] == 1
    assert stacks[("<module>", "run", "Über.naïve_λ")] == 1
    assert stacks[("<module>", "run", "weird;name\nsplit")] == 1
    # Same totals as the model's own aggregation, per thread.
    for thread, tid in ((main, 1), (worker, 2)):
        assert sum(thread_stacks(thread).values()) == sum(weighted_stack_counts(profile, [tid]).values())


def test_frames_carry_lines_and_funcs_files():
    worker = build(make_profile())["threads"][1]
    strings, ft, fn = worker["stringArray"], worker["frameTable"], worker["funcTable"]
    by_name = {strings[fn["name"][i]]: i for i in range(fn["length"])}
    fib = by_name["fib"]
    assert strings[fn["fileName"][fib]] == "/app/math_utils.py" and fn["lineNumber"][fib] == 4
    assert sorted(ft["line"][i] for i in range(ft["length"]) if ft["func"][i] == fib) == [5, 6]
    sleep = by_name["time.sleep"]
    assert fn["fileName"][sleep] is None and fn["isJS"][sleep] is False and fn["isJS"][fib] is True
    native_frame = ft["func"].index(sleep)
    assert ft["category"][native_frame] == 2 and ft["line"][native_frame] is None


def test_markers_on_their_threads_and_interrupt_note():
    main, worker = build(make_profile())["threads"]

    def named(thread):
        m = thread["markers"]
        return {thread["stringArray"][m["name"][i]]: (m["startTime"][i], m["endTime"][i], m["data"][i])
                for i in range(m["length"])}

    main_markers, worker_markers = named(main), named(worker)
    assert main_markers["start ✓"][:2] == (2.0, None)
    assert main_markers["start ✓"][2] == {"type": "TruestackMarker", "detail": "step=1"}
    assert main_markers["phase;2"][:2] == (5.0, 40.0)
    assert worker_markers["worker span"][:2] == (3.0, 9.0)
    note = main_markers["Run interrupted: SIGINT"]
    assert note[1] is None and note[2] == {"type": "TruestackNote", "reason": "SIGINT"}
    assert not any(k.startswith("Run interrupted") for k in worker_markers)


def test_no_interrupt_note_when_run_completed():
    doc = build(make_profile(interrupted=None))
    for thread in doc["threads"]:
        assert not any(s.startswith("Run interrupted") for s in thread["stringArray"])


def test_out_of_order_samples_are_sorted():
    profile = Profile({"rate_hz": 100, "start_monotonic_ns": 0})
    a, b = Frame("a", "/a.py", 1, 1), Frame("b", "/b.py", 1, 1)
    for t, frame in ((30, a), (10, b), (20, a)):
        profile.add_sample(Sample(1, "MainThread", t * 1_000_000, 10_000_000, (frame,)))
    doc = build(profile)
    check_invariants(doc)
    thread = doc["threads"][0]
    assert thread["samples"]["time"] == [10.0, 20.0, 30.0]
    names = [thread["stringArray"][thread["funcTable"]["name"][thread["frameTable"]["func"][
        thread["stackTable"]["frame"][s]]]] for s in thread["samples"]["stack"]]
    assert names == ["b", "a", "a"]
    assert "sampleUnits" not in doc["meta"]  # no CPU deltas recorded, no CPU graph claimed


def test_recursive_profile_and_markers_only_profile():
    check_invariants(build(make_recursive_profile()))
    profile = Profile({"rate_hz": 100, "start_monotonic_ns": T0})
    profile.add_marker(Marker("only", T0 + 1_000_000, None, 99))
    doc = build(profile)
    check_invariants(doc)
    assert doc["threads"][0]["markers"]["length"] == 1


def test_invariant_checker_catches_a_bad_prefix():
    doc = build(make_profile())
    doc["threads"][0]["stackTable"]["prefix"][0] = 3
    with pytest.raises(AssertionError):
        check_invariants(doc)
