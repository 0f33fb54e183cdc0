"""Collapsed stacks: parsed back the way flamegraph.pl / inferno read them."""
from __future__ import annotations

import re

from profile_factory import SAMPLES, expected_total_count, make_profile, make_recursive_profile, weighted

from truestack.exporters import export
from truestack.exporters.collapsed import sanitize
from truestack.model import Profile
from truestack.model.aggregate import weighted_stack_counts

# flamegraph.pl's own line pattern (stackcollapse output -> flamegraph.pl input)
FLAMEGRAPH_PL_LINE = re.compile(r"^(.*)\s+?(\d+(?:\.\d*)?)$")


def parse(data: bytes) -> dict[tuple[str, ...], int]:
    out: dict[tuple[str, ...], int] = {}
    for line in data.decode("utf-8").splitlines():
        m = FLAMEGRAPH_PL_LINE.match(line)
        assert m, f"unparseable line {line!r}"
        frames = tuple(m.group(1).split(";"))
        assert all(frames), line
        out[frames] = out.get(frames, 0) + int(m.group(2))
    return out


def test_totals_round_trip():
    stacks = parse(export(make_profile(), "collapsed"))
    assert sum(stacks.values()) == expected_total_count() == 15


def test_root_first_labels_and_weighted_counts():
    stacks = parse(export(make_profile(), "collapsed"))
    fib_fib = ("<module> (/app/main.py:3)", "run (/app/main.py:10)", "fib (/app/math_utils.py:5)",
               "fib (/app/math_utils.py:6)")
    assert stacks[fib_fib] == 2  # one sample that lasted two intervals
    # The 0.2-interval sample still counts once, on top of the full one.
    assert stacks[fib_fib[:3]] == weighted(1) + weighted(0.2) == 2
    assert stacks[("Worker.loop (/app/worker.py:20)", "time.sleep")] == 3
    assert stacks[("(no frames)",)] == 1


def test_unicode_and_separators_sanitized():
    data = export(make_profile(), "collapsed")
    text = data.decode("utf-8")
    assert "Über.naïve_λ (/app/ünï.py:2)" in text
    assert "weird:name split (/app/odd file.py:7)" in text
    assert len(text.splitlines()) == len(parse(data))  # no record was split by a newline
    assert sanitize("a;b\r\nc\nd") == "a:b c d"


def test_recursion_keeps_every_level():
    stacks = parse(export(make_recursive_profile(), "collapsed"))
    a, b = "a (/r.py:2)", "b (/r.py:9)"
    assert stacks == {(a, a, a, b): 3, (a,): 2, (a, a): 1, (b,): 1}


def test_without_rate_counts_samples():
    profile = make_profile(rate_hz=None)
    assert sum(parse(export(profile, "collapsed")).values()) == len(SAMPLES)
    assert sum(weighted_stack_counts(profile).values()) == len(SAMPLES)


def test_function_level_labels_have_no_line():
    stacks = parse(export(make_profile().merged_lines(), "collapsed"))
    assert sum(stacks.values()) == expected_total_count()
    assert ("<module> (/app/main.py)", "run (/app/main.py)", "fib (/app/math_utils.py)",
            "fib (/app/math_utils.py)") in stacks


def test_per_root_totals_match_table():
    # Two independent aggregations of one profile must agree on what each root covers.
    stacks = parse(export(make_profile(), "collapsed"))
    roots: dict[str, int] = {}
    for frames, n in stacks.items():
        roots[frames[0]] = roots.get(frames[0], 0) + n
    table = export(make_profile(), "table").decode()
    row = next(line for line in table.splitlines() if line.startswith("Worker.loop"))
    assert int(row.split()[2]) == roots["Worker.loop (/app/worker.py:20)"] == 6


def test_empty_profile():
    assert export(Profile({"rate_hz": 100}), "collapsed") == b""
