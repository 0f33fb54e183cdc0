"""The SVG flame graph in a real headless Chromium: frames render, hover shows details, click zooms, reset.

Same browser set-up (and CI=true rule) as test_flamegraph_browser.py, whose
fixture and demo profile this reuses.
"""
from __future__ import annotations

import pytest
from test_flamegraph_browser import NASTY, browser, demo_profile  # noqa: F401 (browser is a fixture)

from truestack.exporters import svg


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):  # noqa: F811 (the imported fixture)
    path = tmp_path_factory.mktemp("svg") / "demo.svg"
    path.write_bytes(svg.export(demo_profile()))
    pg = browser.new_page(viewport={"width": 1300, "height": 400})
    errors: list[str] = []
    requests: list[str] = []
    pg.on("console", lambda m: m.type in ("error", "warning") and errors.append(f"{m.type}: {m.text}"))
    pg.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    pg.on("request", lambda r: requests.append(r.url))
    pg.goto(path.resolve().as_uri())
    pg.wait_for_function("window.truestackSvg && truestackSvg.ready")
    yield pg, errors, requests, path.resolve().as_uri()
    pg.close()


def rect(pg, label: str) -> dict:
    """The on-screen box of the first frame labelled `label` (data-n)."""
    box = pg.evaluate(
        """n => { const g = [...document.querySelectorAll('g.f')].find(e => e.getAttribute('data-n') === n);
                  if (!g) return null;
                  const r = g.querySelector('rect'), b = r.getBoundingClientRect();
                  return {x: +r.getAttribute('x'), w: +r.getAttribute('width'), hidden: g.classList.contains('hide'),
                          left: b.left, top: b.top, width: b.width, height: b.height}; }""",
        label,
    )
    assert box is not None, label
    return box


def test_frames_render_without_errors_or_requests(page):
    pg, errors, requests, url = page
    assert pg.locator("g.f rect").count() > 8
    assert pg.locator("g.f rect").first.bounding_box()["width"] > 1000  # the root spans the graph
    assert not errors, errors
    assert requests == [url]  # nothing fetched but the file itself
    assert not pg.evaluate("window.pwned === 1")  # the nasty name is text, not script
    assert pg.locator("g.f title", has_text=NASTY[:20]).count() == 1


def test_hover_shows_details(page):
    pg, *_ = page
    box = rect(pg, "compute (demo.py:10)")
    pg.mouse.move(box["left"] + min(box["width"] / 2, 40), box["top"] + box["height"] / 2)
    details = pg.locator("#details").text_content()
    assert details.startswith("compute (/app/demo.py:10) | ") and "samples" in details and "%" in details


def test_click_zooms_and_reset_restores(page):
    pg, *_ = page
    full = svg.WIDTH - 2 * svg.PAD
    before = rect(pg, "render (render.py:30)")
    assert before["w"] < full * 0.5
    assert pg.locator("#unzoom").is_hidden()
    pg.mouse.click(before["left"] + min(before["width"] / 2, 40), before["top"] + before["height"] / 2)
    after = rect(pg, "render (render.py:30)")
    assert abs(after["w"] - full) < 0.05 and abs(after["x"] - svg.PAD) < 0.05  # the clicked frame fills the width
    assert rect(pg, "compute (demo.py:10)")["hidden"]  # a frame outside the zoomed one
    assert abs(rect(pg, "main (demo.py:5)")["w"] - full) < 0.05  # an ancestor spans the width too
    text = pg.evaluate("[...document.querySelectorAll('g.f')].find(g => g.getAttribute('data-n') === "
                       "'render (render.py:30)').querySelector('text').textContent")
    assert text == "render (render.py:30)"
    pg.locator("#unzoom").click()
    restored = rect(pg, "render (render.py:30)")
    assert abs(restored["w"] - before["w"]) < 0.05 and not rect(pg, "compute (demo.py:10)")["hidden"]
    assert pg.locator("#unzoom").is_hidden()
