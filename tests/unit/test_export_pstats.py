"""pstats: loaded by the standard library's pstats.Stats, recursion counted once."""
from __future__ import annotations

import io
import pstats

import pytest
from profile_factory import INTERVAL_NS, expected_total_weight_ns, make_profile, make_recursive_profile

from truestack.exporters import export


def load(profile, tmp_path) -> pstats.Stats:
    path = tmp_path / "out.pstats"
    path.write_bytes(export(profile, "pstats"))
    return pstats.Stats(str(path), stream=io.StringIO())


def test_stats_load_sort_and_print(tmp_path):
    stats = load(make_profile(), tmp_path)
    out = io.StringIO()
    stats.stream = out
    stats.sort_stats("cumulative").print_stats()
    stats.print_callers()
    stats.print_callees()
    text = out.getvalue()
    assert "math_utils.py:4(fib)" in text
    assert "Über.naïve_λ" in text
    # The total is every weighted sample except the one with an empty stack.
    total_ns = expected_total_weight_ns() - INTERVAL_NS
    assert stats.total_tt == pytest.approx(total_ns / 1e9)


def test_function_figures(tmp_path):
    s = load(make_profile(), tmp_path).stats
    cc, nc, tt, ct, callers = s[("/app/math_utils.py", 4, "fib")]
    assert (cc, nc) == (6, 10)  # 6 samples hold fib; 10 fib frames in all
    assert tt == pytest.approx(0.062) and ct == pytest.approx(0.062)  # fib is always the leaf
    assert set(callers) == {("/app/main.py", 8, "run"), ("/app/math_utils.py", 4, "fib"),
                            ("/app/worker.py", 18, "Worker.loop")}
    assert s[("~", 0, "time.sleep")][2] == pytest.approx(0.03)
    assert s[("/app/main.py", 1, "<module>")][4] == {}  # a root has no callers


def test_recursion_counts_once(tmp_path):
    stats = load(make_recursive_profile(), tmp_path)
    total = 7 * INTERVAL_NS / 1e9
    assert stats.total_tt == pytest.approx(total)
    for cc, nc, tt, ct, callers in stats.stats.values():
        assert ct <= total + 1e-12
        assert tt <= ct + 1e-12
    cc, nc, tt, ct, callers = stats.stats[("/r.py", 1, "a")]
    assert (cc, nc) == (6, 3 * 3 + 2 + 2)
    assert ct == pytest.approx(6 * INTERVAL_NS / 1e9)
    assert tt == pytest.approx(3 * INTERVAL_NS / 1e9)
    # a called from a: 4 samples have that edge (3 of a,a,a,b and the a,a one), 3*2 + 1 edge frames.
    enc, ecc, ett, ect = callers[("/r.py", 1, "a")]
    assert (enc, ecc) == (7, 4)
    assert ect == pytest.approx(4 * INTERVAL_NS / 1e9)
    b = stats.stats[("/r.py", 8, "b")]
    assert b[3] == pytest.approx(4 * INTERVAL_NS / 1e9)
    assert b[4][("/r.py", 1, "a")][:2] == (3, 3)


def test_stats_add_merges_two_exports(tmp_path):
    stats = load(make_recursive_profile(), tmp_path)
    other = tmp_path / "again.pstats"
    other.write_bytes(export(make_recursive_profile(), "pstats"))
    stats.add(str(other))
    assert stats.total_tt == pytest.approx(2 * 7 * INTERVAL_NS / 1e9)
