"""Whole-batch validation of a model's ``computer_action`` input, before any input happens.

:func:`validate_batch` takes the raw argument object the model produced and either returns
a :class:`ValidatedBatch` of typed actions or a :class:`BatchRejection` listing every
problem, each located by its JSON path (``actions[3].text``) and worded so the model can
fix it on its next turn. It never raises for bad model input: any JSON value (and any
Python object) yields one of the two results.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from autocad_bench.actions.keys import KEY_ALIASES, KEY_NAMES
from autocad_bench.actions.models import (
    ACTION_ADAPTER,
    ACTION_TYPES,
    ALL_ACTION_TYPES,
    MAX_CLICK_COUNT,
    MAX_WAIT_SECONDS,
    MOUSE_BUTTONS,
    NATIVE_ONLY_ACTION_TYPES,
    Action,
    action_to_wire,
)
from autocad_bench.errors import Problem
from autocad_bench.providers.models import DisplaySize

DEFAULT_FEEDBACK_LIMIT = 20
"""How many problems :meth:`BatchRejection.feedback` spells out before summarising."""


@dataclass(frozen=True, slots=True)
class ValidatedBatch:
    """A batch that passed every rule; safe to send to the broker as it is."""

    actions: tuple[Action, ...]

    def __len__(self) -> int:
        return len(self.actions)

    @property
    def ends_with_done(self) -> bool:
        """Whether the model declared the task finished with this batch."""
        return self.actions[-1].type == "done"

    @property
    def wait_seconds(self) -> float:
        """Total time the batch spends in ``wait`` and ``hold_key`` actions (to size the broker deadline)."""
        return sum(getattr(action, "seconds", 0.0) for action in self.actions)

    def to_wire(self) -> list[dict[str, object]]:
        """The actions as JSON objects, in order, for ``POST /actions``."""
        return [action_to_wire(action) for action in self.actions]


@dataclass(frozen=True, slots=True)
class BatchRejection:
    """A batch refused before any input: nothing was injected, the desktop is untouched."""

    problems: tuple[Problem, ...]

    def messages(self) -> list[str]:
        """One ``path: message`` line per problem."""
        return [str(problem) for problem in self.problems]

    def feedback(self, limit: int = DEFAULT_FEEDBACK_LIMIT) -> str:
        """Model-facing text: the first ``limit`` problems, then how many more there were."""
        lines = ["The action batch was rejected; nothing was executed. Problems:"]
        lines.extend(f"- {problem}" for problem in self.problems[:limit])
        if len(self.problems) > limit:
            lines.append(f"- ... and {len(self.problems) - limit} more problems")
        return "\n".join(lines)


def validate_batch(
    raw: object, display: DisplaySize, remaining_actions: int, *, native: bool = False
) -> ValidatedBatch | BatchRejection:
    """Check the whole ``{"actions": [...]}`` object against every rule.

    ``display`` is the live desktop size (points must satisfy ``0 <= x < width`` and
    ``0 <= y < height``); ``remaining_actions`` is the rollout's unspent action budget,
    which the batch length may not exceed. ``native`` admits the native-tool-only types
    (``mouse_down``, ``mouse_up``, ``hold_key``; see
    :data:`~autocad_bench.actions.models.NATIVE_ONLY_ACTION_TYPES`): the harness passes it for
    a native tool mode model, the broker always (it performs whatever the harness
    validated). Returns a rejection listing every problem found, in document order; never
    raises for malformed input.
    """
    if not isinstance(raw, Mapping):
        return _reject(
            [
                Problem(
                    "",
                    f'the tool input must be an object like {{"actions": [...]}}, got {_kind(raw)}',
                )
            ]
        )
    problems = [
        Problem(_join(key), "unknown field; the only field is actions")
        for key in raw
        if key != "actions"
    ]
    if "actions" not in raw:
        return _reject([*problems, Problem("actions", "required field is missing")])
    items = raw["actions"]
    if not isinstance(items, list | tuple):
        return _reject(
            [*problems, Problem("actions", f"must be an array of actions, got {_kind(items)}")]
        )
    if not items:
        return _reject([*problems, Problem("actions", "must contain at least one action")])
    if len(items) > remaining_actions:
        left = max(remaining_actions, 0)
        problems.append(
            Problem(
                "actions",
                f"the batch has {_plural(len(items), 'action')} but only {left} "
                f"{'remains' if left == 1 else 'remain'} in the rollout budget",
            )
        )
    last = len(items) - 1
    for index, item in enumerate(items):
        problems.extend(_check_action(item, f"actions[{index}]", display, index == last, native))
    if problems:
        return _reject(problems)
    try:
        actions = tuple(ACTION_ADAPTER.validate_python(item) for item in items)
    except ValidationError as error:  # the checks above should make this unreachable
        return _reject([Problem("actions", f"invalid action: {error.errors()[0]['msg']}")])
    return ValidatedBatch(actions)


def _reject(problems: Iterable[Problem]) -> BatchRejection:
    return BatchRejection(tuple(problems))


Checker = Callable[[object, str, DisplaySize], list[Problem]]


def _check_action(
    item: object, path: str, display: DisplaySize, is_last: bool, native: bool
) -> list[Problem]:
    if not isinstance(item, Mapping):
        return [Problem(path, f"must be an action object, got {_kind(item)}")]
    types = _NATIVE_TYPE_LIST if native else _TYPE_LIST
    if "type" not in item:
        return [
            Problem(_join("type", path), f"required field is missing; expected one of {types}")
        ]
    kind = item["type"]
    if not native and kind in NATIVE_ONLY_ACTION_TYPES:
        return [
            Problem(
                _join("type", path),
                f"{kind} is only available in native tool mode; expected one of {types}",
            )
        ]
    if not isinstance(kind, str) or kind not in _FIELDS:
        return [
            Problem(
                _join("type", path),
                f"unknown action type {_show(kind)}; expected one of {types}",
            )
        ]
    fields = _FIELDS[kind]
    problems = [
        Problem(_join(key, path), f"unknown field for a {kind} action")
        for key in item
        if key != "type" and key not in fields
    ]
    for name, check in fields.items():
        if name not in item:
            problems.append(Problem(_join(name, path), "required field is missing"))
        else:
            problems.extend(check(item[name], _join(name, path), display))
    if kind == "scroll" and not problems and item["dx"] == 0 and item["dy"] == 0:
        problems.append(Problem(path, "dx and dy are both 0; scroll at least one wheel click"))
    if kind == "done" and not is_last:
        problems.append(Problem(path, "done must be the last action of the batch"))
    return problems


def _coordinate(axis: str) -> Checker:
    def check(value: object, path: str, display: DisplaySize) -> list[Problem]:
        if not _is_int(value):
            return [Problem(path, f"must be an integer pixel coordinate, got {_kind(value)}")]
        assert isinstance(value, int)
        size = display.width if axis == "x" else display.height
        if not 0 <= value < size:
            return [
                Problem(
                    path,
                    f"{_show(value)} is outside the {display.width}x{display.height} display; "
                    f"{axis} must be between 0 and {size - 1}",
                )
            ]
        return []

    return check


def _button(value: object, path: str, display: DisplaySize) -> list[Problem]:
    if not isinstance(value, str) or value not in MOUSE_BUTTONS:
        names = ", ".join(json.dumps(b) for b in MOUSE_BUTTONS)
        return [Problem(path, f"must be one of {names}, got {_show(value)}")]
    return []


def _count(value: object, path: str, display: DisplaySize) -> list[Problem]:
    if not _is_int(value):
        return [Problem(path, f"must be an integer, got {_kind(value)}")]
    assert isinstance(value, int)
    if not 1 <= value <= MAX_CLICK_COUNT:
        return [Problem(path, f"must be 1, 2 or {MAX_CLICK_COUNT}, got {_show(value)}")]
    return []


def _wheel(value: object, path: str, display: DisplaySize) -> list[Problem]:
    if not _is_int(value):
        return [Problem(path, f"must be an integer number of wheel clicks, got {_kind(value)}")]
    return []


def _path(value: object, path: str, display: DisplaySize) -> list[Problem]:
    if not isinstance(value, list | tuple):
        return [Problem(path, f"must be an array of [x, y] points, got {_kind(value)}")]
    problems = []
    if len(value) < 2:
        problems.append(Problem(path, f"needs at least 2 points, got {len(value)}"))
    for index, point in enumerate(value):
        where = f"{path}[{index}]"
        if not isinstance(point, list | tuple) or len(point) != 2:
            problems.append(Problem(where, f"must be an [x, y] pair, got {_describe_pair(point)}"))
            continue
        problems.extend(_X(point[0], f"{where}[0]", display))
        problems.extend(_Y(point[1], f"{where}[1]", display))
    return problems


def _text(value: object, path: str, display: DisplaySize) -> list[Problem]:
    if not isinstance(value, str):
        return [Problem(path, f"must be a string, got {_kind(value)}")]
    if not value:
        return [Problem(path, "must not be empty")]
    for offset, char in enumerate(value):
        if not " " <= char <= "~":
            message = f"character U+{ord(char):04X} at offset {offset} is not printable ASCII"
            hint = _CONTROL_HINTS.get(char)
            return [Problem(path, f"{message}; {hint}" if hint else message)]
    return []


_CONTROL_HINTS = {
    "\n": 'press Enter with a key action: {"type": "key", "keys": ["enter"]}',
    "\r": 'press Enter with a key action: {"type": "key", "keys": ["enter"]}',
    "\t": 'press Tab with a key action: {"type": "key", "keys": ["tab"]}',
}


def _keys(value: object, path: str, display: DisplaySize) -> list[Problem]:
    if not isinstance(value, list | tuple):
        return [Problem(path, f"must be an array of key names, got {_kind(value)}")]
    if not value:
        return [Problem(path, "must name at least one key")]
    problems = []
    seen: set[str] = set()
    for index, name in enumerate(value):
        where = f"{path}[{index}]"
        if not isinstance(name, str):
            problems.append(Problem(where, f"must be a key name string, got {_kind(name)}"))
        elif name not in KEY_NAMES:
            problems.append(Problem(where, _unknown_key(name)))
        elif name in seen:
            problems.append(
                Problem(where, f"key {_show(name)} appears more than once in the chord")
            )
        else:
            seen.add(name)
    return problems


def _unknown_key(name: str) -> str:
    message = f"unknown key name {_show(name)}"
    lower = name.lower()
    if lower in KEY_NAMES:
        return f"{message}; key names are lowercase: use {_show(lower)}"
    if lower in KEY_ALIASES:
        return f"{message}; use {_show(KEY_ALIASES[lower])}"
    if len(name) == 1 and " " <= name <= "~":
        return f"{message}; type characters such as this with a type action"
    return f'{message}; use PyAutoGUI key names such as "enter", "ctrl", "f1"'


def _seconds(value: object, path: str, display: DisplaySize) -> list[Problem]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return [Problem(path, f"must be a number of seconds, got {_kind(value)}")]
    # Compared directly, without converting an integer to float (10**400 would overflow);
    # NaN fails every comparison and infinity exceeds the maximum, so both are refused too.
    if not 0 < value <= MAX_WAIT_SECONDS:
        return [
            Problem(
                path,
                f"must be greater than 0 and at most {MAX_WAIT_SECONDS:g}, got {_show(value)}",
            )
        ]
    return []


_X = _coordinate("x")
_Y = _coordinate("y")

_FIELDS: dict[str, dict[str, Checker]] = {
    "move": {"x": _X, "y": _Y},
    "click": {"x": _X, "y": _Y, "button": _button, "count": _count},
    "drag": {"path": _path, "button": _button},
    "scroll": {"x": _X, "y": _Y, "dx": _wheel, "dy": _wheel},
    "type": {"text": _text},
    "key": {"keys": _keys},
    "wait": {"seconds": _seconds},
    "done": {},
    "mouse_down": {"x": _X, "y": _Y, "button": _button},
    "mouse_up": {"x": _X, "y": _Y, "button": _button},
    "hold_key": {"keys": _keys, "seconds": _seconds},
}
assert tuple(_FIELDS) == ALL_ACTION_TYPES

_TYPE_LIST = ", ".join(ACTION_TYPES)
_NATIVE_TYPE_LIST = ", ".join(ALL_ACTION_TYPES)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: object) -> str:
    """The JSON type name of ``value`` (what the model sent, never its content)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _show(value: object, limit: int = 40) -> str:
    """A short, ASCII-only rendering of a scalar the model sent."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return str(value) if value.bit_length() <= 64 else "an out-of-range integer"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        pieces: list[str] = []
        used = 0
        for char in value:
            piece = json.dumps(char)[1:-1]
            if used + len(piece) > limit:
                return '"' + "".join(pieces) + '..."'
            pieces.append(piece)
            used += len(piece)
        return '"' + "".join(pieces) + '"'
    return _kind(value)


def _describe_pair(value: object) -> str:
    if isinstance(value, list | tuple):
        return f"an array of {_plural(len(value), 'item')}"
    return _kind(value)


def _join(key: object, parent: str = "") -> str:
    name = key if isinstance(key, str) else str(key)
    if name.isidentifier() and name.isascii():
        return f"{parent}.{name}" if parent else name
    return f"{parent}[{_show(name)}]"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
