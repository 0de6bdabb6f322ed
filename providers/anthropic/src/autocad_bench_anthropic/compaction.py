"""Compaction: the official server edit, and the deterministic compaction summary (Fable).

**Server compaction** (every Claude model not configured for client compaction): requests
carry the ``compact-2026-01-12`` beta header and a ``compact_20260112`` context edit. A
``compaction`` block the API returns is kept in the assistant message unchanged and replayed;
the API ignores everything before it, so the client drops those earlier messages from its
own history (bytes, not tokens). A compaction block whose ``content`` is null is a failed
compaction: it is not stored and the history is left as it was (a no-op).

**Client compaction** (Claude Fable 5 by default): requests never carry the beta header or
``context_management``. When the previous response reported at least
``client_compaction_input_tokens`` effective input tokens (input + cache read + cache write),
when ``client_compaction_turns`` tool calls have completed since the last summary, when
the request would pass the byte guard, or after a 413, the next request replaces every
complete tool-use/tool-result pair by a compaction summary: one user message with the full task,
the fixed reference, the text of :func:`checkpoint_text` (the most recent controller
outcomes) and the current desktop. No model call is spent on summarizing.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from autocad_bench_anthropic.options import COMPACTION_EDIT

Json = dict[str, Any]

_RESULT_LIMIT = 700
_ACTIONS_LIMIT = 400


class Outcome(BaseModel):
    """One completed tool call as the controller reported it (kept for compaction summaries)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    turn: int = Field(ge=0)
    tool_use_id: str
    actions: str
    result: str


def context_management(trigger_tokens: int) -> Json:
    """The ``context_management`` request field of server compaction."""
    return {"edits": [{"type": COMPACTION_EDIT, "trigger": {"type": "input_tokens", "value": trigger_tokens}}]}


def live_compaction(block: Json) -> bool:
    """Whether a returned ``compaction`` block holds a summary (``content`` not null)."""
    return block.get("type") == "compaction" and block.get("content") is not None


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(action: Any) -> str:
    if not isinstance(action, dict):
        return _clip(json.dumps(action, sort_keys=True, separators=(",", ":")), 80)
    kind = action.get("type")
    if kind in ("move",):
        return f"move({action.get('x')},{action.get('y')})"
    if kind == "click":
        return f"click({action.get('x')},{action.get('y')},{action.get('button')},x{action.get('count')})"
    if kind == "drag":
        path = action.get("path")
        points = len(path) if isinstance(path, list) else "?"
        first = path[0] if isinstance(path, list) and path else None
        last = path[-1] if isinstance(path, list) and path else None
        return f"drag({first}->{last},{points} points,{action.get('button')})"
    if kind == "scroll":
        return f"scroll({action.get('x')},{action.get('y')},dx={action.get('dx')},dy={action.get('dy')})"
    if kind == "type":
        return f"type({json.dumps(action.get('text'))})"
    if kind == "key":
        keys = action.get("keys")
        return "key(" + ("+".join(str(k) for k in keys) if isinstance(keys, list) else str(keys)) + ")"
    if kind == "wait":
        return f"wait({action.get('seconds')}s)"
    if kind == "done":
        return "done"
    return _clip(json.dumps(action, sort_keys=True, separators=(",", ":")), 80)


def summarize_actions(action_input: JsonValue) -> str:
    """A short deterministic description of a ``computer_action`` argument object."""
    actions = action_input.get("actions") if isinstance(action_input, dict) else None
    if not isinstance(actions, list):
        return _clip(json.dumps(action_input, sort_keys=True, separators=(",", ":")), _ACTIONS_LIMIT)
    return _clip("; ".join(_describe(a) for a in actions) or "(empty batch)", _ACTIONS_LIMIT)


def make_outcome(turn: int, tool_use_id: str, action_input: JsonValue, feedback: str) -> Outcome:
    """The :class:`Outcome` of one completed tool call for compaction summaries: its actions
    summarized and the controller's feedback clipped (a placeholder when empty).
    """
    return Outcome(turn=turn, tool_use_id=tool_use_id, actions=summarize_actions(action_input),
                   result=_clip(feedback or "(no controller feedback)", _RESULT_LIMIT))


def checkpoint_text(*, number: int, dropped_calls: int, completed_turns: int, outcomes: list[Outcome]) -> str:
    """The deterministic compaction summary that replaces the dropped turns (same inputs, same text)."""
    lines = [
        f"Context summary {number}. To keep the conversation small, the earlier turns "
        f"({dropped_calls} completed computer_action call{'s' if dropped_calls != 1 else ''} and their "
        "results) were removed. The task and the fixed reference are repeated above; the current desktop "
        "follows this text. Continue the task from the current desktop.",
        f"Completed computer_action calls in this rollout so far: {completed_turns}.",
    ]
    if outcomes:
        lines.append(f"The {len(outcomes)} most recent controller outcomes, oldest first:")
        for i, outcome in enumerate(outcomes, start=1):
            lines.append(f"{i}. Turn {outcome.turn} ({outcome.tool_use_id}): {outcome.actions} => {outcome.result}")
    return "\n".join(lines)
