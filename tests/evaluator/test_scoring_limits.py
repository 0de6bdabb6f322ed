"""Adversarial candidates (entity spam) are scored in bounded time and score low."""

from __future__ import annotations

import math
import time

from autocad_bench_evaluator.metadata import CircleEntity, Entity, LineEntity, TextEntity
from autocad_bench_evaluator.scoring import score_drawing
from autocad_bench_evaluator.spec import ScoringSpec

from tests.evaluator.support import metadata, plate


def spam() -> list[Entity]:
    star: list[Entity] = [
        LineEntity(start=(50.0, 25.0), end=(50 + 40 * math.cos(i / 1000), 25 + 40 * math.sin(i / 1000)))
        for i in range(20_000)
    ]
    texts: list[Entity] = [TextEntity(content=f"PLATE {i}", insert=(i % 100, i // 100), height=3) for i in range(3_000)]
    holes: list[Entity] = [CircleEntity(center=(i % 30 * 3.0, i // 30 * 3.0), radius=4) for i in range(900)]
    return [*plate(), *star, *texts, *holes]


def test_entity_spam_is_scored_quickly_and_low() -> None:
    for position in ("free", "fixed"):
        spec = ScoringSpec(task_id="plate", position=position)  # type: ignore[arg-type]
        started = time.monotonic()
        report = score_drawing(metadata(plate()), metadata(spam()), spec, "v")
        elapsed = time.monotonic() - started
        assert elapsed < 30, elapsed
        assert report.score < 0.2 and not report.passed
