"""``autocad-bench report``: one self-contained HTML file."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from autocad_bench.dashboard import report as report_module
from autocad_bench.dashboard.cli import report_command
from tests.dashboard.builders import batch_state, entry, evaluation_dir, rollout_dir, write_batch

SECRET = "sk-report-secret-value-91"


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.urls += [v or "" for k, v in attrs if k in ("src", "href", "action", "data")]


def make_batch(tmp_path: Path) -> Path:
    batch = write_batch(tmp_path / "b", batch_state(
        [entry("r0", "done", score=0.8, passed=True, token_cost_usd=0.4, model="a"),
         entry("r1", "failed", failure_class="action_rejected", model="b"), entry("r2", "queued", model="c")],
        evaluation=True, status="finished"))
    rollout_dir(batch, "r0", phase="finished")
    evaluation_dir(batch / "rollouts" / "r0")
    rollout_dir(batch, "r1", turns=1, phase="finished")
    (batch / "logs").mkdir()
    (batch / "logs" / "r0.log").write_text(SECRET)
    (batch / "admission.json").write_text(json.dumps({"x": SECRET}))
    return batch


@pytest.mark.parametrize("pillow", [True, False])
def test_report_is_self_contained(tmp_path: Path, pillow: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    batch = make_batch(tmp_path)
    if not pillow:
        monkeypatch.setattr(report_module._Thumbnails, "_scaled", None)
        original = report_module._Thumbnails.__init__

        def no_pillow(self: report_module._Thumbnails) -> None:
            original(self)
            self.pillow = False

        monkeypatch.setattr(report_module._Thumbnails, "__init__", no_pillow)
    out = tmp_path / "out" / "report.html"
    result = CliRunner().invoke(report_command, [str(batch), "--out", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    links = Links()
    links.feed(html)
    assert links.urls and all(u.startswith("data:image/png;base64,") for u in links.urls), links.urls
    assert "script" not in links.tags and "link" not in links.tags
    assert html.count('<svg class="chart"') == 3 and "Cost vs score per rollout" in html
    # Per-model metrics from autocad_bench.metrics: one row per model, each without an interval
    # (one task) and so marked wide; a and b have a value (b's model failure counts as 0), c none.
    assert html.count('<tr class="model-row wide"') == 3
    assert html.count('<svg class="ci wide"') == 4 and "0.800 [no interval]" in html
    assert "unscored: 1 of 1 rollouts" in html
    assert html.count('alt="last frame of') == 2 and 'alt="diff of r0"' in html
    assert 'data-rollout="r2"' in html and "action_rejected" in html
    assert SECRET not in html


def test_report_refuses_a_directory_without_a_batch(tmp_path: Path) -> None:
    result = CliRunner().invoke(report_command, [str(tmp_path), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "no batch-state.json" in result.output
