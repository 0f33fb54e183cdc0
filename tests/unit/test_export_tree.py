"""The terminal call tree (`-f tree`, `truestack report`'s default view)."""
from __future__ import annotations

import re

from profile_factory import INTERVAL_NS, RATE_HZ, expected_total_count, make_profile

from truestack.exporters import export, format_for_path
from truestack.exporters.tree import TreeOptions, is_library_path, render, render_tree
from truestack.model import Profile
from truestack.samples import Frame, Sample

LINE = re.compile(r"^([│├└─ ]*)(\d+\.\d)%  self (\d+\.\d)%  (\d+\.\d{3}) s  (.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def parsed(text: str) -> list[tuple[int, float, float, float, str]]:
    """(depth, total %, self %, seconds, label) per tree line."""
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        assert m, line
        out.append((len(m.group(1)) // 3, float(m.group(2)), float(m.group(3)), float(m.group(4)), m.group(5)))
    return out


def test_threads_frames_and_percentages():
    rows = parsed(render_tree(make_profile(), TreeOptions(min_percent=0)))
    total = expected_total_count()
    by_label: dict[str, tuple] = {}
    for r in rows:
        by_label.setdefault(r[4], r)  # the first (main thread's) of a repeated label
    main = by_label["thread MainThread (1)"]
    assert main[0] == 0 and abs(main[1] - 100 * 9 / total) < 0.06
    fib = by_label["fib  math_utils.py:5"]  # under run line 10: 1 + 0.2 (counts once) + 2 + 1 samples
    assert fib[0] == 3 and abs(fib[1] - 100 * 5 / total) < 0.06 and abs(fib[2] - 100 * 2 / total) < 0.06
    assert abs(fib[3] - 0.042) < 1e-9  # times are the samples' weights
    assert by_label["time.sleep"][2] == by_label["time.sleep"][1]  # a leaf: all self
    assert "weird;name split  odd file.py:7" in by_label and "Über.naïve_λ  ünï.py:2" in by_label
    assert "(no frames)" in by_label
    # top-level nodes add up to everything; self percentages too
    assert abs(sum(r[1] for r in rows if r[0] == 0) - 100) < 0.1
    assert abs(sum(r[2] for r in rows) - 100) < 0.5


def test_children_sorted_by_total_and_tree_drawing():
    text = render_tree(make_profile(), TreeOptions(min_percent=0))
    rows = parsed(text)
    for i, (depth, pct, *_rest) in enumerate(rows):
        later = rows[i + 1 :]
        end = next((j for j, r in enumerate(later) if r[0] < depth), len(later))
        younger_siblings = [r[1] for r in later[:end] if r[0] == depth]
        assert all(s <= pct for s in younger_siblings), (rows[i], younger_siblings)
    assert "└─ " in text and "├─ " in text and "│  " in text


def test_min_percent_hides_small_nodes():
    full = render_tree(make_profile(), TreeOptions(min_percent=0))
    small = render_tree(make_profile(), TreeOptions(min_percent=10))
    assert "odd file.py" in full and "ünï.py" in full  # 1 of 15 samples each: 6.7 %
    assert "odd file.py" not in small and "ünï.py" not in small
    assert all(r[1] >= 10 for r in parsed(small))
    assert "run  main.py:12" in small  # 13.3 %


def test_limit_caps_children():
    text = render_tree(make_profile(), TreeOptions(min_percent=0, limit=1))
    assert "… 1 more (" in text
    assert "Worker.loop" in text and "time.sleep" in text and "fib  math_utils.py:5\n" not in text.split("Worker")[1]


def lib_profile() -> Profile:
    user = Frame("main", "/home/me/app.py", 3, 1)
    lib1 = Frame("Session.get", "/venv/lib/python3.12/site-packages/requests/api.py", 70, 60)
    lib2 = Frame("urlopen", "/usr/lib/python3/dist-packages/urllib3/pool.py", 9, 1)
    callback = Frame("on_chunk", "/home/me/app.py", 30, 29)
    profile = Profile({"rate_hz": RATE_HZ, "mode": "cpu"})
    t = 0
    for frames in [(user, lib1, lib2)] * 3 + [(user, lib1, lib2, callback)] * 2 + [(user, lib1, callback)] * 2:
        t += INTERVAL_NS
        profile.add_sample(Sample(1, "MainThread", t, INTERVAL_NS, frames))
    return profile


def test_library_frames_fold_into_their_caller():
    text = render_tree(lib_profile())
    assert "requests" not in text and "urlopen" not in text
    rows = {r[4].split("  [")[0]: r for r in parsed(text)}
    assert abs(rows["main  app.py:3"][2] - 100 * 3 / 7) < 0.06  # the library's own time is main's self time
    assert abs(rows["on_chunk  app.py:30"][1] - 100 * 4 / 7) < 0.06  # two routes to the callback merged
    assert rows["on_chunk  app.py:30"][0] == 1
    assert "library frames]" in text
    shown = render_tree(lib_profile(), TreeOptions(show_all=True))
    assert "Session.get  api.py:70" in shown and "urlopen  pool.py:9" in shown


def test_library_paths():
    assert is_library_path("/usr/lib/python3.11/json/encoder.py")
    assert is_library_path("/x/lib/python3.13t/site-packages/y.py")
    assert is_library_path("C:\\Py\\Lib\\site-packages\\y.py")
    assert is_library_path("<frozen importlib._bootstrap>")
    assert not is_library_path("/home/me/project/lib/util.py") and not is_library_path("")


def test_plain_unless_asked_for_colour():
    plain = export(make_profile(), "tree").decode()
    assert "\x1b[" not in plain
    assert plain.startswith("truestack: ") and "\n\n" in plain  # the summary header, then the tree
    coloured = render(make_profile(), TreeOptions(color=True))
    assert "\x1b[" in coloured and ANSI.sub("", coloured) == plain


def test_registered_with_its_own_extension():
    assert format_for_path("x.tree.txt") == "tree" and format_for_path("x.txt") == "table"


def test_empty():
    assert render_tree(Profile()) == "(no samples)\n"
