"""The SVG flame graph (`-f svg`, `-o x.svg`)."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from profile_factory import expected_total_count, make_profile

from truestack.exporters import export, format_for_path
from truestack.exporters.svg import PAD, WIDTH, fit_label
from truestack.model import Profile
from truestack.model.facts import facts_line
from truestack.samples import Frame, Sample

NS = {"s": "http://www.w3.org/2000/svg"}


def frames(svg: bytes) -> dict[str, list[dict]]:
    """data-n label -> [{x, w, d, title}] of every drawn frame; the document must be well-formed XML."""
    root = ET.fromstring(svg)
    out: dict[str, list[dict]] = {}
    for g in root.iterfind(".//s:g[@class='f']", NS):
        entry = {"x": float(g.get("data-x")), "w": float(g.get("data-w")), "d": int(g.get("data-d")),
                 "title": g.find("s:title", NS).text, "text": g.find("s:text", NS).text or ""}
        out.setdefault(g.get("data-n"), []).append(entry)
    return out


def test_frames_titles_and_widths():
    svg = export(make_profile(), "svg")
    assert svg.startswith(b"<?xml") and b"http://" not in svg.replace(b"http://www.w3.org/2000/svg", b"")
    boxes = frames(svg)
    total = expected_total_count()
    full = WIDTH - 2 * PAD
    (root,) = [v[0] for k, v in boxes.items() if k.startswith("all")]
    assert root["w"] == full and root["d"] == 0
    fib = max(boxes["fib (math_utils.py:5)"], key=lambda b: b["w"])
    assert len(boxes["fib (math_utils.py:5)"]) == 2  # under run and under Worker.loop
    assert fib["title"].startswith("fib (/app/math_utils.py:5)\n5 samples, 33.33%, 0.042 s")
    assert abs(fib["w"] - full * 5 / total) < 0.01
    assert boxes["time.sleep"][0]["title"].startswith("time.sleep\n3 samples, 20.00%")
    assert "weird;name split (odd file.py:7)" in boxes and "Über.naïve_λ (ünï.py:2)" in boxes
    # a child sits one level up and inside its parent
    (run,) = boxes["run (main.py:10)"]
    assert fib["d"] == run["d"] + 1 and run["x"] <= fib["x"] and fib["x"] + fib["w"] <= run["x"] + run["w"] + 1e-6


def test_subtitle_script_and_reset_control():
    svg = export(make_profile(), "svg")
    root = ET.fromstring(svg)
    texts = {t.get("id"): t.text for t in root.iterfind("s:text", NS)}
    assert texts["subtitle"] == facts_line(make_profile())
    assert texts["title"] == "truestack flame graph: app.py --fast"
    assert texts["unzoom"] == "Reset Zoom"
    script = root.find("s:script", NS).text
    assert "function zoom" in script and "addEventListener(\"click\"" in script


def test_labels_are_cut_to_fit():
    assert fit_label("short", 200) == "short"
    cut = fit_label("a_rather_long_function_name (module.py:10)", 80)
    assert cut.endswith("..") and len(cut) < 12
    assert fit_label("anything", 10) == ""
    profile = Profile({"rate_hz": 100})
    wide, narrow = Frame("wide_function", "/p/m.py", 1, 1), Frame("x" * 80 + "_narrow", "/p/m.py", 5, 5)
    for i in range(100):
        profile.add_sample(Sample(1, "MainThread", i, 10_000_000, (wide, narrow) if i == 0 else (wide,)))
    boxes = frames(export(profile, "svg"))
    (narrow_box,) = [v[0] for k, v in boxes.items() if k.startswith("xxx")]
    assert narrow_box["text"] == "" or narrow_box["text"].endswith("..")
    assert boxes["wide_function (m.py:1)"][0]["text"] == "wide_function (m.py:1)"


def test_names_are_escaped():
    profile = Profile({"rate_hz": 100, "command": ["<x>&"]})
    profile.add_sample(Sample(1, "MainThread", 1, 10_000_000, (Frame("a<b>&\"c\x01", "/p.py", 1, 1),)))
    svg = export(profile, "svg")
    assert b"<b>" not in svg and b"\x01" not in svg
    assert 'a<b>&"c? (p.py:1)' in frames(svg)


def test_extension_and_empty():
    assert format_for_path("out.svg") == "svg"
    assert len(frames(export(Profile(), "svg"))) == 0
