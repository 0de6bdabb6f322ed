"""The leaderboard page: the self-contained file, the dashboard's /leaderboard and the
per-model metrics of the batch page, all rendering what :mod:`autocad_bench.metrics` returns."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from autocad_bench.dashboard.app import create_app
from autocad_bench.dashboard.leaderboard_page import render_leaderboard_html
from autocad_bench.dashboard.templating import DASH, duration, usd, when
from autocad_bench.metrics import Estimate, Leaderboard, build_leaderboard, model_rows, read_run
from tests.dashboard.builders import SCRIPT_MODEL, leaderboard_runs
from tests.dashboard.dom import Node, parse

SVG_NS = 'xmlns="http://www.w3.org/2000/svg"'


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return leaderboard_runs(tmp_path_factory.mktemp("leaderboard") / "runs")


@pytest.fixture(scope="module")
def board(runs: list[Path]) -> Leaderboard:
    return build_leaderboard([read_run(d) for d in runs])


def check_estimate(cell: Node, estimate: Estimate, *, percent: bool) -> None:
    """The cell shows the estimate as "value [low, high]", carries the exact numbers, draws
    the interval, and is marked when wide."""
    est = cell.one("span", "est")
    assert est.one("span", "est-text").text() == estimate.text(percent=percent)
    for name in ("value", "low", "high"):
        number = getattr(estimate, name)
        assert est.attrs[f"data-{name}"] == ("" if number is None else str(number))
    bars = est.select("svg", "ci")
    if estimate.value is None:
        assert not bars
        return
    assert len(bars) == 1
    whiskers = bars[0].select("g", "ci-whisker")
    assert len(whiskers) == (estimate.low is not None and estimate.high is not None)
    marked = estimate.wide
    assert ("wide" in est.classes) == marked and ("wide" in bars[0].classes) == marked
    assert bool(est.select("span", "badge")) == marked


def model_rows_of(page: Node) -> list[Node]:
    return page.one("table", id="leaderboard").select("tr", "model-row")


def test_page_shows_every_row_with_the_leaderboard_values(board: Leaderboard) -> None:
    html = render_leaderboard_html(board)
    page = parse(html)
    rows = model_rows_of(page)
    assert [r.attrs["data-row-id"] for r in rows] == [r.row_id for r in board.rows]
    assert len(board.rows) == 5
    skills = sorted({s for r in board.rows for s in r.by_skill})
    assert skills == ["circles", "lines"]
    assert [th.attrs["data-skill"] for th in page.select("th", "skill")] == skills
    for tr, row in zip(rows, board.rows, strict=True):
        m = row.metrics
        assert tr.one("b", "row-id").text() == row.row_id
        check_estimate(tr.one("td", "mean-score"), m.mean_score, percent=False)
        check_estimate(tr.one("td", "pass-at-1"), m.pass_at_1, percent=True)
        check_estimate(tr.one("td", "pass-at-k"), m.pass_at_k, percent=True)
        assert tr.one("td", "pass-at-k").one("span", "k").text() == f"k={m.k}"
        check_estimate(tr.one("td", "pass-hat-k"), m.pass_hat_k, percent=True)
        for budget in m.success_within:
            cell = tr.one("td", f"within-{budget.budget}")
            span = cell.one("span", "budget")
            assert span.attrs["data-mode"] == budget.mode
            if budget.mode == "unavailable":
                assert cell.text().strip() == "n/a" and not cell.select("svg")
            else:
                check_estimate(cell, budget.estimate, percent=True)
                assert bool(cell.select("span", "ge")) == (budget.mode == "lower_bound")
        assert tr.one("td", "cost-per-task").text() == usd(m.cost_per_task_usd)
        cells = [td.text() for td in tr.select("td")]
        for expected in (f"{m.tokens:,}", usd(m.token_cost_usd), usd(m.infrastructure_cost_usd),
                         usd(m.cost_per_solved_usd), duration(m.wall_seconds_per_task)):
            assert expected in cells, (row.row_id, expected)
        for failure, count in m.failure_classes.items():
            assert f"{failure} {count}" in tr.text()
        for skill in skills:
            cell = tr.one("td", "skill", data_skill=skill)
            if skill in row.by_skill:
                check_estimate(cell, row.by_skill[skill].mean_score, percent=False)
            else:
                assert cell.text().strip() == DASH
        assert [li.text() for li in tr.select("li", "flag")] == row.flags
        assert ("wide" in tr.classes) == m.wide
        assert bool(tr.one("td", "model").select("span", "wide")) == m.wide
        assert bool(tr.one("td", "model").select("span", "pareto")) == row.pareto
    assert any(b.mode == "lower_bound" for r in board.rows for b in r.metrics.success_within)
    assert any(b.mode == "unavailable" for r in board.rows for b in r.metrics.success_within)


def test_header_runs_notes_and_marks(board: Leaderboard) -> None:
    page = parse(render_leaderboard_html(board))
    assert page.one(id="lb-generated").text() == when(board.generated_at)
    assert page.one(id="lb-version").text() == board.tool_version
    assert page.one(id="lb-confidence").text() == "95%"
    assert page.one(id="lb-threshold").text() == "0.2"
    assert board.interval_method in page.one(id="lb-method").text()
    runs = page.one("table", id="lb-runs").select("tr", "run-row")
    assert [r.attrs["data-run"] for r in runs] == ["alpha-id", "beta-id", "gamma-id"]
    cells = [td.text() for td in runs[2].select("td")]
    assert cells[3:8] == ["core", "eval-1", "100", "5000", "1"]
    assert [td.text() for td in runs[0].select("td")][7] == "2"  # alpha ran 2 trials
    assert [li.text() for li in page.one("ul", id="lb-notes").select("li")] == board.notes
    assert board.notes and "scripted/strong ran under 2 different conditions" in board.notes[0]
    # A wide row is marked (class, badge) and a row with narrow intervals is not.
    by_id = {tr.attrs["data-row-id"]: tr for tr in model_rows_of(page)}
    script = by_id[f"scripted/{SCRIPT_MODEL}"]
    assert "wide" in script.classes and script.one("td", "model").select("span", "badge")
    assert any("wide" in b.classes for b in script.one("td", "model").select("span", "badge"))
    strong = by_id["scripted/strong [step_budget=50]"]
    assert "wide" not in strong.classes and not strong.one("td", "model").select("span", "wide")
    assert "pareto" in strong.classes


def test_frontier_chart_marks_the_pareto_rows(board: Leaderboard) -> None:
    page = parse(render_leaderboard_html(board))
    pareto = [r.row_id for r in board.rows if r.pareto]
    assert sorted(pareto) == ["scripted/cheap", "scripted/strong [step_budget=100]",
                              "scripted/strong [step_budget=50]"]
    rows = model_rows_of(page)
    assert [r.attrs["data-row-id"] for r in rows if r.attrs["data-pareto"] == "true"] == pareto
    assert all(bool(r.select("span", "pareto")) == (r.attrs["data-pareto"] == "true") for r in rows)
    chart = page.one(id="lb-frontier").one("svg", "frontier")
    points = chart.select("g", "point")
    assert sorted(p.attrs["data-label"] for p in points) == sorted(r.row_id for r in board.rows)
    assert sorted(p.attrs["data-label"] for p in points if "pareto" in p.classes) == sorted(pareto)
    # One step line per frontier (two step budgets: two groups), through the pareto points.
    lines = chart.select("path", "frontier-line")
    assert len(lines) == 2
    same_group = [r for r in board.rows if r.pareto and r.conditions.step_budget == 50]
    steps = re.findall(r"[MHV]", lines[0].attrs["d"])
    assert steps == ["M"] + ["H", "V"] * (len(same_group) - 1) + ["H"]
    # Vertical interval whiskers on every point that has an interval.
    with_interval = [r for r in board.rows if r.metrics.mean_score.low is not None]
    assert sum(bool(p.select("g", "ci-whisker")) for p in points) == len(with_interval)


def test_names_are_escaped_and_nothing_is_fetched(board: Leaderboard) -> None:
    html = render_leaderboard_html(board)
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(" in html
    page = parse(html)
    urls = [n.attrs[a] for n in page.iter() for a in ("src", "href", "action", "data") if a in n.attrs]
    assert all(u.startswith("data:") for u in urls), urls
    assert not re.search(r"https?:", html.replace(SVG_NS, "")), "a URL is referenced"
    assert not page.select("script") and not page.select("link", rel="stylesheet")
    assert not re.search(r"url\(|@import", html)


def test_no_rows_render() -> None:
    page = parse(render_leaderboard_html(build_leaderboard([])))
    assert not page.select("tr", "model-row") and "No model row yet" in page.text()


# --- the dashboard ------------------------------------------------------------------------------


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient[object, object]]:
    leaderboard_runs(tmp_path / "runs")
    async with TestClient(TestServer(create_app(tmp_path / "runs"), host="127.0.0.1")) as test_client:
        yield test_client


async def get_page(client: TestClient[object, object], path: str) -> Node:
    response = await client.get(path)
    assert response.status == 200, path
    return parse(await response.text())


async def test_leaderboard_route(client: TestClient[object, object], tmp_path: Path) -> None:
    root = tmp_path / "runs"
    board = build_leaderboard([read_run(root / name) for name in ("alpha", "beta", "gamma")])
    page = await get_page(client, "/leaderboard")
    rows = model_rows_of(page)
    assert [r.attrs["data-row-id"] for r in rows] == [r.row_id for r in board.rows]
    for tr, row in zip(rows, board.rows, strict=True):
        check_estimate(tr.one("td", "mean-score"), row.metrics.mean_score, percent=False)
        check_estimate(tr.one("td", "pass-at-1"), row.metrics.pass_at_1, percent=True)
    notes = [li.text() for li in page.one("ul", id="lb-notes").select("li")]
    assert any("1 batch directory under the root could not be read" in n and n.endswith(": broken")
               for n in notes), notes
    links = [a.attrs["href"] for a in page.one("table", id="lb-runs").select("a")]
    assert links == ["/batch?b=alpha", "/batch?b=beta", "/batch?b=gamma"]
    assert str(root / "alpha") not in json.dumps([n.attrs for n in page.iter()])
    assert len(page.one(id="lb-frontier").select("g", "pareto")) == 3
    assert page.one("body").attrs["data-fragment"] == "/fragment/leaderboard"
    fragment = await get_page(client, "/fragment/leaderboard")
    assert len(model_rows_of(fragment)) == len(board.rows)
    registry = await get_page(client, "/")
    assert registry.one("a", id="nav-leaderboard").attrs["href"] == "/leaderboard"
    # A rescored rollout shows up on the next request (the result is not kept stale).
    score = root / "beta" / "rollouts" / "beta-0000" / "evaluation" / "score.json"
    score.write_text(json.dumps({"score": 0.65, "passed": False}))
    page = await get_page(client, "/leaderboard")
    script = page.one("tr", "model-row", data_row_id=f"scripted/{SCRIPT_MODEL}")
    assert script.one("td", "mean-score").one("span", "est-text").text() == "0.650 [no interval]"


async def test_batch_page_shows_metric_rows_with_intervals(client: TestClient[object, object],
                                                           tmp_path: Path) -> None:
    rows, _ = model_rows([read_run(tmp_path / "runs" / "alpha")], breakdowns=False)
    page = await get_page(client, "/batch?b=alpha")
    table = page.one("table", id="models")
    shown = table.select("tr", "model-row")
    assert [tr.attrs["data-row-id"] for tr in shown] == [r.row_id for r in rows]
    for tr, row in zip(shown, rows, strict=True):
        check_estimate(tr.one("td", "mean-score"), row.metrics.mean_score, percent=False)
        check_estimate(tr.one("td", "pass-at-1"), row.metrics.pass_at_1, percent=True)
        assert [li.text() for li in tr.select("li", "flag")] == row.flags
    chart = page.one(id="chart-per-model").one("svg")
    assert len(chart.select("g", "ci-whisker")) == 2 * len(rows)
