"""Profile model and the saved format: round trip, damaged files, merged lines, idle filtering."""
from __future__ import annotations

import struct
import zlib

import pytest

from truestack.model import FORMAT_VERSION, Marker, Profile, ProfileFormatError, is_profile_file, load, save
from truestack.model.storage import MAGIC, dumps
from truestack.samples import Frame, Sample

A10 = Frame("a", "/m.py", 10, 9)
A11 = Frame("a", "/m.py", 11, 9)
B = Frame("b", "/m.py", 20, 19)
N = Frame("len", "", 0, 0, kind="native")


def build() -> Profile:
    profile = Profile({"mode": "wall", "rate_hz": 100, "command": ["m.py"], "interrupted": None})
    rows = [
        (1, "MainThread", (A10,), "running", 7),
        (1, "MainThread", (A10, B), "running", 9),
        (1, "MainThread", (A11, B), "idle", 0),
        (1, "MainThread", (A11, B, N), "running", 10),
        (2, "worker", (), "idle", 0),
        (2, "worker", (B,), "running", 5),
    ]
    for i, (tid, name, frames, state, cpu) in enumerate(rows):
        profile.add_sample(Sample(tid, name, 1000 + i, 10_000_000, frames, cpu_delta_ns=cpu, state=state))
    profile.add_marker(Marker("load ✓", 1001, None, 1, {"n": 1}))
    profile.add_marker(Marker("phase", 1002, 1004, 2, {}))
    return profile


def stacks_as_names(profile: Profile) -> list[tuple[int, tuple[str, ...], int, str]]:
    out = []
    for row in profile.iter_samples():
        labels = tuple(profile.frame_label(f) for f in profile.stack_frames(row.stack))
        out.append((row.thread.tid, labels, row.cpu_delta_ns, row.state))
    return out


def test_round_trip_keeps_everything(tmp_path):
    profile = build()
    path = tmp_path / "p.tsp"
    save(profile, path)
    assert is_profile_file(path)
    back = load(path)
    assert stacks_as_names(back) == stacks_as_names(profile)
    assert back.meta == profile.meta
    assert [(m.name, m.start_ns, m.end_ns, m.thread_id, m.data) for m in back.markers] == \
        [("load ✓", 1001, None, 1, {"n": 1}), ("phase", 1002, 1004, 2, {})]
    assert {t.tid: t.name for t in back.threads.values()} == {1: "MainThread", 2: "worker"}
    assert list(back.threads[1].time_ns) == [1000, 1001, 1002, 1003]
    assert back.frame_kind(back.frames.rows.index(next(r for r in back.frames
                                                        if back.func_name(r.func) == "len"))) == "native"


def test_stack_table_is_a_prefix_tree():
    profile = build()
    # (A11, B) and (A11, B, N) share a prefix: the deeper stack's parent is the shallower one
    ids = {tuple(profile.frame_label(f) for f in profile.stack_frames(s)): s for s in range(len(profile.stacks))}
    deep = ids[("a (/m.py:11)", "b (/m.py:20)", "len ()")]
    assert profile.stacks.prefix[deep] == ids[("a (/m.py:11)", "b (/m.py:20)")]
    for i in range(len(profile.stacks)):
        assert profile.stacks.prefix[i] < i


def test_a_stack_given_in_parts_is_the_stack_of_its_frames():
    # --async hands each task's stack over as (its prefix, the stack from its coroutine up):
    # interned part by part, it must be the very stack the whole tuple gives, empty parts included.
    heads = [(), (Frame("task:a", "", 0, 0, "truncated"),), (Frame("task:p", "", 0, 0, "truncated"), A10)]
    tails = [(), (A10,), (A11, B), (A11, B, N)]
    whole, parted = Profile(), Profile()
    for i, (head, tail) in enumerate((h, t) for h in heads for t in tails):
        parted_sample = Sample(1, "t", i, 1, head + tail)
        parted_sample.parts = (head, tail)
        whole.add_sample(Sample(1, "t", i, 1, head + tail))
        parted.add_sample(parted_sample)
        parted.add_sample(parted_sample)  # a second time: its parts found by identity
    assert stacks_as_names(parted)[::2] == stacks_as_names(whole) == stacks_as_names(parted)[1::2]
    assert list(parted.stacks.prefix) == list(whole.stacks.prefix)
    assert list(parted.stacks.frame) == list(whole.stacks.frame)


def test_truncated_file(tmp_path):
    data = dumps(build())
    path = tmp_path / "cut.tsp"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ProfileFormatError, match="truncated"):
        load(path)


def test_newer_version(tmp_path):
    data = bytearray(dumps(build()))
    struct.pack_into("<H", data, len(MAGIC), FORMAT_VERSION + 1)
    path = tmp_path / "new.tsp"
    path.write_bytes(bytes(data))
    with pytest.raises(ProfileFormatError, match="newer"):
        load(path)


@pytest.mark.parametrize("content", [b"", b"hello world\n", b"\x89PNG\r\n\x1a\n" + b"\0" * 40])
def test_not_a_profile(tmp_path, content):
    path = tmp_path / "x.tsp"
    path.write_bytes(content)
    assert not is_profile_file(path)
    with pytest.raises(ProfileFormatError, match="not a truestack profile"):
        load(path)


def test_corrupt_payload(tmp_path):
    data = MAGIC + struct.pack("<HH", FORMAT_VERSION, 0) + zlib.compress(b"\xff\xff\xff\x7f garbage")
    path = tmp_path / "bad.tsp"
    path.write_bytes(data)
    with pytest.raises(ProfileFormatError, match="corrupt"):
        load(path)


def test_merged_lines_merges_frames_of_one_function():
    profile = build()
    merged = profile.merged_lines()
    assert merged.meta.function_level is True
    assert profile.meta.function_level is not True  # the original is untouched
    labels = [labels for _tid, labels, _cpu, _state in stacks_as_names(merged)]
    assert labels[0] == ("a (/m.py)",)
    assert labels[1] == labels[2] == ("a (/m.py)", "b (/m.py)")  # lines 10 and 11 of a merged
    assert len(merged.frames) == 3  # a, b, len
    assert merged.sample_count == profile.sample_count
    assert len(merged.markers) == 2


def test_without_idle_drops_only_idle():
    profile = build()
    busy = profile.without_idle()
    assert busy.sample_count == 4
    assert all(row.state != "idle" for row in busy.iter_samples())
    assert profile.sample_count == 6


def test_sample_stream_costs_columns_not_objects():
    profile = Profile()
    for i in range(1000):
        profile.add_sample(Sample(1, "t", i, 1, (A10, B) if i % 2 else (A11,)))
    assert len(profile.stacks) == 3  # unique stacks only
    assert profile.sample_count == 1000
    assert profile.threads[1].stack.itemsize == 4


def test_summary_table_counts_recursion_once():
    from truestack.exporters.summary import render_summary

    rec = Frame("rec", "/r.py", 2, 1)
    profile = Profile({"rate_hz": 100})
    for frames in ((rec, rec, rec), (rec,), (A10,)):
        profile.add_sample(Sample(1, "t", 0, 1, frames))
    table = render_summary(profile, top=10).split("\n\n", 1)[1]
    rows = {line.split()[0]: line.split()[-4:] for line in table.splitlines()[1:]}
    assert rows["rec"] == ["2", "66.7%", "2", "66.7%"]
    assert rows["a"] == ["1", "33.3%", "1", "33.3%"]
