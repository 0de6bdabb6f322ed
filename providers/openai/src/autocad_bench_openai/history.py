"""The compact controller history sent to OpenAI: past tool calls and their outcome text.

Old screenshots are never resent: each request carries the task, the reference image,
this history and only the current desktop. :class:`Entry` is one past model turn;
``outcome`` is the controller's text that answered it (receipts, a validation error, the
budget left), filled in by the next observation. Everything here is plain data, so it is
also the checkpoint format.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from autocad_bench.actions.schema import COMPUTER_ACTION_TOOL_NAME

NO_RESULT = "(no result was reported for this call)"


class Entry(BaseModel):
    """One past model turn.

    ``arguments`` is the raw argument string of a ``computer_action`` call when it was
    valid JSON; otherwise ``None`` and ``text`` says what the model sent instead.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    turn_index: int = Field(ge=0)
    call_id: str
    arguments: str | None = None
    text: str = ""
    outcome: str | None = None


def answered(entries: list[Entry], tool_use_id: str | None, feedback: str) -> tuple[list[Entry], bool]:
    """``entries`` with the pending last entry answered by ``feedback`` (a new list; input untouched).

    Returns whether ``feedback`` was used as that outcome.
    """
    if entries and tool_use_id is not None:
        last = entries[-1]
        if last.outcome is None and last.call_id == tool_use_id:
            return [*entries[:-1], last.model_copy(update={"outcome": feedback})], True
    return entries, False


def trimmed(entries: list[Entry], keep: int) -> tuple[list[Entry], int]:
    """Drop the oldest entries down to ``keep`` once there are more than ``2 * keep``."""
    if len(entries) <= 2 * keep:
        return entries, 0
    dropped = len(entries) - keep
    return entries[dropped:], dropped


def render(entries: list[Entry]) -> list[dict[str, Any]]:
    """Responses input items for the history: call + output pairs, or assistant text + user outcome."""
    items: list[dict[str, Any]] = []
    for entry in entries:
        outcome = entry.outcome if entry.outcome is not None else NO_RESULT
        if entry.arguments is not None:
            items.append({"type": "function_call", "call_id": entry.call_id,
                          "name": COMPUTER_ACTION_TOOL_NAME, "arguments": entry.arguments})
            items.append({"type": "function_call_output", "call_id": entry.call_id, "output": outcome})
        else:
            items.append({"role": "assistant", "content": entry.text or "(no computer_action call)"})
            items.append({"role": "user", "content": outcome})
    return items


def parse_arguments(raw: str) -> tuple[Any, str | None]:
    """``(value, None)`` for JSON arguments, ``(None, reason)`` otherwise."""
    try:
        return json.loads(raw), None
    except json.JSONDecodeError as error:
        return None, f"the computer_action arguments are not valid JSON ({error.msg} at offset {error.pos})"
