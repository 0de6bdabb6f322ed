"""The written leaderboard.html in a real browser (Debian's Chromium, headless, via Playwright):
it renders its table and frontier chart from the file alone and requests nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autocad_bench.dashboard.leaderboard_page import render_leaderboard_html
from autocad_bench.metrics import build_leaderboard, read_run
from tests.dashboard.builders import SCRIPT_MODEL, leaderboard_runs

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

if not CHROMIUM.exists():  # CI installs it (.ci/run); a developer machine may not have it
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")


def box(locator: Any) -> dict[str, float]:
    found = locator.bounding_box()
    assert found is not None, "not rendered"
    assert found["width"] > 0 and found["height"] > 0, found
    return dict(found)


def test_leaderboard_file_renders_offline(tmp_path: Path) -> None:
    board = build_leaderboard([read_run(d) for d in leaderboard_runs(tmp_path / "runs")])
    out = tmp_path / "leaderboard.html"
    out.write_text(render_leaderboard_html(board), encoding="utf-8")
    page_url = out.resolve().as_uri()
    requests: list[str] = []
    refused: list[str] = []
    errors: list[str] = []

    def guard(route: Any) -> None:
        if route.request.url == page_url:
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = chromium.new_context(viewport={"width": 1500, "height": 1000})
            context.route("**/*", guard)
            page = context.new_page()
            page.on("request", lambda request: requests.append(request.url))
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(page_url, wait_until="load")

            rows = page.locator("#leaderboard tbody tr.model-row")
            assert rows.count() == len(board.rows) == 5
            for i, row in enumerate(board.rows):
                tr = rows.nth(i)
                assert tr.get_attribute("data-row-id") == row.row_id
                assert tr.locator("td.mean-score .est-text").inner_text() == row.metrics.mean_score.text()
                box(tr.locator("td.mean-score svg.ci"))
            # The model named like a script tag is shown as text, and nothing ran.
            assert page.locator("tr.model-row.wide .row-id", has_text=SCRIPT_MODEL).count() == 1
            assert page.evaluate("document.scripts.length") == 0
            whiskers = page.locator("#leaderboard svg.ci g.ci-whisker")
            assert whiskers.count() > 10
            box(whiskers.first)

            chart = page.locator("#lb-frontier svg.frontier")
            chart.scroll_into_view_if_needed()
            chart_box = box(chart)
            assert chart_box["width"] >= 400
            pareto = page.locator("#lb-frontier g.point.pareto")
            assert pareto.count() == sum(r.pareto for r in board.rows) == 3
            for i in range(pareto.count()):
                marker = box(pareto.nth(i).locator(".marker"))
                assert chart_box["x"] <= marker["x"] <= chart_box["x"] + chart_box["width"]
            assert page.locator("#lb-frontier g.point").count() == len(board.rows)
            assert page.locator("#lb-frontier path.frontier-line").count() == 2
            box(page.locator("#lb-frontier path.frontier-line").first)

            shots = tmp_path / "screenshots"
            shots.mkdir()
            page.screenshot(path=str(shots / "leaderboard.png"), full_page=True)
            chart.screenshot(path=str(shots / "frontier.png"))
        finally:
            chromium.close()
    assert requests == [page_url], requests
    assert refused == [] and errors == []
    assert (tmp_path / "screenshots" / "leaderboard.png").stat().st_size > 10_000
