"""The aggregation of component scores (step 4 of scoring): every component evaluated for one
translation, combined with the spec's weights over the applicable components, and the defect
penalty on top (``_penalised``)."""

from __future__ import annotations

from dataclasses import dataclass

from autocad_bench_evaluator.geometry import Point
from autocad_bench_evaluator.scoring.constants import DEFECT_COST
from autocad_bench_evaluator.scoring.dimensions import _dimensions
from autocad_bench_evaluator.scoring.entities import _entities
from autocad_bench_evaluator.scoring.extents3d import _extents3d
from autocad_bench_evaluator.scoring.items import _Side
from autocad_bench_evaluator.scoring.layers import _layers
from autocad_bench_evaluator.scoring.matching import ErrFn, _Component
from autocad_bench_evaluator.scoring.text import _texts
from autocad_bench_evaluator.scoring.topology import _topology
from autocad_bench_evaluator.spec import ScoringSpec


@dataclass
class _Evaluation:
    components: dict[str, _Component]
    total: float
    anchor_pairs: list[tuple[Point, Point, float]]
    defects: float = 0.0


def _penalised(weighted: float, defects: float) -> float:
    """The weighted component mean less ``DEFECT_COST`` of it per whole defect, at most one.

    The components measure *how much* of the drawing is right; a drawing with a single missing,
    extra or wrong item is still not what was asked, however large the rest. So any one whole
    defect caps the total at ``1 - DEFECT_COST`` (0.9) of the weighted mean: below the pass
    threshold by a clear margin, while a drawing with no defect keeps its weighted mean (1.0 for
    the gold). Partial credit (an item a little beyond tolerance) costs fractionally.
    """
    return weighted * (1.0 - DEFECT_COST * min(1.0, max(0.0, defects)))


def _evaluate(g: _Side, c: _Side, spec: ScoringSpec, errs: dict[str, ErrFn]) -> _Evaluation:
    tol = spec.tolerance
    weights = spec.weights.as_dict()
    entities, matches = _entities(g, c, errs, tol)
    texts, text_match = _texts(g, c, tol)
    dims, dim_match = _dimensions(g, c, tol)
    matched = [(name, g.kinds[name], c.kinds[name], m) for name, m in matches]
    matched.append(("text", g.texts, c.texts, text_match))
    matched.append(("dimension", g.dims, c.dims, dim_match))
    components = {
        "entities": entities,
        "dimensions": dims,
        "layers": _layers(g, c, matched) if weights["layers"] > 0 else _Component(1.0, False),
        "topology": _topology(g, c, tol) if weights["topology"] > 0 else _Component(1.0, False),
        "text": texts,
        "extents3d": _extents3d(g, c, tol, spec.position) if weights["extents3d"] > 0 else _Component(1.0, False),
    }
    num = den = defects = 0.0
    for name, comp in components.items():
        w = weights[name]
        if w > 0 and comp.applicable:
            num += w * comp.score
            den += w
            defects += comp.defects
    total = _penalised(num / den if den > 0 else 1.0, defects)
    pairs: list[tuple[Point, Point, float]] = []
    for _, gk, ck, m in matched:
        ga, ca = gk.anchors(), ck.anchors()
        for gi, ci, credit in m.pairs:
            pairs.append(((float(ga[gi, 0]), float(ga[gi, 1])), (float(ca[ci, 0]), float(ca[ci, 1])), credit))
    return _Evaluation(components, total, pairs, defects)
