"""Every output says how its profile was taken: engine, mode, requested and
achieved rate, samples, dropped and partial samples, an interrupted run."""
from __future__ import annotations

import gzip
import json

import pytest
from profile_factory import make_profile

from truestack.exporters import export
from truestack.model.facts import facts_line, sampling_facts

EXPECTED = {
    "engine": "native-cpu", "mode": "cpu", "rate": "100 Hz requested, 97.5 Hz achieved",
    "dropped": "2", "partial": "1 (fault: 1)", "timer": "perf_event task-clock", "interrupted": "SIGINT",
}


def test_facts_read_from_metadata():
    facts = dict(sampling_facts(make_profile()))
    for label, value in EXPECTED.items():
        assert facts[label] == value, label
    assert "interrupted" not in dict(sampling_facts(make_profile(interrupted=None)))


def test_safepoint_engine_is_labelled_biased():
    profile = make_profile()
    profile.meta.engine = "safepoint"
    profile.meta.sampler_stats.biased = True
    assert dict(sampling_facts(profile))["engine"] == "safepoint (biased)"


def test_pprof_comments_carry_the_facts():
    pytest.importorskip("google.protobuf")
    from truestack.exporters.pprof import message_classes

    msg = message_classes()["Profile"]()
    msg.ParseFromString(gzip.decompress(export(make_profile(), "pprof")))
    comments = {msg.string_table[c] for c in msg.comment}
    for label, value in EXPECTED.items():
        assert f"{label}: {value}" in comments


def test_firefox_extra_panel_carries_the_facts():
    doc = json.loads(export(make_profile(), "firefox"))
    entries = {e["label"].lower(): e["value"] for e in doc["meta"]["extra"][0]["entries"]}
    for label, value in EXPECTED.items():
        assert entries[label] == value


def test_speedscope_title_carries_the_facts():
    doc = json.loads(export(make_profile(), "speedscope"))
    assert doc["name"] == f"app.py --fast ({facts_line(make_profile())})"
    assert "dropped 2" in doc["name"] and "partial 1 (fault: 1)" in doc["name"]


def test_flamegraph_header_carries_the_facts():
    page = export(make_profile(), "flamegraph").decode()
    for label in ("engine", "mode", "rate", "dropped", "partial"):
        assert f'data-key="{label}">{EXPECTED[label]}<' in page


def test_summary_explains_the_sample_counts():
    from truestack.model.facts import header_lines

    profile = make_profile()
    text = "\n".join(header_lines(profile))
    # Per thread, largest first.
    assert "per thread: MainThread 8, worker-ü 4" in text, text
    # cpu mode: the CPU time the samples stand for, and what it means at the rate.
    cpu_s = profile.total_weight_ns / 1e9
    assert f"cpu mode samples CPU time, not wall time: {cpu_s:.2f} s of CPU at 100 Hz" in text, text
    assert f"≈ {round(cpu_s * 100):,} samples" in text, text
    assert "2 samples dropped: no room in the sample ring" in text, text
    profile.meta.mode = "wall"
    assert "wall mode samples every thread every 10 ms" in "\n".join(header_lines(profile))
