"""Deterministic scoring of a candidate drawing against its gold drawing.

:func:`score_drawing` compares two :class:`DrawingMetadata` under a :class:`ScoringSpec` and
returns a :class:`ScoreReport`; :func:`invalid_report` is the zero report of an invalid
drawing. The same inputs always give byte-identical :meth:`ScoreReport.to_json_bytes`
(sorted keys, floats rounded to 6 decimals, no timestamps).

How it works:

1. Both drawings are reduced to scoreable items of the model space (entities on off or frozen
   layers, and POINTs on ``spec.ignore_layers``, left out): straight segments (LINEs and
   straight polyline segments), circular arcs (ARCs and bulged polyline segments), circles,
   points, curves (ellipses and splines, sampled), hatches, block references, texts and
   dimensions; plus closed profiles, circle groups, characteristic sizes, the layers that
   carry items with their table properties, and the 3D extents. Block references count as a
   reference *and* contribute their exploded contents, so a rectangle drawn as four LINEs or as
   one closed polyline scores the same geometry.
2. Position ``"free"``: candidate-to-gold translations are proposed by voting over pairs of
   same-kind anchor points (plus extents alignment), each proposal is scored, the best is
   refined by the least-squares translation of its matched pairs. Translating the candidate
   therefore does not change the score. ``"fixed"`` uses no translation: moving the drawing by
   more than the tolerance fails.
3. Each kind is matched one-to-one by an optimal assignment
   (``scipy.optimize.linear_sum_assignment``) maximising the summed credit. A pair's normalised
   error ``e`` is its worst deviation divided by that quantity's tolerance; credit is 1 for
   ``e <= 1`` and falls linearly to 0 at ``e = 1 + CREDIT_FALLOFF`` (1.5). A component's score
   is the Dice/F1 measure ``2 * credit / (gold items + candidate items)``: missing and extra
   items both cost. A kind with more than 250,000 gold-candidate pairs is matched among, for
   each gold item, its 8 nearest candidates and every candidate within ``1.5 * tol`` of it:
   still exact for every kind whose error bounds its anchor distance (all but curves and
   texts; a far text still earns half for its words). Multisets of sizes are matched exactly
   whatever they repeat, except a block of over a million pairs of *distinct* sizes within
   reach of each other (over a thousand different sizes, each within ``1.5 * tol`` of the
   others), matched among each gold size's 8 nearest on either side (approximate).
4. Component scores are combined with the spec's weights over the *applicable* components
   (a component is not applicable when neither drawing has anything it measures). Then every
   *defect* costs on top (:func:`~autocad_bench_evaluator.scoring.aggregate._penalised`): the
   defects of a component are ``gold + candidate - 2 * credit`` summed over its parts (a
   missing or extra item is one, a wrong item two, partial credit a fraction), and the total
   is the weighted mean times
   ``1 - DEFECT_COST * min(1, defects)``. One whole defect anywhere therefore caps the total at
   0.9 of the weighted mean, clearly below a 0.95 threshold, however large the drawing; a
   drawing without defects (the gold) keeps its weighted mean, exactly 1.0. Edit tasks then
   rescale ``(raw - baseline) / (1 - baseline)``. The total passes at ``spec.pass_threshold``
   when required layers and texts are present.

What is compared, and within which tolerance. ``tol`` is ``spec.tolerance.geometric``, an
absolute distance in drawing units that applies to positions and sizes alike, whatever the
size (``tolerance.relative_size`` is ignored):

* segments: both end points within ``tol``; arcs: centre, radius and both end points;
  circles: centre and radius; points: location; curves: Hausdorff distance of the samples.
* hatches: area centroid within ``tol``, area within about ``4 * tol * sqrt(area)`` (a
  boundary within ``tol``), and the fill: solid fill versus pattern, and the pattern name. A
  hatch with the wrong fill is half a match (one defect); an extra hatch is an extra item.
* block references: block name, insertion point within ``tol``, scale factors within
  :data:`SCALE_TOLERANCE`, rotation within :data:`ANGLE_TOLERANCE_DEG` modulo the block's
  rotational symmetry (:mod:`~autocad_bench_evaluator.scoring.symmetry`).
* texts (``text``): content (case and whitespace folded; a different text earns half its
  difflib ratio), insertion point within ``tol`` and anchored alike (the start of the baseline,
  or the same justification, neither backwards nor upside down:
  :func:`~autocad_bench_evaluator.scoring.items.text_anchor`), height within ``min(tol, 10%
  of the gold height)``, width factor within :data:`TEXT_WIDTH_FRACTION`, rotation within
  :data:`ANGLE_TOLERANCE_DEG`. The right words placed, sized or turned wrong are half a match.
* ``dimensions``: DIMENSION measurements (lengths within ``tol``, angles within
  :data:`ANGLE_TOLERANCE_DEG`) of the same family (length, diameter, angle) with the measured
  points within ``tol`` (the right value on the wrong feature is half a match); plus the
  multisets of segment lengths, circle and arc radii and the drawing's width and height, each
  within ``tol``.
* ``topology``: closed profiles (closed polylines and curves, closed chains of lines and arcs):
  centroid and perimeter within ``tol``, area within ``tol * perimeter``; circle groups of one
  radius: their counts and centre spacings (within ``tol``), translation- and rotation-free.
* ``layers``: the names of layers that carry items (Dice), the layer of every matched item,
  and the table properties of the gold's layers that carry items: every such layer's colour
  when some has a colour other than 7, and its linetype when some has one other than
  Continuous (a property left at its default on every gold layer was not asked for); a
  property the candidate's same-named layer lacks or has otherwise is a defect.
* ``extents3d`` (schema 4): the physical 3D box's sizes within ``tol``, its minimum corner
  within ``tol`` when the position is fixed, the volume within ``tol`` times half the box's
  surface (a candidate whose bodies are not closed surfaces has no volume: a defect), the
  surface area within ``tol`` times four times the box's edge sum, the volume centroid relative
  to the box corner within ``tol`` (a mirrored or rearranged part moves it) and the number of
  bodies (a duplicated or un-united body is a defect). When the gold is made of ACIS solids,
  MESH or POLYFACE bodies do not stand in for them: the component scores 0 with the reason.

Nothing here raises for odd geometry: degenerate items are skipped. A spec whose
``task_id`` differs from the caller's is the caller's business.

The package, one job per module (every name below is importable from
``autocad_bench_evaluator.scoring`` itself):

* :mod:`~autocad_bench_evaluator.scoring.constants`: the public constants (tolerances, credit
  falloff, defect cost);
* :mod:`~autocad_bench_evaluator.scoring.report`: :class:`ScoreReport`, :class:`ComponentScore`,
  :func:`invalid_report` and the units check;
* :mod:`~autocad_bench_evaluator.scoring.items`: step 1, a drawing reduced to scoreable items;
* :mod:`~autocad_bench_evaluator.scoring.alignment`: step 2, the candidate-to-gold translation;
* :mod:`~autocad_bench_evaluator.scoring.matching`: step 3, credit, optimal assignment, Dice
  and defects;
* one module per component: :mod:`~autocad_bench_evaluator.scoring.entities`,
  :mod:`~autocad_bench_evaluator.scoring.dimensions`, :mod:`~autocad_bench_evaluator.scoring.layers`,
  :mod:`~autocad_bench_evaluator.scoring.topology`, :mod:`~autocad_bench_evaluator.scoring.text`,
  :mod:`~autocad_bench_evaluator.scoring.extents3d`;
* :mod:`~autocad_bench_evaluator.scoring.aggregate`: step 4, the weighted total and the defect
  penalty;
* :mod:`~autocad_bench_evaluator.scoring.score`: :func:`score_drawing`, the entry point, with
  the edit-task rescaling and the pass threshold.
"""

from __future__ import annotations

from autocad_bench_evaluator.scoring.constants import (
    ANGLE_TOLERANCE_DEG,
    COMPONENTS,
    CREDIT_FALLOFF,
    DEFAULT_LAYER_COLOUR,
    DEFAULT_LINETYPE,
    DEFECT_COST,
    ROUND_DIGITS,
    SCALE_TOLERANCE,
    TEXT_HEIGHT_FRACTION,
    TEXT_WIDTH_FRACTION,
)
from autocad_bench_evaluator.scoring.extents3d import (
    SOLID_SOURCES,
)
from autocad_bench_evaluator.scoring.items import (
    hidden_layers,
    normalize_text,
    object_type,
)
from autocad_bench_evaluator.scoring.report import (
    ComponentScore,
    ScoreReport,
    invalid_report,
    units_mismatch,
)
from autocad_bench_evaluator.scoring.score import (
    required_layers_present,
    required_text_present,
    score_drawing,
)

__all__ = [
    "ANGLE_TOLERANCE_DEG",
    "COMPONENTS",
    "CREDIT_FALLOFF",
    "DEFAULT_LAYER_COLOUR",
    "DEFAULT_LINETYPE",
    "DEFECT_COST",
    "ROUND_DIGITS",
    "SCALE_TOLERANCE",
    "SOLID_SOURCES",
    "TEXT_HEIGHT_FRACTION",
    "TEXT_WIDTH_FRACTION",
    "ComponentScore",
    "ScoreReport",
    "hidden_layers",
    "invalid_report",
    "normalize_text",
    "object_type",
    "required_layers_present",
    "required_text_present",
    "score_drawing",
    "units_mismatch",
]
