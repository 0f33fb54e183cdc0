"""The text method table (and the render_table the CLI summary calls)."""
from __future__ import annotations

import re

from profile_factory import expected_total_count, make_profile, make_recursive_profile

from truestack.exporters import export
from truestack.exporters.table import method_rows, render_table
from truestack.model import Profile
from truestack.samples import Frame, Sample

ROW = re.compile(r"^(.*?)\s+(\d+)\s+([\d.]+)%\s+(\d+)\s+([\d.]+)%$")


def parsed(text: str) -> list[tuple[str, int, float, int, float]]:
    out = []
    for line in text.splitlines()[1:]:
        m = ROW.match(line)
        assert m, line
        out.append((m.group(1), int(m.group(2)), float(m.group(3)), int(m.group(4)), float(m.group(5))))
    return out


def test_header_and_alignment():
    text = render_table(make_profile(), top=None)
    lines = text.splitlines()
    assert lines[0].split() == ["method", "samples", "%", "on", "top", "%"]
    assert len({len(line) for line in lines}) == 1  # every column right-aligned to one width
    # Every row's last column ends where the header's does.
    assert all(line.endswith("%") for line in lines)


def test_values_sorted_by_total():
    rows = parsed(render_table(make_profile(), top=None))
    totals = [r[1] for r in rows]
    assert totals == sorted(totals, reverse=True)
    by_name = {r[0]: r for r in rows}
    fib = by_name["fib (math_utils.py:4)"]
    assert fib[1] == 7 and fib[3] == 7  # recursion counted once per sample
    assert abs(fib[2] - 100 * 7 / expected_total_count()) < 0.06
    assert by_name["time.sleep"][3] == 3  # native frame: no file to show
    assert sum(r[3] for r in rows) == expected_total_count()  # every sample is on top of one row


def test_top_n_and_export():
    assert len(render_table(make_profile(), top=3).splitlines()) == 4
    full = export(make_profile(), "table").decode()
    header, table = full.split("\n\n", 1)
    assert header.startswith("truestack: ") and "2 dropped, 1 partial (fault 1)" in header
    assert "INTERRUPTED: SIGINT" in header
    assert table.endswith("\n") and len(table.splitlines()) == 1 + len(method_rows(make_profile())[0])


def test_recursive_totals_never_exceed_samples():
    rows, total = method_rows(make_recursive_profile())
    assert total == 7
    assert {r.method: (r.total, r.self) for r in rows} == {"a (r.py:1)": (6, 3), "b (r.py:8)": (4, 4)}


def test_long_names_are_shortened_from_the_left():
    profile = Profile({"rate_hz": 100})
    frame = Frame("x" * 200 + ".tail", "/p/mod.py", 1, 1)
    profile.add_sample(Sample(1, "MainThread", 1, 10_000_000, (frame,)))
    line = render_table(profile).splitlines()[1]
    assert line.startswith("…") and "tail (mod.py:1)" in line and len(line) < 120


def test_empty():
    assert render_table(Profile()) == "(no samples)"
