"""`top`'s full-screen view without a terminal: a fake curses window records what is drawn."""
from __future__ import annotations

import curses
import os

from truestack.model import Profile
from truestack.recording.screen import ScreenView
from truestack.samples import Frame, Sample

MAIN = Frame("<module>", "/app/main.py", 1, 1)
HOT = Frame("zulu_hot", "/app/main.py", 5, 4)
COLD = Frame("alpha_cold", "/app/main.py", 9, 8)


class FakeWindow:
    def __init__(self, keys: list[int], size: tuple[int, int] = (20, 100)) -> None:
        self.keys = keys
        self.size = size
        self.lines: dict[int, str] = {}
        self.cleared = 0

    def getch(self) -> int:
        return self.keys.pop(0) if self.keys else -1

    def getmaxyx(self) -> tuple[int, int]:
        return self.size

    def clear(self) -> None:
        self.cleared += 1
        self.lines = {}

    def erase(self) -> None:
        self.lines = {}

    def addnstr(self, y: int, x: int, text: str, n: int, attr: int = 0) -> None:
        if y >= self.size[0]:
            raise curses.error("outside the window")
        self.lines[y] = text[:n]

    def refresh(self) -> None:
        pass

    def text(self) -> str:
        return "\n".join(self.lines[y] for y in sorted(self.lines))


def _view(keys: list[int]) -> tuple[ScreenView, FakeWindow, Profile]:
    profile = Profile({"mode": "cpu", "rate_hz": 100})
    for _ in range(3):
        profile.add_sample(Sample(1, "MainThread", 0, 10_000_000, (MAIN, HOT)))
    profile.add_sample(Sample(1, "MainThread", 0, 10_000_000, (MAIN, COLD)))
    profile.add_sample(Sample(2, "worker", 0, 10_000_000, (COLD,)))
    view = ScreenView(1.0, "own", False, "app.py --fast")
    view.refresher.open(profile, os.getpid(), 0.0)
    window = FakeWindow(keys)
    view.screen = window
    return view, window, profile


def _order(window: FakeWindow) -> list[str]:
    names = ("zulu_hot", "alpha_cold")
    return [n for line in window.text().splitlines() for n in names if f" {n} " in line]


def test_refresh_draws_header_and_rows_then_keys_resort_filter_pause_and_quit():
    view, window, profile = _view([])
    view._draw(full=True)  # what open() draws once curses is on
    assert view.step(0.5) is False and "waiting for the first samples" in window.text()
    assert view.step(1.0) is False
    text = window.text()
    assert text.splitlines()[0] == "truestack top — app.py --fast"
    assert "samples 5 (window 5)" in text and "threads 2 (2 active)" in text and "sort: own" in text
    assert _order(window) == ["zulu_hot", "alpha_cold"]  # hot 60 % of the weight, cold 40 %
    window.keys = [ord("n")]
    view.step(1.1)
    assert "sort: name" in window.text() and _order(window) == ["alpha_cold", "zulu_hot"]
    window.keys = [ord("f")]
    view.step(1.2)
    assert "thread: MainThread (1)" in window.text() and _order(window) == ["alpha_cold", "zulu_hot"]
    window.keys = [ord("o")]
    view.step(1.3)
    assert _order(window) == ["zulu_hot", "alpha_cold"]  # MainThread only: hot 75 %, cold 25 %
    window.keys = [ord("f"), ord("f")]
    view.step(1.4)
    assert "thread: all" in window.text()
    window.keys = [ord("w")]
    view.step(1.5)
    assert "since start" in window.text()
    # Paused: new samples are counted but not shown until unpaused.
    window.keys = [ord("p")]
    view.step(1.6)
    assert "PAUSED" in window.text()
    for _ in range(10):
        profile.add_sample(Sample(1, "MainThread", 0, 10_000_000, (MAIN, HOT)))
    view.step(2.0)
    assert "samples 5 (window 5)" in window.text()
    window.keys = [ord("p")]
    view.step(2.1)
    view.step(3.0)
    assert "PAUSED" not in window.text() and "samples 15" in window.text()
    cleared = window.cleared
    window.keys = [curses.KEY_RESIZE]
    window.size = (16, 40)  # narrower: every line cut to fit
    try:
        view.step(3.1)
    finally:
        view.screen = None  # no real terminal to give back
    assert window.cleared == cleared + 1 and all(len(line) < 40 for line in window.text().splitlines())
    assert max(window.lines) == 15  # the key help on the last line
    assert [line.rsplit(" ", 1)[-1] for line in window.text().splitlines() if "_hot" in line or "_cold" in line] == [
        "app/main.py:4", "app/main.py:8"]  # the locations kept whole
    view.screen = window
    window.keys = [ord("x"), ord("q")]
    assert view.step(3.2) is True and "stopping the program" in window.text()
    view.screen = None
