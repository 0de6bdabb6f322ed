"""Mantle Responses API (``POST /v1/responses``) for models whose catalog entry advertises it.

The history is the same append-only :class:`~autocad_bench.providers.chat.history.Conversation`
as Chat Completions,
rendered as Responses input items: user messages with ``input_text``/``input_image``
parts, the assistant's ``function_call`` and the controller's ``function_call_output``.
Requests are stateless (``store: false``). Tools use controller-side validation (no strict
flag) until a deployed model is verified to accept it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from autocad_bench.actions.schema import COMPUTER_ACTION_DESCRIPTION, COMPUTER_ACTION_TOOL_NAME
from autocad_bench.models import JsonObject
from autocad_bench.providers.chat.history import ImageStore, PreparedRequest, Record, WireItem, image_ref
from autocad_bench.providers.chat.session import Exchange, HistorySession, SessionSettings, send
from autocad_bench.providers.chat.wire import ParsedTurn, Reply, token_usage
from autocad_bench.providers.models import SessionRequest

if TYPE_CHECKING:
    from openai import AsyncOpenAI


class ResponsesRenderer:
    """Stored (Chat-shaped) records to Responses input items."""

    container_key = "input"

    def render(self, record: Record, images: ImageStore) -> list[WireItem]:
        role = record.get("role")
        if role == "tool":
            return [{"type": "function_call_output", "call_id": record.get("tool_call_id"),
                     "output": record.get("content")}]
        if role == "assistant":
            items: list[WireItem] = []
            if isinstance(record.get("content"), str) and record["content"]:
                items.append({"role": "assistant", "content": record["content"]})
            for call in record.get("tool_calls") or []:
                function = call.get("function", {})
                items.append({"type": "function_call", "call_id": call.get("id"), "name": function.get("name"),
                              "arguments": function.get("arguments")})
            return items or [{"role": "assistant", "content": "(no tool call)"}]
        parts: list[WireItem] = []
        for part in record.get("content") or []:
            if part.get("type") == "image_ref":
                ref = image_ref(part)
                parts.append({"type": "input_image", "image_url": f"data:{ref.media_type};base64,{images.base64(ref)}",
                              "detail": "auto"})
            else:
                parts.append({"type": "input_text", "text": part.get("text", "")})
        return [{"role": "user", "content": parts}]


def responses_tool(schema: JsonObject, *, strict: bool) -> JsonObject:
    """The ``computer_action`` function tool in Responses form, ``strict`` as given."""
    tool: JsonObject = {"type": "function", "name": COMPUTER_ACTION_TOOL_NAME,
                        "description": COMPUTER_ACTION_DESCRIPTION, "parameters": schema}
    tool["strict"] = strict
    return tool


def parse_response(data: Any, sequence: int) -> ParsedTurn:
    """Interpret a Responses API ``response`` object defensively."""
    body = data if isinstance(data, dict) else {}
    output = [item for item in body.get("output") or [] if isinstance(item, dict)]
    text = "".join(
        part.get("text", "")
        for item in output if item.get("type") == "message"
        for part in item.get("content") or [] if isinstance(part, dict) and isinstance(part.get("text"), str)
    )
    calls = [item for item in output if item.get("type") == "function_call"]
    usage, raw_usage = token_usage(body.get("usage"), ("input_tokens", "output_tokens"),
                                   ("input_tokens_details", "output_tokens_details"))
    response_id = body.get("id") if isinstance(body.get("id"), str) else None
    status = body.get("status") if isinstance(body.get("status"), str) else None
    assistant: Record = {"role": "assistant", "content": text or None}
    reply = Reply(sequence, assistant, usage, raw_usage, response_id, text, status)
    if not calls:
        return reply.without_call(None if output or body.get("status") == "completed" else "the response has no output")
    first = calls[0]
    raw_name = first.get("name")
    name = raw_name if isinstance(raw_name, str) else ""
    raw_id = first.get("call_id")
    call_id = raw_id if isinstance(raw_id, str) and raw_id else f"call-{sequence}"
    return reply.with_call(name, call_id, first.get("arguments"), len(calls))


class ResponsesSession(HistorySession):
    """One rollout over ``POST {base_url}/responses`` with the OpenAI SDK (retries off, stateless)."""

    renderer = ResponsesRenderer()

    def __init__(self, request: SessionRequest, settings: SessionSettings, key: str, client: AsyncOpenAI) -> None:
        self._client = client
        self._tool = responses_tool(request.action_schema, strict=settings.strict_tools)
        self._choice: JsonObject = {"type": "function", "name": COMPUTER_ACTION_TOOL_NAME}
        super().__init__(request, settings, key)

    def body_base(self) -> JsonObject:
        s = self._settings
        body: JsonObject = {"model": s.model, "max_output_tokens": s.max_tokens, "store": False,
                            "tools": [self._tool], "tool_choice": self._choice}
        if s.temperature is not None:
            body["temperature"] = s.temperature
        body.update(s.extra_body)
        return body

    async def _exchange(self, prepared: PreparedRequest) -> Exchange:
        s = self._settings
        return await send(
            self._client.responses.with_raw_response.create,
            model=s.model,
            input=prepared.wire(),
            max_output_tokens=s.max_tokens,
            store=False,
            tools=[self._tool],
            tool_choice=self._choice,
            **({"temperature": s.temperature} if s.temperature is not None else {}),
            extra_body=s.extra_body or None,
        )

    def _parse(self, data: Any, sequence: int) -> ParsedTurn:
        return parse_response(data, sequence)

    def _extra_state(self) -> JsonObject:
        return {"api": "responses"}

    async def aclose(self) -> None:
        await self._client.close()
