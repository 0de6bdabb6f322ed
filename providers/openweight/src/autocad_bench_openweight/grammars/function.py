"""Function calling: the ``computer_action`` tool's own JSON, ``{"actions": [...]}``, as text.

For servers whose tool-call support returns the arguments as a JSON string (vLLM/SGLang
tool parsers, Ollama). The object is passed through unchanged when coordinates are absolute
desktop pixels (the default, as the tool schema describes them); under another convention
the ``x``/``y`` and ``path`` points are mapped to the desktop first. A ```json fence around
the object is tolerated; anything else (extra fields, invalid actions) is a GrammarError.
"""

from __future__ import annotations

import re

from autocad_bench.providers.geometry import ScreenGeometry
from autocad_bench.providers.grammar import (
    ActionGrammar,
    CoordinateConvention,
    GrammarError,
    ParsedTurn,
    WireAction,
    make_turn,
)
from autocad_bench_openweight.grammars._common import load_json

_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n?(.*?)```\Z", re.DOTALL)


class FunctionCallGrammar(ActionGrammar):
    """``computer_action`` arguments as JSON text; coordinates in desktop pixels by default."""

    name = "function"
    default_convention = CoordinateConvention.ABSOLUTE

    def instructions(self, geometry: ScreenGeometry) -> str:
        """A reminder of the call format; the tool schema itself describes each action."""
        return (
            'Act by calling the computer_action tool with {"actions": [...]}; each action is one of '
            "move, click, drag, scroll, type, key, wait, done (last). "
            f"Coordinates are {self.coordinate_frame(geometry)}."
        )

    def parse(self, text: str, geometry: ScreenGeometry) -> ParsedTurn:
        """The ``actions`` of the JSON object in ``text``, validated, in desktop pixels."""
        body = text.strip()
        fenced = _FENCE.match(body)
        value = load_json(fenced.group(1) if fenced else body, text)
        if not isinstance(value, dict) or set(value) != {"actions"}:
            raise GrammarError('the tool input must be an object with one field, {"actions": [...]}', text)
        items = value["actions"]
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise GrammarError("actions must be an array of action objects", text)
        actions: list[WireAction] = items
        if self.convention is not CoordinateConvention.ABSOLUTE:
            actions = [self._mapped(item, geometry, text) for item in items]
        return make_turn(actions, raw=text, geometry=geometry)

    def _mapped(self, action: WireAction, geometry: ScreenGeometry, raw: str) -> WireAction:
        mapped = dict(action)
        if "x" in action and "y" in action:
            mapped["x"], mapped["y"] = self.point(action["x"], action["y"], geometry, raw)
        path = action.get("path")
        if isinstance(path, list):
            points = []
            for point in path:
                if not isinstance(point, list) or len(point) != 2:
                    raise GrammarError(f"a path point must be [x, y], got {point!r}"[:200], raw)
                points.append(list(self.point(point[0], point[1], geometry, raw)))
            mapped["path"] = points
        return mapped
