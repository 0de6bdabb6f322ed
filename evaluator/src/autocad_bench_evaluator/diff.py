"""Visual diff of gold and candidate renders: who has ink where.

:func:`diff_image` overlays two ink masks rendered in the same view: ink present in both is
grey, gold-only ink (missing from the candidate) is red, candidate-only ink (extra in the
candidate) is blue, on white. A small legend in Pillow's bitmap font names the colours.
Deterministic: the same masks give the same pixels.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from autocad_bench_evaluator.geometry import Point
from autocad_bench_evaluator.metadata import DrawingMetadata
from autocad_bench_evaluator.render import bitmap_font, png_bytes, render_mask, translated_extents, view_for

SHARED = (150, 150, 150)
GOLD_ONLY = (220, 30, 30)
CANDIDATE_ONLY = (30, 90, 230)
BACKGROUND = (255, 255, 255)
_PALETTE = (BACKGROUND, SHARED, GOLD_ONLY, CANDIDATE_ONLY, (0, 0, 0))


def diff_image(gold_mask: Image.Image, candidate_mask: Image.Image, *, legend: bool = True) -> Image.Image:
    """The overlay of two equally sized "L" masks as a palette image (white, grey, red, blue,
    black for the legend text); raises ``ValueError`` on a size mismatch."""
    if gold_mask.size != candidate_mask.size:
        raise ValueError(f"mask sizes differ: {gold_mask.size} vs {candidate_mask.size}")
    g = np.asarray(gold_mask.convert("L")) > 127
    c = np.asarray(candidate_mask.convert("L")) > 127
    index = np.zeros(g.shape, dtype=np.uint8)
    index[g & c] = 1
    index[g & ~c] = 2
    index[c & ~g] = 3
    image = Image.fromarray(index, mode="L").convert("P")
    image.putpalette([channel for colour in _PALETTE for channel in colour])
    if legend:
        draw = ImageDraw.Draw(image)
        font = bitmap_font()
        y = 8
        entries = ((2, "gold only (missing)"), (3, "candidate only (extra)"), (1, "shared"))
        for colour, label in entries:
            draw.rectangle([8, y, 20, y + 10], fill=colour)
            draw.text((26, y), label, fill=4, font=font)
            y += 16
    return image


def ink_overlap(gold_mask: Image.Image, candidate_mask: Image.Image) -> dict[str, int]:
    """Pixel counts of shared, gold-only and candidate-only ink (diagnostics)."""
    g = np.asarray(gold_mask.convert("L")) > 127
    c = np.asarray(candidate_mask.convert("L")) > 127
    return {
        "shared": int(np.count_nonzero(g & c)),
        "gold_only": int(np.count_nonzero(g & ~c)),
        "candidate_only": int(np.count_nonzero(c & ~g)),
    }


def diff_png(gold: DrawingMetadata, candidate: DrawingMetadata, *, translation: Point = (0.0, 0.0)) -> bytes:
    """PNG bytes of the diff of ``gold`` and ``candidate`` (moved by ``translation``) in their union view."""
    view = view_for([gold.extents, translated_extents(candidate, translation)])
    return png_bytes(diff_image(render_mask(gold, view), render_mask(candidate, view, translation=translation)))
