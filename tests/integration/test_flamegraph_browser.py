"""The flame graph page in a real headless Chromium: loads cleanly, zooms, searches, switches threads, scales.

Chromium and playwright are required when CI=true (the tests fail without
them); elsewhere they are skipped with the reason when either is missing.
"""
from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

import pytest

from truestack.exporters import flamegraph
from truestack.model import Profile
from truestack.samples import Frame, Sample, SamplerStats

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
HIGHLIGHT = (224, 64, 160)  # the search highlight colour, #e040a0
NASTY = "Weird.name</script><script>window.pwned=1</script>"


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (required when CI=true)")
    pytest.skip(reason)


def _chromium_path() -> str | None:
    for candidate in (os.environ.get("TRUESTACK_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright Python package is not installed")
    path = _chromium_path()
    if path is None:
        _missing("no chromium executable found (install Debian's chromium or set TRUESTACK_CHROMIUM)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


class Page:
    """One opened flame graph, with the console errors and requests it produced."""

    def __init__(self, browser, html_path: Path, width: int = 1200, height: int = 760) -> None:
        # The page's own CSP forbids eval, which playwright's wait_for_function needs.
        self.page = browser.new_page(viewport={"width": width, "height": height}, bypass_csp=True)
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: m.type in ("error", "warning") and self.errors.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = html_path.resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_function("window.truestackFlame && window.truestackFlame.ready", timeout=120_000)

    def settle(self, condition: str) -> None:
        """Wait until `condition` (JS) holds and the canvas has been redrawn for it."""
        self.page.wait_for_function(f"({condition}) && !truestackFlame.state().redrawPending")

    def state(self) -> dict:
        return self.page.evaluate("truestackFlame.state()")

    def box(self, name: str) -> dict | None:
        return self.page.evaluate("n => truestackFlame.boxOf(n)", name)

    def pixel(self, x: float, y: float) -> tuple[int, int, int]:
        """Colour of the canvas at client coordinates."""
        return tuple(self.page.evaluate("""([x, y]) => {
            const c = document.getElementById('ts-canvas'), r = c.getBoundingClientRect(), k = c.width / r.width;
            return Array.from(c.getContext('2d').getImageData(Math.floor((x - r.left) * k), Math.floor((y - r.top) * k), 1, 1).data.slice(0, 3));
        }""", [x, y]))

    def click_box(self, name: str) -> dict:
        box = self.box(name)
        assert box is not None, f"{name} is not drawn"
        self.page.mouse.click(box["x"] + min(box["w"] / 2, 40), box["y"] + box["h"] / 2)
        self.settle("true")
        return box

    def close(self) -> None:
        self.page.close()


def frame(name: str, line: int, file: str = "/app/demo.py") -> Frame:
    return Frame(name, file, line, line)


def demo_profile() -> Profile:
    """Two threads; `only_in_worker` appears in the worker only, `parse` under two different parents."""
    p = Profile({"command": ["python", "demo.py"], "engine": "native-cpu", "mode": "cpu", "rate_hz": 1000,
                 "sampler_stats": {"requested_rate_hz": 1000, "achieved_rate_hz": 990, "samples": 1000,
                                   "dropped": 0, "partial": {}, "biased": False}})
    mod, main = frame("<module>", 1), frame("main", 5)
    compute, parse, render = frame("compute", 10), frame("parse", 20), frame("render", 30, "/app/render.py")
    rnd = random.Random(3)
    for i in range(1000):
        r = rnd.random()
        if i % 4 == 0:
            tid, name = 2, "worker"
            stack = (mod, frame("worker_loop", 50), frame("only_in_worker", 55))
        else:
            tid, name = 1, "MainThread"
            stack = ((mod, main, compute) if r < 0.5 else (mod, main, compute, parse) if r < 0.7
                     else (mod, main, render, parse) if r < 0.9 else (mod, main, render, frame(NASTY, 40)))
        p.add_sample(Sample(tid, name, i * 1_000_000, 1_000_000 + (i % 3) * 100_000, stack))
    return p


def weight_share(p: Profile, name: str) -> float:
    """Percentage of all weight in samples whose stack contains the function `name` (each sample once)."""
    hit = total = 0
    for row in p.iter_samples():
        total += row.weight_ns
        if any(p.func_name(p.frame_func(f)) == name for f in p.stack_frames(row.stack)):
            hit += row.weight_ns
    return 100 * hit / total


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    p = demo_profile()
    path = tmp_path_factory.mktemp("flame") / "demo.html"
    path.write_bytes(flamegraph.export(p))
    return p, path


@pytest.fixture
def page(browser, demo):
    pg = Page(browser, demo[1])
    yield pg
    pg.close()


def test_loads_without_errors_or_network(page, demo) -> None:
    p, _path = demo
    state = page.state()
    assert page.errors == []
    assert page.requests == [page.url], "the page must not fetch anything"
    assert state["totalSamples"] == p.sample_count
    assert state["totalWeight"] == p.total_weight_ns
    assert state["boxes"] > 5
    assert page.page.evaluate("window.pwned") is None, "a function name must not run as script"
    assert page.page.locator("#ts-command").inner_text() == "python demo.py"
    assert page.page.locator(".ts-biased").count() == 0


def test_click_zooms_and_reset_restores(page) -> None:
    full = page.box("compute")
    before = page.state()
    assert before["zoom"] == 0 and full["w"] < 0.9 * page.box("main")["w"]
    page.click_box("compute")
    after = page.state()
    assert after["zoomName"] == "compute"
    assert after["zoomValue"] < after["total"]
    assert page.page.locator("#ts-zoom-label").inner_text() == "compute"
    zoomed = page.box("compute")
    canvas_width = page.page.evaluate("document.getElementById('ts-canvas').getBoundingClientRect().width")
    assert zoomed["w"] == pytest.approx(canvas_width, abs=1), "the zoomed frame fills the width"
    assert zoomed["w"] > 1.5 * full["w"]
    # frames outside the zoomed subtree are gone
    assert page.box("render") is None
    page.page.click("#ts-reset")
    page.settle("truestackFlame.state().zoom === 0")
    assert page.box("render") is not None
    assert abs(page.box("compute")["w"] - full["w"]) < 1


def test_tooltip_shows_function_location_and_percentages(page, demo) -> None:
    box = page.box("render")
    page.page.mouse.move(box["x"] + 5, box["y"] + 5)
    tip = page.page.locator("#ts-tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "render" in text and "/app/render.py:30" in text
    assert "of total" in text and "of parent" in text
    assert f"{weight_share(demo[0], 'render'):.2f}%" in text


def test_search_highlights_and_reports_matched_share(page, demo) -> None:
    page.page.fill("#ts-search", "parse")
    page.settle("truestackFlame.state().matchPct !== null")
    state = page.state()
    expected = weight_share(demo[0], "parse")
    assert state["matchPct"] == pytest.approx(expected, abs=1e-6)
    assert state["matchedBoxes"] >= 2, "parse is drawn under compute and under render"
    assert f"{expected:.2f}%" in page.page.locator("#ts-match").inner_text()
    box = page.box("parse")
    assert page.pixel(box["x"] + box["w"] / 2, box["y"] + box["h"] / 2) == HIGHLIGHT
    compute = page.box("compute")
    assert page.pixel(compute["x"] + compute["w"] / 2, compute["y"] + 2) != HIGHLIGHT
    page.page.fill("#ts-search", "")
    page.settle("truestackFlame.state().matchPct === null")
    assert page.pixel(box["x"] + box["w"] / 2, box["y"] + box["h"] / 2) != HIGHLIGHT


def test_thread_switching(page, demo) -> None:
    p = demo[0]
    assert page.box("only_in_worker") is not None
    page.page.select_option("#ts-thread", "1")
    page.settle("truestackFlame.state().thread === '1'")
    state = page.state()
    assert state["totalSamples"] == len(p.threads[1])
    assert state["totalWeight"] == sum(p.threads[1].weight_ns)
    assert page.box("only_in_worker") is None and page.box("compute") is not None
    page.page.select_option("#ts-thread", "2")
    page.settle("truestackFlame.state().thread === '2'")
    assert page.state()["totalSamples"] == len(p.threads[2])
    assert page.box("compute") is None and page.box("only_in_worker") is not None
    page.page.select_option("#ts-thread", "all")
    page.settle("truestackFlame.state().thread === 'all'")
    assert page.state()["totalSamples"] == p.sample_count
    assert page.errors == []


def test_hostile_function_name_is_shown_as_text(page) -> None:
    box = page.box(NASTY)
    assert box is not None
    page.page.mouse.move(box["x"] + 3, box["y"] + 5)
    page.page.locator("#ts-tip").wait_for(state="visible")
    assert NASTY in page.page.locator("#ts-tip .n").inner_text()
    assert page.page.evaluate("window.pwned") is None


def test_biased_warning_is_visible(browser, tmp_path) -> None:
    p = demo_profile()
    p.meta.engine = "safepoint"
    p.meta.sampler_stats = SamplerStats(engine="safepoint", mode="cpu", requested_rate_hz=100, biased=True)
    path = tmp_path / "biased.html"
    path.write_bytes(flamegraph.export(p))
    pg = Page(browser, path)
    try:
        warning = pg.page.locator(".ts-biased")
        assert warning.is_visible() and "biased" in warning.inner_text().lower()
        assert pg.errors == []
    finally:
        pg.close()


def test_empty_profile_loads(browser, tmp_path) -> None:
    path = tmp_path / "empty.html"
    path.write_bytes(flamegraph.export(Profile({"command": ["python", "nothing.py"]})))
    pg = Page(browser, path)
    try:
        assert pg.errors == [] and pg.state()["totalSamples"] == 0
    finally:
        pg.close()


def big_profile(n_nodes: int = 100_000, seed: int = 11) -> Profile:
    """A call tree of exactly n_nodes distinct stacks over two threads, one sample per stack."""
    rnd = random.Random(seed)
    p = Profile({"command": ["python", "big.py"], "engine": "native-cpu", "mode": "cpu", "rate_hz": 1000})
    frames = [p.intern_frame(frame(f"pkg{i % 40}.fn_{i}", 10 + i % 300, f"/src/pkg{i % 40}.py")) for i in range(4000)]
    stacks: list[int] = []
    while len(stacks) < n_nodes:
        # a skewed parent choice makes some subtrees wide and others deep, like real programs
        parent = -1 if len(stacks) < 8 else stacks[int(len(stacks) * rnd.random() ** 0.5)]
        before = len(p.stacks)
        stack = p.stacks.intern(parent, frames[rnd.randrange(len(frames))])
        if len(p.stacks) > before:
            stacks.append(stack)
    threads = [p.thread(1, "MainThread"), p.thread(2, "worker")]
    for k, stack in enumerate(stacks):
        p.append(threads[k % 2], k * 1000, stack, 1_000_000 + (k % 5) * 10_000)
    return p


def test_100k_node_tree_renders_fast_enough(browser, tmp_path) -> None:
    p = big_profile()
    assert len(p.stacks) == 100_000
    path = tmp_path / "big.html"
    path.write_bytes(flamegraph.export(p))
    start = time.monotonic()
    pg = Page(browser, path, width=1400, height=900)
    try:
        load_s = time.monotonic() - start
        state = pg.state()
        assert pg.page.evaluate("truestackFlame.nodes") == 100_000
        assert state["totalSamples"] == 100_000
        # drawing is bounded by the screen, not the tree: far fewer boxes than nodes
        assert 50 < state["boxes"] < 20_000
        assert load_s < 60, f"100k-node page took {load_s:.1f}s to become ready"
        # interaction still works at this size
        pg.page.select_option("#ts-thread", "2")
        pg.settle("truestackFlame.state().thread === '2'")
        assert pg.state()["totalSamples"] == 50_000
        # click the widest frame two levels down and check the view zoomed into it
        target = max((b for b in pg.page.evaluate("truestackFlame.drawn()") if b["row"] == 2), key=lambda b: b["w"])
        pg.page.mouse.click(target["x"] + target["w"] / 2, target["y"] + target["h"] / 2)
        zoomed = pg.state()
        assert zoomed["zoom"] == target["node"] and zoomed["zoomName"] == target["name"]
        assert zoomed["zoomValue"] < zoomed["total"]
        pg.page.fill("#ts-search", "fn_12")
        pg.settle("truestackFlame.state().matchPct !== null")
        assert 0 < pg.state()["matchPct"] < 100
        assert pg.errors == []
    finally:
        pg.close()
