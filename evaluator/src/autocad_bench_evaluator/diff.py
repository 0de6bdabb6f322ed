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


def diff_image(gold_mask: Image.Image, candidate_mask: Image.Image, *, legend: bool = True) -> Image.Image:
    """The RGB overlay of two equally sized "L" masks; raises ``ValueError`` on a size mismatch."""
    if gold_mask.size != candidate_mask.size:
        raise ValueError(f"mask sizes differ: {gold_mask.size} vs {candidate_mask.size}")
    g = np.asarray(gold_mask.convert("L")) > 127
    c = np.asarray(candidate_mask.convert("L")) > 127
    out = np.empty((*g.shape, 3), dtype=np.uint8)
    out[:] = BACKGROUND
    out[g & c] = SHARED
    out[g & ~c] = GOLD_ONLY
    out[c & ~g] = CANDIDATE_ONLY
    image = Image.fromarray(out, mode="RGB")
    if legend:
        draw = ImageDraw.Draw(image)
        font = bitmap_font()
        y = 8
        entries = ((GOLD_ONLY, "gold only (missing)"), (CANDIDATE_ONLY, "candidate only (extra)"), (SHARED, "shared"))
        for colour, label in entries:
            draw.rectangle([8, y, 20, y + 10], fill=colour)
            draw.text((26, y), label, fill=(0, 0, 0), font=font)
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
