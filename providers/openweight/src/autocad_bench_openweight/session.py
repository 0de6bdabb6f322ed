"""Native (text-grammar) sessions: the model answers in its own action language, not tool calls.

A :class:`GrammarSession` talks to ``POST {base_url}/chat/completions`` through the OpenAI
SDK like :class:`~autocad_bench.providers.chat.session.ChatCompletionsSession`, but sends no
``tools``: the system message teaches the grammar (``grammar.instructions(geometry)``) and
each reply's ``content`` is parsed with ``grammar.parse``. A reply the grammar refuses is a
malformed turn (``action_input=None``, ``malformed`` = the grammar's message, the raw text in
``ModelTurn.text``); the controller's feedback and the next screenshot then arrive as one user
message, because the reply is committed without a call id (no ``tool`` message exists in
this protocol). A reply cut off at ``max_tokens`` that does not parse says so.

The history is the shared append-only, compacting :class:`~autocad_bench.providers.chat.history.Conversation`;
the assistant's turn is stored and replayed as its plain reply text (returned reasoning is
not echoed back: local chat templates drop it anyway).

Geometry (what frame the model's coordinates refer to): screenshots are always sent at
desktop resolution, since vLLM and SGLang resize images with the model's own processor.
For a grammar whose convention is ``resized`` the frame the model saw is therefore that
processor's ``smart_resize`` of the desktop (factor 28 for Qwen2.5-VL / UI-TARS-1.5, 32 for
Qwen3-VL; option ``server_resize``; ``none`` = the server does not resize). For ``absolute``
and ``normalized_1000`` conventions the geometry is the identity (1920x1080 shown as is).
"""

from __future__ import annotations

import json
from typing import Any

from autocad_bench.models import JsonObject
from autocad_bench.providers.chat.history import ImageStore, PreparedRequest, Record, WireItem, call_summary, dumps
from autocad_bench.providers.chat.session import Exchange, HistorySession, SessionSettings, send
from autocad_bench.providers.chat.wire import ChatRenderer, ParsedTurn, parse_chat_completion, tool_use_id
from autocad_bench.providers.geometry import QWEN3_VL_FACTOR, QWEN25_VL_FACTOR, ScreenGeometry
from autocad_bench.providers.grammar import ActionGrammar, CoordinateConvention, GrammarError
from autocad_bench.providers.models import DisplaySize, SessionRequest

TOOL_PHRASE = "only through the computer_action tool"
"""The shared first message's wording, which is wrong without tools; rendered as :data:`NATIVE_PHRASE`."""
NATIVE_PHRASE = "only through the actions described in the system message"
EMPTY_REPLY = "(empty reply)"

_FACTORS = {"qwen2.5-vl": QWEN25_VL_FACTOR, "qwen3-vl": QWEN3_VL_FACTOR}


def grammar_geometry(grammar: ActionGrammar, desktop: DisplaySize, server_resize: str) -> ScreenGeometry:
    """The frame a model speaking ``grammar`` answers in when shown the full ``desktop``.

    ``smart_resize`` with the server's processor factor for the ``resized`` convention
    (unless ``server_resize`` is ``none``), the identity otherwise. Raises ``ValueError``
    for an aspect ratio ``smart_resize`` refuses (above 200).
    """
    factor = _FACTORS.get(server_resize)
    if grammar.convention is CoordinateConvention.RESIZED and factor is not None:
        return ScreenGeometry.smart_resize(desktop, factor=factor)
    return ScreenGeometry.identity(desktop)


class TextRenderer(ChatRenderer):
    """Chat messages without tool calls: assistant turns as plain text, observations as user messages."""

    def render(self, record: Record, images: ImageStore) -> list[WireItem]:
        """The wire message of ``record``; reads (and checksum-verifies) referenced images."""
        if record.get("role") == "assistant":
            content = record.get("content")
            return [{"role": "assistant", "content": content if isinstance(content, str) else EMPTY_REPLY}]
        items = super().render(record, images)
        for item in items:
            parts = item.get("content")
            if isinstance(parts, list):
                for part in parts:
                    if part.get("type") == "text" and TOOL_PHRASE in part.get("text", ""):
                        part["text"] = part["text"].replace(TOOL_PHRASE, NATIVE_PHRASE)
        return items


class GrammarSession(HistorySession):
    """One rollout whose model writes actions as text in ``grammar`` (tool mode ``native``).

    ``client`` is an ``openai.AsyncOpenAI`` (retries off); the session closes it. Request
    failures raise :class:`~autocad_bench.providers.models.ProviderRequestError` and leave
    the history unchanged; unreadable replies are malformed turns, never exceptions.
    """

    renderer = TextRenderer()

    def __init__(self, request: SessionRequest, settings: SessionSettings, key: str, client: Any,
                 grammar: ActionGrammar, geometry: ScreenGeometry) -> None:
        self._client = client
        self.grammar = grammar
        self.geometry = geometry
        self.system_message: WireItem = {"role": "system", "content": grammar.instructions(geometry)}
        super().__init__(request, settings, key)

    def body_base(self) -> JsonObject:
        """Model, ``max_tokens`` and the optional parameters that are set; never ``tools``."""
        body: JsonObject = {"model": self._settings.model, "max_tokens": self._settings.max_tokens}
        body.update(self._optional())
        body.update(self._settings.extra_body)
        return body

    def _optional(self) -> dict[str, Any]:
        s = self._settings
        return {} if s.temperature is None else {"temperature": s.temperature}

    def _overhead(self) -> int:
        # The system message precedes the history in every request: count it (and its comma).
        return len(dumps({**self.body_base(), "messages": [self.system_message]})) + 1

    async def _exchange(self, prepared: PreparedRequest) -> Exchange:
        s = self._settings
        return await send(
            self._client.chat.completions.with_raw_response.create,
            model=s.model,
            messages=[self.system_message, *prepared.wire()],
            max_tokens=s.max_tokens,
            **self._optional(),
            extra_body=s.extra_body or None,
        )

    def _parse(self, data: Any, sequence: int) -> ParsedTurn:
        base = parse_chat_completion(data, sequence)
        text = base.turn.text
        assistant: Record = {"role": "assistant", "content": text or EMPTY_REPLY}
        turn_id = tool_use_id(sequence, "reply")
        update: dict[str, Any] = {"tool_use_id": turn_id, "action_input": None}
        summary = call_summary("reply", json.dumps(text[:200], ensure_ascii=False))
        if base.turn.malformed is not None:  # no choices at all
            update["malformed"] = base.turn.malformed
        else:
            try:
                parsed = self.grammar.parse(text, self.geometry)
            except GrammarError as error:
                problem = f"the reply is not valid {self.grammar.name} output: {error.message}"
                if base.finish_reason == "length":
                    problem = (f"the reply was truncated at max_tokens ({self._settings.max_tokens}) "
                               f"before a parseable action ({error.message})")
                update["malformed"] = problem
            else:
                update["action_input"] = parsed.action_input
                update["malformed"] = None
                summary = call_summary("actions", json.dumps(parsed.action_input, separators=(",", ":")))
        turn = base.turn.model_copy(update=update)
        return ParsedTurn(turn, assistant, None, summary, base.finish_reason, base.reasoning_chars,
                          base.raw_usage)

    async def aclose(self) -> None:
        """Close the SDK client."""
        await self._client.close()


__all__ = ["GrammarSession", "TextRenderer", "grammar_geometry"]
