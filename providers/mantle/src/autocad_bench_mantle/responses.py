"""Mantle Responses API (``POST /v1/responses``) for models whose catalog entry advertises it.

The history is the same append-only :class:`~.history.Conversation` as Chat Completions,
rendered as Responses input items: user messages with ``input_text``/``input_image``
parts, the assistant's ``function_call`` and the controller's ``function_call_output``.
Requests are stateless (``store: false``). Tools use controller-side validation (no strict
flag) until a deployed model is verified to accept it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from autocad_bench.actions.schema import COMPUTER_ACTION_DESCRIPTION, COMPUTER_ACTION_TOOL_NAME
from autocad_bench.models import JsonObject
from autocad_bench.providers.models import ModelTurn, SessionRequest, TokenUsage

from .chat_session import HistorySession, SessionSettings, failure
from .chat_wire import ParsedTurn, decode_arguments, tool_use_id
from .history import ImageStore, PreparedRequest, Record, WireItem, call_summary, image_ref

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
    usage, raw_usage = _usage(body.get("usage"))
    response_id = body.get("id") if isinstance(body.get("id"), str) else None
    status = body.get("status") if isinstance(body.get("status"), str) else None
    assistant: Record = {"role": "assistant", "content": text or None}
    if not calls:
        if not text:
            assistant["content"] = "(no tool call)"
        problem = None if output or body.get("status") == "completed" else "the response has no output"
        turn = ModelTurn(tool_use_id=tool_use_id(sequence, None), action_input=None, malformed=problem,
                         usage=usage, response_id=response_id, text=text, stop_reason=status)
        return ParsedTurn(turn, assistant, None, "(no computer_action call)", status, 0, raw_usage)
    first = calls[0]
    name = first.get("name") if isinstance(first.get("name"), str) else ""
    call_id = first.get("call_id") if isinstance(first.get("call_id"), str) and first["call_id"] else (
        f"call-{sequence}")
    action_input, malformed, arguments = decode_arguments(first.get("arguments"))
    if name != COMPUTER_ACTION_TOOL_NAME:
        action_input, malformed = None, f"the response called {name or 'an unnamed tool'!r}, not computer_action"
    elif len(calls) > 1:
        action_input, malformed = None, f"{len(calls)} tool calls in one response; exactly one is allowed"
    assistant["tool_calls"] = [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]
    turn = ModelTurn(tool_use_id=tool_use_id(sequence, call_id), action_input=action_input, malformed=malformed,
                     usage=usage, response_id=response_id, text=text, stop_reason=status)
    return ParsedTurn(turn, assistant, call_id, call_summary(name or "tool", arguments), status, 0, raw_usage)


def _usage(raw: Any) -> tuple[TokenUsage, JsonObject]:
    usage = raw if isinstance(raw, dict) else {}
    prompt = _count(usage.get("input_tokens"))
    output = _count(usage.get("output_tokens"))
    details = usage.get("input_tokens_details") if isinstance(usage.get("input_tokens_details"), dict) else {}
    out_details = usage.get("output_tokens_details") if isinstance(usage.get("output_tokens_details"), dict) else {}
    assert isinstance(details, dict) and isinstance(out_details, dict)
    cached = min(prompt, _count(details.get("cached_tokens")))
    reasoning = min(output, _count(out_details.get("reasoning_tokens")))
    summary: JsonObject = {"prompt_tokens": prompt, "cached_tokens": cached, "completion_tokens": output,
                           "reasoning_tokens": reasoning}
    return TokenUsage(input_tokens=prompt - cached, cached_input_tokens=cached, output_tokens=output,
                      reasoning_tokens=reasoning), summary


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


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

    async def _exchange(self, prepared: PreparedRequest) -> tuple[bytes, Iterable[tuple[str, str]], int]:
        import openai
        from openai import omit

        s = self._settings
        try:
            raw = await self._client.responses.with_raw_response.create(
                model=s.model,
                input=cast(Any, prepared.wire()),
                max_output_tokens=s.max_tokens,
                store=False,
                tools=cast(Any, [self._tool]),
                tool_choice=cast(Any, self._choice),
                temperature=s.temperature if s.temperature is not None else omit,
                extra_body=s.extra_body or None,
            )
        except openai.APIError as exc:
            raise failure(exc) from None
        return raw.content, list(raw.headers.items()), raw.status_code

    def _parse(self, data: Any, sequence: int) -> ParsedTurn:
        return parse_response(data, sequence)

    def _extra_state(self) -> JsonObject:
        return {"api": "responses"}

    async def aclose(self) -> None:
        await self._client.close()
