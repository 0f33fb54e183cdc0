"""The flame graph exporter's embedded data: escaping, and totals that match the profile."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from truestack.exporters import export as export_format
from truestack.exporters import flamegraph
from truestack.model import Profile
from truestack.model.aggregate import aggregate
from truestack.samples import Frame, Sample

NASTY = "evil</script><script>alert(1)</script><!-- {{js}} & \u2028\u2029 \"q\" 'q' \\ \U0001f525"


def frame(name: str, line: int, file: str = "/app/main.py") -> Frame:
    return Frame(name, file, line, line)


def make_profile(meta: dict | None = None) -> Profile:
    p = Profile(meta or {"command": ["python", "app.py"], "engine": "native-cpu", "mode": "cpu", "rate_hz": 100})
    mod, main, work, nasty = frame("<module>", 1), frame("main", 10), frame("work", 20), frame(NASTY, 30, "/x/<b>.py")
    loop40, loop41 = Frame("loop", "/app/main.py", 40, 39), Frame("loop", "/app/main.py", 41, 39)
    stacks = [
        (1, "MainThread", (mod, main, work), 5, 1_000_000),
        (1, "MainThread", (mod, main), 2, 2_000_000),
        (1, "MainThread", (mod, main, nasty), 1, 3_000_000),
        (1, "MainThread", (), 1, 500_000),  # a sample with no Python frames
        (7, "worker <&>", (mod, loop40, work), 4, 1_500_000),
        (7, "worker <&>", (mod, loop40, loop41), 3, 700_000),
    ]
    t = 0
    for tid, name, frames, count, weight in stacks:
        for _ in range(count):
            t += 1000
            p.add_sample(Sample(tid, name, t, weight, frames))
    return p


def embedded(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="ts-data">(.*?)</script>', page, re.S)
    assert m, "no data element"
    return json.loads(m.group(1))


def node_paths(data: dict) -> list[tuple[str, ...]]:
    """Label path (root first) of every node, rebuilt from the embedded tables only."""
    s, funcs, frames = data["strings"], data["funcs"], data["frames"]

    def label(f: int) -> str:
        func = frames[3 * f]
        return f"{s[funcs[3 * func]]}|{s[funcs[3 * func + 1]]}|{frames[3 * f + 1]}"

    paths: list[tuple[str, ...]] = [()]
    for i, (delta, f) in enumerate(zip(data["parents"], data["nframe"]), 1):
        parent = i - delta
        assert 0 <= parent < i, "parents must come before children"
        paths.append(paths[parent] + (label(f),))
    return paths


def profile_paths(p: Profile, tid: int) -> Counter:
    out: Counter = Counter()
    for stack, (count, weight) in aggregate(p).thread_stack_totals(tid).items():
        key = tuple(f"{p.func_name(p.frame_func(f))}|{p.func_file(p.frame_func(f))}|{p.frame_line(f)}"
                    for f in p.stack_frames(stack))
        out[key, "count"] += count
        out[key, "weight"] += weight
    return out


def test_totals_per_thread_match_the_profile() -> None:
    p = make_profile()
    data = embedded(flamegraph.export(p).decode())
    paths = node_paths(data)
    assert len(paths) == len(set(paths)), "one node per distinct stack"
    assert {t["tid"] for t in data["threads"]} == {1, 7}
    for t in data["threads"]:
        thread = p.threads[t["tid"]]
        assert t["name"] == thread.name
        assert t["samples"] == len(thread) == sum(t["counts"])
        assert sum(t["weights"]) == sum(thread.weight_ns)
        got: Counter = Counter()
        node = 0
        for delta, count, weight in zip(t["nodes"], t["counts"], t["weights"]):
            node += delta
            got[paths[node], "count"] += count
            got[paths[node], "weight"] += weight
        assert got == profile_paths(p, t["tid"])


def test_empty_stack_samples_land_on_the_root() -> None:
    data = embedded(flamegraph.export(make_profile()).decode())
    main = next(t for t in data["threads"] if t["tid"] == 1)
    assert main["nodes"][0] == 0 and main["counts"][0] == 1 and main["weights"][0] == 500_000


def test_unreached_stacks_are_not_embedded() -> None:
    p = make_profile()
    orphan = p.intern_stack((frame("never_sampled", 99),))
    data = embedded(flamegraph.export(p).decode())
    assert len(data["parents"]) == len(p.stacks) - 1
    assert "never_sampled" not in data["strings"]
    assert orphan == len(p.stacks) - 1


def test_hostile_names_cannot_break_out_of_the_script_element() -> None:
    page = flamegraph.export(make_profile({"command": ["</script><b>", NASTY]})).decode()
    # exactly two script elements close: the data and the viewer
    assert page.lower().count("</script") == 2
    assert "<!--" not in page.split('id="ts-data">', 1)[1].split("</script>", 1)[0]
    data_text = page.split('id="ts-data">', 1)[1].split("</script>", 1)[0]
    assert "\u2028" not in data_text and "\u2029" not in data_text
    data = embedded(page)
    assert NASTY in data["strings"] and "/x/<b>.py" in data["strings"]
    # the data is inserted after the template is filled, so '{{js}}' in a name is not expanded
    assert data["strings"].count(NASTY) == 1
    assert "<b>" not in page.split("<body>", 1)[1].split("<script", 1)[0]
    assert "&lt;/script&gt;&lt;b&gt;" in page
    assert "worker <&>" in [t["name"] for t in data["threads"]]


def test_json_for_html_round_trips() -> None:
    obj = {"s": [NASTY, "a>b", "&amp;", "\u2028"], "n": [1, -2, 3.5]}
    text = flamegraph.json_for_html(obj)
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == obj


def test_page_is_self_contained() -> None:
    page = flamegraph.export(make_profile()).decode()
    assert page.startswith("<!DOCTYPE html>")
    assert "{{" not in page.replace("{{js}}", "")  # every placeholder filled (the nasty name aside)
    assert not re.search(r"""<(script|link|img|iframe)[^>]+(src|href)\s*=""", page, re.I)
    assert "http://" not in page and "https://" not in page
    assert "truestackFlame" in page and ".ts-view" in page  # the assets are inlined


def test_header_shows_run_facts_and_bias_warning() -> None:
    stats = {"engine": "safepoint", "mode": "wall", "requested_rate_hz": 250.0, "achieved_rate_hz": 198.4,
             "samples": 16, "dropped": 3, "partial": {"truncated": 2, "race": 1}, "biased": True, "duration_s": 1.5}
    p = make_profile({"command": ["python", "-m", "svc"], "engine": "safepoint", "mode": "wall", "rate_hz": 250,
                      "sampler_stats": stats, "python_version": "3.12.1 (main, ...)"})
    page = flamegraph.export(p).decode()
    header = page.split('<header class="ts-header">', 1)[1].split("</header>", 1)[0]
    assert "python -m svc" in header
    assert "safepoint" in header and "wall" in header
    assert "250 Hz requested, 198.4 Hz achieved" in header
    assert f"{p.sample_count:,}" in header
    assert 'data-key="dropped">3<' in header
    assert "3 (race: 1, truncated: 2)" in header
    assert "Biased profile (safepoint engine)" in header


def test_no_bias_warning_for_the_native_engine() -> None:
    page = flamegraph.export(make_profile()).decode()
    assert "Biased profile" not in page
    assert "achieved unknown" in page


def test_empty_profile_exports() -> None:
    data = embedded(flamegraph.export(Profile({})).decode())
    assert data["threads"] == [] and data["parents"] == []


def test_registered_under_its_format_name() -> None:
    p = make_profile()
    assert export_format(p, "flamegraph") == flamegraph.export(p)


@pytest.mark.parametrize("lines", [True, False])
def test_function_level_profiles(lines: bool) -> None:
    p = make_profile()
    q = p if lines else p.merged_lines()
    data = embedded(flamegraph.export(q).decode())
    assert data["functionLevel"] is (not lines)
    # merging lines folds loop:40 and loop:41 into one frame
    assert len(data["frames"]) // 3 == (len(p.frames) if lines else len(p.frames) - 1) == len(q.frames)
