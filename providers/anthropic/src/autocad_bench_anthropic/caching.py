"""The immutable request prefix and its cache breakpoints.

Cache order on the Messages API is tools, then system, then messages. A request carries:

1. an explicit 5-minute breakpoint on the system block (caches the strict tool and the system);
2. an explicit 5-minute breakpoint on the fixed reference image, the last block of the
   task/reference prefix of the first user message (it survives compaction summaries, which
   rebuild that message with the same prefix);
3. top-level automatic caching (``cache_control`` on the request), which the API applies to
   the last cacheable block, so the cached prefix advances with every appended turn.

That is three of the four breakpoints the API allows.
"""

from __future__ import annotations

from typing import Any

from autocad_bench.actions.schema import COMPUTER_ACTION_DESCRIPTION, COMPUTER_ACTION_TOOL_NAME
from autocad_bench.providers.models import DisplaySize

Json = dict[str, Any]

CACHE_5M: Json = {"type": "ephemeral", "ttl": "5m"}
"""An explicit five-minute breakpoint (``BetaCacheControlEphemeralParam``)."""
MAX_BREAKPOINTS = 4


def cache_control() -> Json:
    """A fresh copy of :data:`CACHE_5M`."""
    return dict(CACHE_5M)


def default_system_prompt(display: DisplaySize) -> str:
    """The system prompt used when the model's options set none (names the display size and the
    one-tool-call-per-reply contract).
    """
    return (
        f"You operate a CAD application on a {display.width}x{display.height} pixel desktop through the "
        f"{COMPUTER_ACTION_TOOL_NAME} tool. Every reply must be exactly one {COMPUTER_ACTION_TOOL_NAME} call "
        "carrying a batch of actions; the batch runs in order and you then receive one screenshot of the "
        "resulting desktop together with the controller's receipts. Work towards the task in the first user "
        "message and compare your drawing with the fixed reference image. End the batch with a 'done' action "
        "only when the drawing is complete and saved."
    )


def system_blocks(text: str) -> list[Json]:
    """The system prompt as one text block with an explicit breakpoint."""
    return [{"type": "text", "text": text, "cache_control": cache_control()}]


def computer_action_tool(schema: Json) -> Json:
    """The strict ``computer_action`` tool (``strict`` beside name/description/input_schema)."""
    return {
        "name": COMPUTER_ACTION_TOOL_NAME,
        "description": COMPUTER_ACTION_DESCRIPTION,
        "input_schema": schema,
        "strict": True,
    }


def forced_tool_choice(*, disable_parallel_tool_use: bool) -> Json:
    """The ``tool_choice`` that forces a ``computer_action`` call, optionally with parallel tool
    use disabled.
    """
    choice: Json = {"type": "tool", "name": COMPUTER_ACTION_TOOL_NAME}
    if disable_parallel_tool_use:
        choice["disable_parallel_tool_use"] = True
    return choice


def count_breakpoints(body: Json) -> int:
    """Explicit and automatic cache breakpoints of a request body (for tests and guards)."""

    def walk(value: Any) -> int:
        if isinstance(value, dict):
            own = 1 if isinstance(value.get("cache_control"), dict) else 0
            return own + sum(walk(v) for k, v in value.items() if k != "cache_control")
        if isinstance(value, list):
            return sum(walk(v) for v in value)
        return 0

    return walk(body)
