"""speedscope: validated against its published JSON schema (tests/data/speedscope-schema.json,
speedscope's file-format-schema.json) and checked for what the viewer computes from it."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from profile_factory import INTERVAL_NS, SAMPLES, make_profile, make_recursive_profile

from truestack.exporters import export
from truestack.model import Profile
from truestack.samples import Frame, Sample

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "data" / "speedscope-schema.json").read_text())


def validate(doc: dict) -> None:
    jsonschema.Draft6Validator(SCHEMA).validate(doc)


def test_validates_against_published_schema():
    doc = json.loads(export(make_profile(), "speedscope"))
    validate(doc)
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"


def test_schema_check_can_fail():
    doc = json.loads(export(make_profile(), "speedscope"))
    broken = copy.deepcopy(doc)
    del broken["profiles"][0]["weights"]
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)
    broken = copy.deepcopy(doc)
    broken["profiles"][0]["unit"] = "parsecs"
    with pytest.raises(jsonschema.ValidationError):
        validate(broken)


def test_threads_frames_and_weights():
    doc = json.loads(export(make_profile(), "speedscope").decode("utf-8"))
    frames = doc["shared"]["frames"]
    assert [p["name"] for p in doc["profiles"]] == ["MainThread (tid 1)", "worker-ü (tid 2)"]
    for prof, tid in zip(doc["profiles"], (1, 2)):
        assert prof["unit"] == "nanoseconds"
        assert len(prof["samples"]) == len(prof["weights"])
        expected = sum(int(s[3] * INTERVAL_NS) for s in SAMPLES if s[0] == tid)
        assert sum(prof["weights"]) == expected == prof["endValue"] - prof["startValue"]
        for stack in prof["samples"]:
            assert stack and all(0 <= i < len(frames) for i in stack)
    names = {f["name"] for f in frames}
    assert {"Über.naïve_λ", "weird;name\nsplit", "time.sleep", "(no frames)"} <= names
    native = next(f for f in frames if f["name"] == "time.sleep")
    assert "file" not in native and "line" not in native


def test_recursive_stacks_root_first():
    doc = json.loads(export(make_recursive_profile(), "speedscope"))
    frames = doc["shared"]["frames"]
    prof = doc["profiles"][0]
    named = {tuple(frames[i]["name"] for i in s): w for s, w in zip(prof["samples"], prof["weights"])}
    assert named == {("a", "a", "a", "b"): 3 * INTERVAL_NS, ("a",): 2 * INTERVAL_NS,
                     ("a", "a"): INTERVAL_NS, ("b",): INTERVAL_NS}
    assert frames[0] == {"name": "a", "file": "/r.py", "line": 2}


def test_no_weights_falls_back_to_counts():
    profile = Profile({"rate_hz": 100})
    frame = Frame("f", "/f.py", 3, 1)
    for t in range(4):
        profile.add_sample(Sample(7, "T", t, 0, (frame,)))
    doc = json.loads(export(profile, "speedscope"))
    validate(doc)
    assert doc["profiles"][0]["unit"] == "none" and doc["profiles"][0]["weights"] == [4]


def test_empty_profile_is_valid():
    validate(json.loads(export(Profile(), "speedscope")))
