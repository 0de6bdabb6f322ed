"""Helpers for turning a native tool's or an action grammar's input into broker actions.

Native computer-use tools (Anthropic's, OpenAI's) and open-weight action grammars all send
free text to type and loosely typed JSON values. These helpers apply one rule for each, so
every vocabulary types the same characters and words its errors the same way; each caller
wraps the ``ValueError`` in its own error type (a message for the model).
"""

from __future__ import annotations

from collections.abc import Mapping

from autocad_bench.actions.models import Action, KeyAction, TypeAction


def typed_actions(text: str) -> list[Action]:
    """``text`` as actions: runs of printable ASCII as ``type``, line breaks as Enter, tabs as Tab.

    ``\\r\\n`` and a lone ``\\r`` are one line break each. Raises ``ValueError`` naming the
    first character the desktop cannot type (anything else outside printable ASCII), and
    for empty text.
    """
    if not text:
        raise ValueError("text must not be empty")
    actions: list[Action] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            actions.append(TypeAction(text="".join(run)))
            run.clear()

    for offset, char in enumerate(text):
        if " " <= char <= "~":
            run.append(char)
            continue
        flush()
        if char == "\n" and offset > 0 and text[offset - 1] == "\r":
            continue  # "\r\n" is one line break, not two Enters
        if char in "\r\n":
            actions.append(KeyAction(keys=("enter",)))
        elif char == "\t":
            actions.append(KeyAction(keys=("tab",)))
        else:
            raise ValueError(f"character U+{ord(char):04X} at offset {offset} cannot be typed; this desktop "
                             "types printable ASCII only (plus newline and tab)")
    flush()
    return actions


def is_strict_int(value: object) -> bool:
    """Whether ``value`` is an ``int`` and not a ``bool`` (JSON ``true`` is no coordinate)."""
    return isinstance(value, int) and not isinstance(value, bool)


def json_kind(value: object) -> str:
    """How to name ``value`` in a message to the model (``null``, ``a string``, ``the number 3``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def show_value(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for quoting a model's value back to it."""
    shown = repr(value)
    return shown if len(shown) <= limit else f"{shown[: limit - 3]}..."
