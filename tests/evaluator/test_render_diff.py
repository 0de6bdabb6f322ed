"""Renders share one view and are byte-deterministic; the diff colours who has ink where."""

from __future__ import annotations

import io

import numpy as np
from autocad_bench_evaluator.diff import CANDIDATE_ONLY, GOLD_ONLY, SHARED, diff_image, diff_png, ink_overlap
from autocad_bench_evaluator.metadata import CircleEntity, LineEntity, TextEntity
from autocad_bench_evaluator.render import CANVAS_SIZE, render_mask, render_png, view_for
from PIL import Image

from tests.evaluator.support import metadata, plate


def _colours(image: Image.Image | bytes) -> set[tuple[int, int, int]]:
    if isinstance(image, bytes):
        image = Image.open(io.BytesIO(image))
    colours = image.convert("RGB").getcolors(maxcolors=1 << 16) or []
    return {c for _, c in colours}  # type: ignore[misc]


def test_render_is_deterministic_and_fixed_size() -> None:
    gold = metadata([*plate(), TextEntity(content="Ünïcode ✓", insert=(0, 60), height=2)])
    first, second = render_png(gold), render_png(gold)
    assert first == second
    image = Image.open(io.BytesIO(first))
    assert image.size == CANVAS_SIZE and image.mode == "L"
    assert not image.info  # no text chunks, no timestamps


def test_same_view_for_both_drawings() -> None:
    gold = metadata([LineEntity(start=(0, 0), end=(10, 0))])
    cand = metadata([LineEntity(start=(100, 100), end=(110, 100))])
    view = view_for([gold.extents, cand.extents])
    g, c = render_mask(gold, view), render_mask(cand, view)
    assert g.size == c.size == CANVAS_SIZE
    # both lines visible in the union view, at different places
    gy = np.nonzero(np.asarray(g))[0]
    cy = np.nonzero(np.asarray(c))[0]
    assert gy.size and cy.size and gy.mean() > cy.mean()


def test_diff_colours_gold_only_candidate_only_and_shared() -> None:
    gold = metadata([CircleEntity(center=(0, 0), radius=10), LineEntity(start=(-20, -20), end=(20, -20))])
    cand = metadata([CircleEntity(center=(0, 0), radius=10), LineEntity(start=(-20, 20), end=(20, 20))])
    colours = _colours(diff_png(gold, cand))
    assert {SHARED, GOLD_ONLY, CANDIDATE_ONLY} <= colours
    view = view_for([gold.extents, cand.extents])
    counts = ink_overlap(render_mask(gold, view), render_mask(cand, view))
    assert counts["shared"] > 0 and counts["gold_only"] > 0 and counts["candidate_only"] > 0
    identical = diff_image(render_mask(gold, view), render_mask(gold, view), legend=False)
    assert _colours(identical) == {SHARED, (255, 255, 255)}


def test_translation_aligns_the_candidate_in_the_diff() -> None:
    holes = [e for e in plate() if isinstance(e, CircleEntity)]
    gold = metadata(holes)
    moved = metadata([e.model_copy(update={"center": (e.center[0] + 30, e.center[1])}) for e in holes])
    view = view_for([gold.extents])
    counts = ink_overlap(render_mask(gold, view), render_mask(moved, view, translation=(-30, 0)))
    assert counts["gold_only"] == 0 and counts["candidate_only"] == 0 and counts["shared"] > 0
    unaligned = ink_overlap(render_mask(gold, view), render_mask(moved, view))
    assert unaligned["gold_only"] > 0
