"""The ``text`` component: texts matched on content (case and whitespace folded, a different
text earning half its difflib ratio), insertion point and what it anchors (the start of the
baseline, the centre ...; not backwards or upside down), height, width factor and rotation."""

from __future__ import annotations

import difflib
import functools

import numpy as np

from autocad_bench_evaluator.scoring.constants import (
    ANGLE_TOLERANCE_DEG,
    CREDIT_FALLOFF,
    TEXT_HEIGHT_FRACTION,
    TEXT_WIDTH_FRACTION,
)
from autocad_bench_evaluator.scoring.items import _Side
from autocad_bench_evaluator.scoring.matching import (
    _assign,
    _Component,
    _credit,
    _defects,
    _dice,
    _dist,
    _layer_diff,
    _Match,
    _prune,
)
from autocad_bench_evaluator.scoring.report import _r
from autocad_bench_evaluator.spec import Tolerance

_TEXT_COMPARE = 200


def _texts(g: _Side, c: _Side, tol: Tolerance) -> tuple[_Component, _Match]:
    gt, ct = g.texts, c.texts
    if gt.n == 0 and ct.n == 0:
        return _Component(1.0, False), _Match()
    if gt.n == 0 or ct.n == 0:
        return _Component(0.0, True, gt.n, ct.n, defects=float(gt.n + ct.n)), _Match()
    # Within reach: stacked copies of a text all stay candidates. Beyond, a text's words still
    # earn half of it, so a huge drawing's far texts are matched among the nearest only.
    ci = _prune(gt, ct, (1.0 + CREDIT_FALLOFF) * tol.geometric)
    gi = np.arange(gt.n)
    content = np.zeros((gt.n, len(ci)))
    for i, gl in enumerate(gt.labels):
        for b, j in enumerate(ci):
            content[i, b] = _text_similarity(gl, ct.labels[int(j)])
    gh, gr = gt.size[:, 0], gt.size[:, 1]
    ch, cr = ct.size[ci, 0], ct.size[ci, 1]
    pos_err = _dist(gt.pos, ct.pos[ci]) / tol.geometric
    height_tol = np.maximum(np.minimum(tol.geometric, TEXT_HEIGHT_FRACTION * np.abs(gh)), 1e-9)[:, None]
    height_err = np.abs(gh[:, None] - ch[None, :]) / height_tol
    turn = np.abs(gr[:, None] - cr[None, :]) % 360.0
    rot_err = np.minimum(turn, 360.0 - turn) / ANGLE_TOLERANCE_DEG
    err = np.maximum(np.maximum(pos_err, height_err), rot_err)
    # Stretched or squeezed (width factor, or an ALIGNED/FIT run out of shape) is sized wrong.
    gw, cw = gt.size[:, 3][:, None], ct.size[ci, 3][None, :]
    err = np.maximum(err, np.abs(gw - cw) / np.maximum(TEXT_WIDTH_FRACTION * np.abs(gw), 1e-9))
    # The point of a centred or right-justified text is not where a left-justified one starts:
    # the same point with another anchor (see ``text_anchor``) is text in another place.
    anchored = gt.size[:, 2][:, None] == ct.size[ci, 2][None, :]
    err = np.where(anchored, err, np.maximum(err, 1.0 + 2 * CREDIT_FALLOFF))
    # the right words in the wrong place, size or direction are half a text
    credit = content * (0.5 + 0.5 * _credit(err))
    match = _assign(credit, err, _layer_diff(gt, ct, gi, ci))
    details: dict[str, float | int | str] = {}
    if match.pairs:
        placed = _credit(np.asarray([err[r, col] for r, col, _ in match.pairs]))
        details["placement.score"] = _r(float(placed.mean()))
    match.pairs = [(r, int(ci[col]), c) for r, col, c in match.pairs]
    return (
        _Component(
            _dice(match.credit, gt.n, ct.n),
            True,
            gt.n,
            ct.n,
            match.credit,
            details,
            defects=_defects(match.credit, gt.n, ct.n),
        ),
        match,
    )


@functools.lru_cache(maxsize=65536)
def _text_similarity(gold: str, candidate: str) -> float:
    """1 for equal normalised texts, else half their difflib similarity ratio."""
    if gold == candidate:
        return 1.0
    matcher = difflib.SequenceMatcher(None, gold[:_TEXT_COMPARE], candidate[:_TEXT_COMPARE], autojunk=False)
    return 0.5 * matcher.ratio()
