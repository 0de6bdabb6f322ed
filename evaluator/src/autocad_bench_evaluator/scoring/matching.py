"""One-to-one matching of items (step 3 of scoring): the credit of normalised errors, the
optimal assignment (``scipy.optimize.linear_sum_assignment``), the pruning of huge problems,
the Dice measure and defect count of a matching, and ``_Component``, the unrounded result of
one component scorer."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment, linprog
from scipy.sparse import coo_matrix
from scipy.spatial import cKDTree

from autocad_bench_evaluator.scoring.constants import CREDIT_FALLOFF
from autocad_bench_evaluator.scoring.items import Array, Index, _Kind
from autocad_bench_evaluator.spec import Tolerance

_PRUNE_PRODUCT = 250_000
_PRUNE_K = 8
_LP_PAIRS_PER_LIMIT = 4
"""Sizes are matched in full up to this many times ``limit`` pairs, and as sizes with counts up
to this many times ``limit`` close pairs of distinct sizes; beyond, the nearest-only last resort."""


def _credit(err: Array) -> Array:
    """Credit of normalised errors: 1 within tolerance, 0 beyond ``1 + CREDIT_FALLOFF``."""
    return np.clip((1.0 + CREDIT_FALLOFF - err) / CREDIT_FALLOFF, 0.0, 1.0)


@dataclass
class _Match:
    credit: float = 0.0
    pairs: list[tuple[int, int, float]] = field(default_factory=list)


def _assign(credit: Array, err: Array, layer_diff: Array | None = None) -> _Match:
    """Optimal one-to-one assignment maximising summed credit (ties: smaller error, same layer)."""
    if credit.size == 0:
        return _Match()
    tie = np.minimum(err, 1.0) * 0.5
    if layer_diff is not None:
        tie = tie + 0.5 * layer_diff
    cost = (1.0 - credit) + 1e-6 * tie
    rows, cols = linear_sum_assignment(cost)
    pairs = [(int(r), int(c), float(credit[r, c])) for r, c in zip(rows, cols, strict=True) if credit[r, c] > 0.0]
    return _Match(math.fsum(p[2] for p in pairs), pairs)


def _layer_diff(g: _Kind, c: _Kind, gi: Index, ci: Index) -> Array:
    gl = np.asarray(g.layers, dtype=object)[gi]
    cl = np.asarray(c.layers, dtype=object)[ci]
    return (gl[:, None] != cl[None, :]).astype(float)  # type: ignore[no-any-return]


def _prune(g: _Kind, c: _Kind, reach: float) -> Index:
    """Indices of the candidate items worth matching: all of them unless the problem is huge
    (more than ``_PRUNE_PRODUCT`` pairs); then the ``_PRUNE_K`` nearest to each gold item's
    anchor, and every candidate whose anchor lies within ``reach`` of a gold item's (at 0: the
    coincident ones).

    The nearest alone are not enough: more than ``_PRUNE_K`` coincident items (stacked copies)
    all compete for the same few places, and an exact copy of such a drawing lost credit against
    itself. Where ``reach`` is the anchor distance beyond which a kind earns no credit, pruning
    changes the running time and never the score.
    """
    if g.n * c.n <= _PRUNE_PRODUCT or g.n == 0:
        return np.arange(c.n)
    tree = cKDTree(c.anchors())
    _, idx = tree.query(g.anchors(), k=min(_PRUNE_K, c.n))
    near = tree.query_ball_point(g.anchors(), r=reach)
    return np.unique(np.concatenate([np.asarray(idx, dtype=np.intp).reshape(-1),
                                     *[np.asarray(n, dtype=np.intp) for n in near]]))


ErrFn = Callable[[_Kind, _Kind, Index, Index], tuple[Array, Array]]


def _match_kind(g: _Kind, c: _Kind, err_fn: ErrFn, reach: float) -> _Match:
    """The optimal matching of one kind; ``reach`` as in :func:`_prune`."""
    if g.n == 0 or c.n == 0:
        return _Match()
    ci = _prune(g, c, reach)
    gi = np.arange(g.n)
    err, factor = err_fn(g, c, gi, ci)
    credit = _credit(err) * factor
    match = _assign(credit, err, _layer_diff(g, c, gi, ci))
    match.pairs = [(r, int(ci[col]), cr) for r, col, cr in match.pairs]
    return match


def _dist(a: Array, b: Array) -> Array:
    return np.hypot(a[:, None, 0] - b[None, :, 0], a[:, None, 1] - b[None, :, 1])


def _size_tol(tol: Tolerance, values: Array) -> Array:
    """The tolerance of each size in ``values``: absolute, ``tol.geometric`` whatever the size
    (``tol.relative_size`` is ignored, see :class:`~autocad_bench_evaluator.spec.Tolerance`)."""
    return np.full(np.shape(values), tol.geometric, dtype=float)


def _dice(credit: float, n_gold: int, n_cand: int) -> float:
    total = n_gold + n_cand
    return 1.0 if total == 0 else min(1.0, 2.0 * credit / total)


@dataclass
class _Component:
    score: float
    applicable: bool
    gold: int = 0
    candidate: int = 0
    matched: float = 0.0
    details: dict[str, float | int | str] = field(default_factory=dict)
    defects: float = 0.0
    """Whole items missing, extra or wrong: ``gold + candidate - 2 * credit`` summed over parts."""


def _defects(credit: float, n_gold: int, n_cand: int) -> float:
    """Missing plus extra items of a one-to-one matching (a wrong item counts twice, partial
    credit fractionally): 0 exactly when every item on both sides matched in full."""
    return max(0.0, n_gold + n_cand - 2.0 * credit)


def _credit_1d(gold: Array, cand: Array, tol: float, limit: int = _PRUNE_PRODUCT) -> float:
    """Summed credit of the best one-to-one matching of two multisets of sizes, a pair earning
    ``_credit(|g - c| / tol)``.

    Exact whatever the sizes repeat: the sorted values split wherever two neighbours lie at
    least the credit's reach apart (no pair across such a gap earns anything), a group whose
    values all lie within ``tol`` of each other earns ``min(gold, candidate)`` outright, and the
    other groups are matched optimally. Only a group too big to match in full (more than four
    times ``limit`` pairs) is matched as sizes with counts, and only one with more than four
    times ``limit`` close pairs of distinct sizes too (over a thousand different sizes within
    the credit's reach of each other: a pathological drawing) keeps each gold size's nearest
    candidates, which is approximate.
    (Pruning the whole problem by rank lost most of the credit of sizes that repeat: a grid of
    36 equal holes scored 0.46 on its own spacings.)
    """
    if len(gold) == 0 or len(cand) == 0:
        return 0.0
    values = np.concatenate([gold, cand])
    is_cand = np.concatenate([np.zeros(len(gold), dtype=bool), np.ones(len(cand), dtype=bool)])
    order = np.argsort(values, kind="stable")
    v, c = values[order], is_cand[order]
    starts = np.concatenate([[0], np.flatnonzero(np.diff(v) >= (1.0 + CREDIT_FALLOFF) * tol) + 1])
    ends = np.concatenate([starts[1:], [len(v)]])
    n_cand = np.add.reduceat(c.astype(np.int64), starts)
    n_gold = (ends - starts) - n_cand
    tight = v[ends - 1] - v[starts] <= tol
    total = float(np.minimum(n_gold, n_cand)[tight].sum())
    for b in np.flatnonzero(~tight & (n_gold > 0) & (n_cand > 0)):
        block_v, block_c = v[starts[b] : ends[b]], c[starts[b] : ends[b]]
        total += _block_credit_1d(block_v[~block_c], block_v[block_c], tol, limit)
    return total


def _block_credit_1d(gold: Array, cand: Array, tol: float, limit: int) -> float:
    # One-dimensional blocks take a full assignment up to four times the items' limit (a
    # thousand by a thousand: a fraction of a second, 8 MB per matrix).
    if len(gold) * len(cand) <= _LP_PAIRS_PER_LIMIT * limit:
        err = np.abs(gold[:, None] - cand[None, :]) / tol
        return _assign(_credit(err), err).credit
    # Many items, few distinct sizes (a grid's spacings, a hatch of equal lines): the matching
    # of sizes with their counts is a transportation problem, whose linear programme has an
    # integral optimum; its value is the best matching's credit.
    # Only the pairs of sizes within the credit's reach enter it (each gold size's are a run of
    # the sorted candidate sizes), so many distinct sizes cost memory in their close pairs only.
    gv, g_count = np.unique(gold, return_counts=True)
    cv, c_count = np.unique(cand, return_counts=True)
    reach = (1.0 + CREDIT_FALLOFF) * tol
    lo = np.searchsorted(cv, gv - reach, side="right")
    runs = np.searchsorted(cv, gv + reach, side="left") - lo
    if int(runs.sum()) > _LP_PAIRS_PER_LIMIT * limit:
        kept = cand[_prune_1d(gold, cand, limit)]
        err = np.abs(gold[:, None] - kept[None, :]) / tol
        return _assign(_credit(err), err).credit
    rows = np.repeat(np.arange(len(gv)), runs)
    cols = np.arange(len(rows)) - np.repeat(np.cumsum(runs) - runs - lo, runs)
    pair_credit = _credit(np.abs(gv[rows] - cv[cols]) / tol)
    rows, cols, pair_credit = rows[pair_credit > 0.0], cols[pair_credit > 0.0], pair_credit[pair_credit > 0.0]
    if len(rows) == 0:
        return 0.0
    n = len(rows)
    constraints = coo_matrix(
        (np.ones(2 * n), (np.concatenate([rows, len(gv) + cols]), np.concatenate([np.arange(n), np.arange(n)]))),
        shape=(len(gv) + len(cv), n),
    )
    result = linprog(-pair_credit, A_ub=constraints.tocsr(), b_ub=np.concatenate([g_count, c_count]),
                     bounds=(0, None), method="highs")
    if not result.success:  # pragma: no cover - a bounded, feasible programme always solves
        raise RuntimeError(f"size matching failed: {result.message}")
    return float(-result.fun)


def _prune_1d(gold: Array, cand: Array, limit: int = _PRUNE_PRODUCT) -> Index:
    if len(gold) * len(cand) <= limit:
        return np.arange(len(cand))
    order = np.argsort(cand, kind="stable")
    sorted_c = cand[order]
    picks: set[int] = set()
    for value in gold:
        pos = int(np.searchsorted(sorted_c, value))
        for k in range(max(0, pos - _PRUNE_K), min(len(cand), pos + _PRUNE_K)):
            picks.add(int(order[k]))
    return np.asarray(sorted(picks), dtype=int)
