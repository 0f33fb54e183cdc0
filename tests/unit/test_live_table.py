"""The live table behind `truestack top`: windows, cumulative shares, thread filter, sorting, text."""
from __future__ import annotations

import pytest

from truestack.exporters.top_text import lines, render_snapshot, table_lines
from truestack.model import Profile
from truestack.model.live import LiveTable
from truestack.samples import Frame, Sample

MAIN = Frame("<module>", "/app/main.py", 1, 1)
HOT = Frame("hot", "/app/main.py", 5, 4)
COLD = Frame("cold", "/app/lib/util.py", 9, 8)
REC = Frame("rec", "/app/main.py", 20, 19)
MS = 1_000_000


def _add(profile: Profile, tid: int, frames: tuple[Frame, ...], weight_ms: float, state: str = "running",
         name: str = "MainThread") -> None:
    profile.add_sample(Sample(tid, name, 0, int(weight_ms * MS), frames, state=state))


def _by_name(rows):
    return {r.name: r for r in rows}


def test_window_holds_only_the_samples_since_the_last_advance_cumulative_holds_all():
    p = Profile({"mode": "cpu", "rate_hz": 100})
    table = LiveTable(p, start_s=10.0)
    for _ in range(3):
        _add(p, 1, (MAIN, HOT), 10)
    _add(p, 1, (MAIN, COLD), 10)
    first = table.advance(11.0)
    assert (first.elapsed_s, first.window_s, first.window_samples, first.samples) == (1.0, 1.0, 4, 4)
    rows = _by_name(first.rows("window"))
    assert rows["hot"].own == pytest.approx(75.0) and rows["cold"].own == pytest.approx(25.0)
    assert rows["<module>"].own == 0 and rows["<module>"].total == pytest.approx(100.0)
    assert rows["hot"].location == "app/main.py:4" and rows["cold"].location == "lib/util.py:8"

    _add(p, 1, (MAIN, COLD), 20)  # one sample, twice the weight: shares are of weight, not counts
    second = table.advance(11.5)
    assert (second.window_s, second.window_samples, second.samples) == (0.5, 1, 5)
    window = _by_name(second.rows("window"))
    assert set(window) == {"<module>", "cold"} and window["cold"].own == pytest.approx(100.0)
    cumulative = _by_name(second.rows("cumulative"))
    assert cumulative["hot"].own == pytest.approx(50.0) and cumulative["cold"].own == pytest.approx(50.0)
    # The first snapshot is frozen: a paused view keeps showing it.
    assert _by_name(first.rows("cumulative"))["hot"].own == pytest.approx(75.0)
    assert not table.has_new_samples()
    _add(p, 1, (MAIN,), 1)
    assert table.has_new_samples()


def test_recursion_counts_once_in_total_and_own_goes_to_the_leaf():
    p = Profile({"mode": "cpu", "rate_hz": 100})
    table = LiveTable(p)
    _add(p, 1, (MAIN, REC, REC, REC), 10)
    _add(p, 1, (MAIN, REC, HOT), 10)
    rows = _by_name(table.advance(1.0).rows("window"))
    assert rows["rec"].total == pytest.approx(100.0) and rows["rec"].own == pytest.approx(50.0)
    assert rows["hot"].total == pytest.approx(50.0) and rows["hot"].own == pytest.approx(50.0)


def test_sort_keys_and_thread_filter():
    p = Profile({"mode": "cpu", "rate_hz": 100})
    table = LiveTable(p)
    _add(p, 1, (MAIN, HOT), 30)
    _add(p, 1, (MAIN, COLD), 10)
    _add(p, 2, (COLD,), 40, name="worker")
    snap = table.advance(1.0)
    assert [r.name for r in snap.rows("window", "own")] == ["cold", "hot", "<module>"]
    assert [r.name for r in snap.rows("window", "total")] == ["cold", "<module>", "hot"]
    assert [r.name for r in snap.rows("window", "name")] == ["<module>", "cold", "hot"]
    assert snap.thread_ids() == [1, 2] and snap.thread_name(2) == "worker"
    main_only = _by_name(snap.rows("window", "own", thread=1))
    assert main_only["hot"].own == pytest.approx(75.0) and main_only["cold"].own == pytest.approx(25.0)
    worker_only = _by_name(snap.rows("window", "own", thread=2))
    assert set(worker_only) == {"cold"} and worker_only["cold"].own == pytest.approx(100.0)
    with pytest.raises(ValueError):
        snap.rows("window", "size")


def test_wall_mode_leaves_idle_samples_out_unless_asked():
    p = Profile({"mode": "wall", "rate_hz": 100})
    _add(p, 1, (MAIN, HOT), 10)
    _add(p, 1, (MAIN, COLD), 10, state="idle")
    quiet = LiveTable(p).advance(1.0)
    assert quiet.idle_left_out == 1 and set(_by_name(quiet.rows())) == {"<module>", "hot"}
    everything = LiveTable(p, include_idle=True).advance(1.0)
    assert everything.idle_left_out == 0 and _by_name(everything.rows())["cold"].own == pytest.approx(50.0)


def test_empty_stacks_count_in_the_total_weight_only():
    p = Profile({"mode": "cpu", "rate_hz": 100})
    table = LiveTable(p)
    _add(p, 1, (), 10)
    _add(p, 1, (MAIN, HOT), 10)
    rows = _by_name(table.advance(1.0).rows())
    assert rows["hot"].own == pytest.approx(50.0)


def test_text_snapshot_has_one_header_line_columns_and_rows_sorted_by_window_then_cumulative():
    p = Profile({"mode": "cpu", "rate_hz": 1000, "engine": "native-cpu",
                 "sampler_stats": {"achieved_rate_hz": 990.0, "dropped": 3, "partial": {"fault": 2}}})
    table = LiveTable(p)
    _add(p, 1, (MAIN, COLD), 10)
    table.advance(1.0)
    _add(p, 1, (MAIN, HOT), 30)
    snap = table.advance(2.0)
    text = render_snapshot(snap, p.meta, 97.4, rows=10)
    header, columns, *rows = text.rstrip("\n").splitlines()
    assert text.endswith("\n\n")
    assert header.startswith("truestack top: 2.0 s, window 1.00 s, cpu mode, rate 1 kHz requested, 990 Hz achieved")
    for fact in ("samples 2 (window 1)", "dropped 3", "partial 2", "threads 1 (1 active)", "program CPU 97%"):
        assert fact in header
    assert columns.split() == ["OWN%", "TOTAL%", "CUM-OWN%", "CUM-TOT%", "FUNCTION", "FILE:LINE"]
    # hot leads the window; cold (absent from the window) comes after <module>, by its cumulative share.
    assert [r.split()[4] for r in rows] == ["hot", "<module>", "cold"]
    assert rows[0].split() == ["100.0", "100.0", "75.0", "75.0", "hot", "app/main.py:4"]
    assert rows[2].split() == ["0.0", "0.0", "25.0", "25.0", "cold", "lib/util.py:8"]
    assert render_snapshot(snap, p.meta, None, rows=1).count("\n") == 4  # header, columns, one row, blank
    assert "program CPU ?" in render_snapshot(snap, p.meta, None)


def test_rows_are_cut_to_the_width_keeping_the_location():
    p = Profile({"mode": "cpu", "rate_hz": 100})
    table = LiveTable(p)
    long = Frame("a_function_with_a_very_long_name_" + "x" * 60, "/app/main.py", 3, 2)
    _add(p, 1, (long,), 10)
    out = table_lines(lines(table.advance(1.0)), width=60)
    assert len(out[1]) <= 60 and out[1].endswith("app/main.py:2") and "…" in out[1]
