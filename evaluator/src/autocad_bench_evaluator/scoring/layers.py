"""The ``layers`` component: the names of layers that carry items, the layer of every matched
item, and the stated table properties (colour, linetype) of the gold's layers."""

from __future__ import annotations

from autocad_bench_evaluator.scoring.constants import DEFAULT_LAYER_COLOUR, DEFAULT_LINETYPE
from autocad_bench_evaluator.scoring.items import _Kind, _Side
from autocad_bench_evaluator.scoring.matching import _Component, _defects, _dice, _Match
from autocad_bench_evaluator.scoring.report import _r


def _layers(g: _Side, c: _Side, matched: list[tuple[str, _Kind, _Kind, _Match]]) -> _Component:
    """Layer names that carry items, the layer of each matched item, and the stated properties
    (colour, linetype) of the gold's layers that carry items."""
    if not g.layers and not c.layers:
        return _Component(1.0, False)
    shared = len(g.layers & c.layers)
    names = _dice(float(shared), len(g.layers), len(c.layers))
    defects = _defects(float(shared), len(g.layers), len(c.layers))
    agree = total = 0.0
    for _, gk, ck, match in matched:
        for gi, ci, credit in match.pairs:
            total += credit
            if gk.layers[gi] == ck.layers[ci]:
                agree += credit
    details: dict[str, float | int | str] = {"names.score": _r(names)}
    parts = [names]
    if total > 0:
        assignment = agree / total
        details["assignment.score"] = _r(assignment)
        parts.append(assignment)
        defects += total - agree
    checked, right = _layer_properties(g, c)
    if checked:
        properties = right / checked
        details["properties.score"] = _r(properties)
        details["properties.checked"] = checked
        parts.append(properties)
        defects += checked - right
    score = sum(parts) / len(parts)
    return _Component(score, True, len(g.layers), len(c.layers), float(shared), details, defects)


def _layer_properties(g: _Side, c: _Side) -> tuple[int, int]:
    """(checked, agreeing) layer properties: the colour of every gold layer that carries items
    when some such layer has a colour other than 7, likewise the linetype when some has one other
    than Continuous (a property the gold leaves at its default everywhere was not asked for).
    A layer the candidate lacks agrees on nothing."""
    used = sorted(name for name in g.layers if name in g.layer_props)
    checked = right = 0
    for index, default in ((0, DEFAULT_LAYER_COLOUR), (1, DEFAULT_LINETYPE)):
        if not any(g.layer_props[name][index] != default for name in used):
            continue
        for name in used:
            checked += 1
            theirs = c.layer_props.get(name)
            if theirs is not None and theirs[index] == g.layer_props[name][index]:
                right += 1
    return checked, right
