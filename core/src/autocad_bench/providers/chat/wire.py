"""Chat Completions wire format: rendering, response parsing and error classification.

Shared by the OpenAI-compatible providers (Fireworks, AWS Mantle). Nothing here imports
the OpenAI SDK: :func:`classify_openai_error` recognizes its exceptions by duck typing
(:func:`~autocad_bench.providers.support.errors.sdk_error_kind`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autocad_bench.actions.schema import COMPUTER_ACTION_DESCRIPTION, COMPUTER_ACTION_TOOL_NAME
from autocad_bench.models import JsonObject
from autocad_bench.providers.chat.history import ImageStore, Record, WireItem, call_summary, image_ref
from autocad_bench.providers.models import ModelTurn, ProviderErrorKind, ProviderRequestError, TokenUsage
from autocad_bench.providers.support.errors import kind_for_status, parse_retry_after, sdk_error_kind
from autocad_bench.providers.support.text import clip

REASONING_KEYS = ("reasoning_content", "reasoning")
"""Assistant fields that carry returned reasoning; echoed back under the same key."""

_MESSAGE_LIMIT = 300

# Body-length and context-length rejections that a compaction can cure. Narrow on purpose:
# any other 400 is a bad request and fails the rollout.
BODY_LENGTH_PATTERN = re.compile(
    r"(request|body|payload|input|prompt|messages?)\b[^.]{0,60}?\b(too (large|long|big)|exceed(s|ed|ing)?)"
    r"|\b(maximum|max)[ _](request|body|payload|input|context)[ _]?(size|length|bytes)"
    r"|\bcontext[ _](length|window)\b",
    re.IGNORECASE,
)


class ChatRenderer:
    """Stored records to Chat Completions messages (images as base64 data URLs)."""

    container_key = "messages"

    def render(self, record: Record, images: ImageStore) -> list[WireItem]:
        # Key order is fixed here, not taken from the record: a checkpoint that went through
        # a key-sorting JSON round trip must still render byte-identical messages.
        role = record.get("role")
        if role == "assistant":
            message: WireItem = {"role": "assistant", "content": record.get("content")}
            for key in REASONING_KEYS:
                if key in record:
                    message[key] = record[key]
            calls = record.get("tool_calls")
            if isinstance(calls, list) and calls:
                message["tool_calls"] = [
                    {"id": c.get("id"), "type": "function",
                     "function": {"name": c.get("function", {}).get("name"),
                                  "arguments": c.get("function", {}).get("arguments")}}
                    for c in calls if isinstance(c, dict)
                ]
            return [message]
        if role == "tool":
            return [{"role": "tool", "tool_call_id": record.get("tool_call_id"), "content": record.get("content")}]
        if not isinstance(record.get("content"), list):
            return [{"role": role, "content": record.get("content")}]
        parts: list[WireItem] = []
        for part in record["content"]:
            if part.get("type") == "image_ref":
                ref = image_ref(part)
                url = f"data:{ref.media_type};base64,{images.base64(ref)}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
            else:
                parts.append({"type": "text", "text": part.get("text", "")})
        return [{"role": "user", "content": parts}]


def chat_tool(schema: JsonObject, *, strict: bool) -> JsonObject:
    """The forced ``computer_action`` tool in Chat Completions form (nested under ``function``)."""
    function: JsonObject = {
        "name": COMPUTER_ACTION_TOOL_NAME,
        "description": COMPUTER_ACTION_DESCRIPTION,
        "parameters": schema,
    }
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def chat_tool_choice() -> JsonObject:
    """The Chat Completions ``tool_choice`` that forces a call to the computer-action tool."""
    return {"type": "function", "function": {"name": COMPUTER_ACTION_TOOL_NAME}}


@dataclass(frozen=True, slots=True)
class ParsedTurn:
    """A response as the harness sees it (``turn``) and as history keeps it (``assistant``)."""

    turn: ModelTurn
    assistant: Record
    call_id: str | None
    call_summary: str
    finish_reason: str | None
    reasoning_chars: int
    raw_usage: JsonObject


def tool_use_id(sequence: int, call_id: str | None) -> str:
    """Unique per rollout even when a model reuses call ids across turns (Kimi does)."""
    return f"r{sequence:05d}-{call_id}" if call_id else f"r{sequence:05d}-no-call"


def decode_arguments(raw: Any) -> tuple[Any, str | None, str]:
    """``(action_input, malformed, arguments as sent back)`` for a tool call's arguments."""
    if isinstance(raw, dict):
        return raw, None, json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
    if not isinstance(raw, str):
        return None, f"the computer_action arguments are {type(raw).__name__}, not a JSON string", "{}"
    try:
        value = json.loads(raw)
    except ValueError as error:
        return None, f"the computer_action arguments are not valid JSON ({error})", raw
    if not isinstance(value, dict):
        return None, "the computer_action arguments are not a JSON object", raw
    return value, None, raw


def parse_chat_completion(data: Any, sequence: int) -> ParsedTurn:
    """Interpret a Chat Completions response body (already JSON-decoded) defensively."""
    body = data if isinstance(data, dict) else {}
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    assert isinstance(message, dict)
    content = _text(message.get("content"))
    reasoning_key, reasoning = next(
        ((k, message[k]) for k in REASONING_KEYS if isinstance(message.get(k), str) and message[k]), (None, None)
    )
    finish = choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None
    usage, raw_usage = chat_usage(body.get("usage"))
    response_id = body.get("id") if isinstance(body.get("id"), str) else None
    calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    assistant: Record = {"role": "assistant", "content": content if content else None}
    if reasoning_key is not None:
        assistant[reasoning_key] = reasoning
    reply = Reply(sequence, assistant, usage, raw_usage, response_id, content, finish, len(reasoning or ""))
    if not calls:
        return reply.without_call(None if choices else "the response has no choices")
    first = calls[0]
    function = first.get("function") if isinstance(first.get("function"), dict) else {}
    assert isinstance(function, dict)
    raw_name = function.get("name")
    name = raw_name if isinstance(raw_name, str) else ""
    raw_id = first.get("id")
    call_id = raw_id if isinstance(raw_id, str) and raw_id else f"call-{sequence}"
    return reply.with_call(name, call_id, function.get("arguments"), len(calls))


@dataclass(frozen=True, slots=True)
class Reply:
    """What any wire format's response parser found; builds the :class:`ParsedTurn`."""

    sequence: int
    assistant: Record
    """The history record of the reply so far (text, reasoning); the call is added here."""
    usage: TokenUsage
    raw_usage: JsonObject
    response_id: str | None
    text: str
    finish_reason: str | None
    reasoning_chars: int = 0

    def without_call(self, problem: str | None) -> ParsedTurn:
        """The turn of a response without a tool call (``problem``: why it is malformed, if it is)."""
        if not self.text:
            self.assistant["content"] = "(no tool call)"
        turn = ModelTurn(tool_use_id=tool_use_id(self.sequence, None), action_input=None, malformed=problem,
                         usage=self.usage, response_id=self.response_id, text=self.text,
                         stop_reason=self.finish_reason)
        return ParsedTurn(turn, self.assistant, None, "(no computer_action call)", self.finish_reason,
                          self.reasoning_chars, self.raw_usage)

    def with_call(self, name: str, call_id: str, raw_arguments: Any, calls: int) -> ParsedTurn:
        """The turn of the first of ``calls`` tool calls; only one ``computer_action`` call is usable."""
        action_input, malformed, arguments = decode_arguments(raw_arguments)
        if name != COMPUTER_ACTION_TOOL_NAME:
            action_input, malformed = None, f"the response called {name or 'an unnamed tool'!r}, not computer_action"
        elif calls > 1:
            action_input, malformed = None, f"{calls} tool calls in one response; exactly one is allowed"
        self.assistant["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]
        turn = ModelTurn(tool_use_id=tool_use_id(self.sequence, call_id), action_input=action_input,
                         malformed=malformed, usage=self.usage, response_id=self.response_id, text=self.text,
                         stop_reason=self.finish_reason)
        return ParsedTurn(turn, self.assistant, call_id, call_summary(name or "tool", arguments),
                          self.finish_reason, self.reasoning_chars, self.raw_usage)


def chat_usage(raw: Any) -> tuple[TokenUsage, JsonObject]:
    """Token usage of an OpenAI-style ``usage`` object; cached tokens are part of prompt tokens."""
    return token_usage(raw, ("prompt_tokens", "completion_tokens"),
                       ("prompt_tokens_details", "completion_tokens_details"))


def token_usage(raw: Any, counts: tuple[str, str], details: tuple[str, str]) -> tuple[TokenUsage, JsonObject]:
    """Token usage of a ``usage`` object whose (input, output) counts and details have the given keys.

    Cached tokens are part of the input count, reasoning tokens part of the output count.
    The summary always uses the Chat Completions names.
    """
    usage = raw if isinstance(raw, dict) else {}
    prompt = _count(usage.get(counts[0]))
    completion = _count(usage.get(counts[1]))
    prompt_details = usage.get(details[0]) if isinstance(usage.get(details[0]), dict) else {}
    output_details = usage.get(details[1]) if isinstance(usage.get(details[1]), dict) else {}
    assert isinstance(prompt_details, dict) and isinstance(output_details, dict)
    cached = min(prompt, _count(prompt_details.get("cached_tokens")))
    reasoning = min(completion, _count(output_details.get("reasoning_tokens")))
    summary: JsonObject = {"prompt_tokens": prompt, "cached_tokens": cached, "completion_tokens": completion,
                           "reasoning_tokens": reasoning}
    return TokenUsage(input_tokens=prompt - cached, cached_input_tokens=cached, output_tokens=completion,
                      reasoning_tokens=reasoning), summary


def classify_status(status: int, message: str, headers: Mapping[str, str]) -> ProviderRequestError:
    """The retry class of an HTTP error status (see docs/providers-chat-and-aws.md)."""
    retry_after = parse_retry_after(headers)
    text = f"HTTP {status}: {clip(message, _MESSAGE_LIMIT)}"
    if status == 425:
        # 425 Too Early: Fireworks Fast answers it while swapping a checkpoint. It is a
        # server-side condition that clears by itself, so it is retried like a 5xx
        # (indefinitely, capped backoff) rather than spending the transient budget.
        kind = ProviderErrorKind.SERVER_ERROR
    elif status in (400, 422) and BODY_LENGTH_PATTERN.search(message):
        kind = ProviderErrorKind.REQUEST_TOO_LARGE
    else:
        kind = kind_for_status(status)
    if kind in (ProviderErrorKind.REQUEST_TOO_LARGE, ProviderErrorKind.FATAL):
        retry_after = None
    return ProviderRequestError(kind, text, status=status, retry_after_s=retry_after)


def classify_openai_error(exc: BaseException) -> ProviderRequestError | None:
    """Map an OpenAI SDK exception (duck-typed) to its retry class; ``None`` for anything unexpected."""
    kind = sdk_error_kind(exc)
    if kind == "status":
        sdk: Any = exc
        return classify_status(sdk.status_code, error_message(sdk.body, sdk.message),
                               dict(sdk.response.headers.items()))
    if kind == "timeout":
        return ProviderRequestError(ProviderErrorKind.TRANSIENT, "request timed out")
    if kind == "connection":
        cause = exc.__cause__ or exc.__context__
        detail = type(cause).__name__ if cause is not None else "connection failed"
        return ProviderRequestError(ProviderErrorKind.TRANSIENT, f"connection error ({detail})")
    return None


def error_message(body: Any, fallback: str) -> str:
    """The human message of an error body (``{"error": {"message": ...}}`` and variants)."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            for key in ("message", "Message", "detail"):
                if isinstance(inner.get(key), str):
                    return str(inner[key])
        elif isinstance(inner, str):
            return inner
        for key in ("message", "Message", "detail"):
            if isinstance(body.get(key), str):
                return str(body[key])
    if isinstance(body, str) and body:
        return body
    return fallback


def pick_headers(headers: Iterable[tuple[str, str]], prefixes: tuple[str, ...],
                 names: frozenset[str]) -> dict[str, str]:
    """Allow-listed response headers for telemetry (never request headers, never cookies)."""
    picked: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        if key in names or key.startswith(prefixes):
            picked[key] = value[:256]
    return picked


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def advertised_image_input(entry: Mapping[str, Any]) -> bool | None:
    """Whether a catalog entry advertises image input; ``None`` when it says nothing either way.

    OpenAI-compatible catalogs disagree on the field, so the known spellings are all read.
    """
    for key in ("supports_image_input", "supports_vision", "vision"):
        if isinstance(entry.get(key), bool):
            return bool(entry[key])
    candidates: list[Any] = [entry.get("input_modalities"), entry.get("inputModalities")]
    for nested in ("modalities", "architecture", "capabilities"):
        inner = entry.get(nested)
        if isinstance(inner, Mapping):
            candidates += [inner.get("input"), inner.get("input_modalities"), inner.get("inputModalities")]
            for key in ("vision", "image_input", "supports_image_input"):
                if isinstance(inner.get(key), bool):
                    return bool(inner[key])
    for value in candidates:
        if isinstance(value, list):
            return any(isinstance(v, str) and v.lower() in ("image", "images", "vision") for v in value)
    return None
