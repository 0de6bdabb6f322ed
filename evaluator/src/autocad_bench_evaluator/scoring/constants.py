"""The public constants of scoring: the component names, the rounding of reported numbers,
the fixed tolerances (angles, block scale factors, text heights), how credit falls beyond a
tolerance, what one defect costs, and the layer-table defaults a gold leaves unasked."""

from __future__ import annotations

COMPONENTS: tuple[str, ...] = ("entities", "dimensions", "layers", "topology", "text", "extents3d")
ROUND_DIGITS = 6
ANGLE_TOLERANCE_DEG = 0.5
"""Tolerance of every angle (degrees): block-reference and text rotation, angular dimensions."""
SCALE_TOLERANCE = 1e-3
"""Tolerance of a block reference's scale factors (unitless)."""
TEXT_HEIGHT_FRACTION = 0.1
"""A text height agrees within ``min(tolerance.geometric, TEXT_HEIGHT_FRACTION * gold height)``."""
TEXT_WIDTH_FRACTION = 0.25
"""A text's width factor agrees within this fraction of the gold's (1 unless a prompt asks)."""
CREDIT_FALLOFF = 0.5
"""Credit falls from 1 at a normalised error of 1 to 0 at ``1 + CREDIT_FALLOFF``."""
DEFECT_COST = 0.1
"""Share of the total that one whole defect (a missing, extra or wrong item) costs on top of the
component scores; see :func:`~autocad_bench_evaluator.scoring.aggregate._penalised`."""
DEFAULT_LAYER_COLOUR = 7
DEFAULT_LINETYPE = "continuous"
