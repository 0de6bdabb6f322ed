"""``autocad-bench report``: one self-contained HTML file for a batch.

Charts are inline SVG; thumbnails (each rollout's last frame and its evaluation diff) are
embedded as data URIs, scaled down with Pillow when it is installed (the evaluator extra
brings it) and otherwise embedded as they are while they stay under a size budget. The
file loads nothing from anywhere: it can be mailed or archived as it is. The per-model
numbers are :func:`autocad_bench.metrics.model_rows` of the batch, with their 95% intervals.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from autocad_bench.dashboard.charts import batch_charts
from autocad_bench.dashboard.leaderboard_page import batch_metrics
from autocad_bench.dashboard.reader import RolloutRow, RunsRoot, list_frames
from autocad_bench.dashboard.templating import render
from autocad_bench.harness.layout import BatchPaths
from autocad_bench.storage import atomic_write_bytes

THUMB_WIDTH = 320
RAW_IMAGE_LIMIT = 400_000
RAW_TOTAL_LIMIT = 40_000_000


@dataclass(frozen=True, slots=True)
class ReportRow:
    """One rollout in the report with its thumbnails as data URIs (``None`` when the image
    is missing, unreadable or left out by the size budget).
    """

    row: RolloutRow
    frame: str | None
    diff: str | None
    render: str | None


class _Thumbnails:
    def __init__(self) -> None:
        self.raw_total = 0
        self.omitted = 0
        try:
            from PIL import Image  # noqa: F401

            self.pillow = True
        except ImportError:
            self.pillow = False

    def __call__(self, path: Path) -> str | None:
        if not path.is_file():
            return None
        try:
            if self.pillow:
                return self._scaled(path)
            data = path.read_bytes()
        except (OSError, ValueError):
            return None
        if len(data) > RAW_IMAGE_LIMIT or self.raw_total + len(data) > RAW_TOTAL_LIMIT:
            self.omitted += 1
            return None
        self.raw_total += len(data)
        return "data:image/png;base64," + base64.b64encode(data).decode("ascii")

    @staticmethod
    def _scaled(path: Path) -> str:
        from PIL import Image

        with Image.open(path) as image:
            image.thumbnail((THUMB_WIDTH, THUMB_WIDTH * 4))
            buffer = io.BytesIO()
            image.convert("RGB").save(buffer, format="PNG", optimize=True)
        return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def build_report(batch_dir: Path) -> str:
    """The report HTML of the batch in ``batch_dir``."""
    batch_dir = Path(batch_dir).resolve()
    root = RunsRoot(batch_dir)
    batch = root.batch(".")
    thumbs = _Thumbnails()
    rows = []
    for row in batch.rollouts:
        paths = BatchPaths(batch_dir).rollout(row.rollout_id)
        frames = list_frames(paths.root) if row.has_dir else []
        rows.append(ReportRow(
            row=row, frame=thumbs(paths.root / frames[-1]) if frames else None,
            diff=thumbs(paths.evaluation_diff) if row.has_dir else None,
            render=thumbs(paths.evaluation_render) if row.has_dir else None,
        ))
    models = batch_metrics(batch_dir, load=root.cache.json)
    return render("report.html", batch=batch, rows=rows, models=models,
                  charts=batch_charts(batch.rollouts, models.rows), generated=datetime.now(UTC),
                  omitted=thumbs.omitted, pillow=thumbs.pillow)


def write_report(batch_dir: Path, out: Path) -> Path:
    """Write the report of ``batch_dir`` atomically to ``out`` (parents created) and return
    ``out``. Raises :class:`NotFound` when ``batch_dir`` has no batch and ``OSError`` on a write failure.
    """
    html = build_report(batch_dir)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, html.encode("utf-8"))
    return out
