"""Chat Completions wire format: rendering, response parsing and error classification.

Shared by the OpenAI-compatible providers (Fireworks, AWS Mantle); the same file is
shipped in each distribution and a test keeps the copies identical. Nothing here imports
the OpenAI SDK except :func:`classify_openai_error`, which is only called by a session.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autocad_bench.actions.schema import COMPUTER_ACTION_DESCRIPTION, COMPUTER_ACTION_TOOL_NAME
from autocad_bench.models import JsonObject
from autocad_bench.providers.models import ModelTurn, ProviderErrorKind, ProviderRequestError, TokenUsage

from .history import ImageStore, Record, WireItem, call_summary, image_ref

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
    if not calls:
        if not content:
            assistant["content"] = "(no tool call)"
        problem = None if choices else "the response has no choices"
        turn = ModelTurn(tool_use_id=tool_use_id(sequence, None), action_input=None, malformed=problem,
                         usage=usage, response_id=response_id, text=content, stop_reason=finish)
        return ParsedTurn(turn, assistant, None, "(no computer_action call)", finish,
                          len(reasoning or ""), raw_usage)
    first = calls[0]
    function = first.get("function") if isinstance(first.get("function"), dict) else {}
    assert isinstance(function, dict)
    name = function.get("name") if isinstance(function.get("name"), str) else ""
    call_id = first.get("id") if isinstance(first.get("id"), str) and first.get("id") else f"call-{sequence}"
    action_input, malformed, arguments = decode_arguments(function.get("arguments"))
    if name != COMPUTER_ACTION_TOOL_NAME:
        action_input, malformed = None, f"the response called {name or 'an unnamed tool'!r}, not computer_action"
    elif len(calls) > 1:
        action_input, malformed = None, f"{len(calls)} tool calls in one response; exactly one is allowed"
    assistant["tool_calls"] = [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]
    turn = ModelTurn(tool_use_id=tool_use_id(sequence, call_id), action_input=action_input, malformed=malformed,
                     usage=usage, response_id=response_id, text=content, stop_reason=finish)
    return ParsedTurn(turn, assistant, call_id, call_summary(name or "tool", arguments), finish,
                      len(reasoning or ""), raw_usage)


def chat_usage(raw: Any) -> tuple[TokenUsage, JsonObject]:
    """Token usage of an OpenAI-style ``usage`` object; cached tokens are part of prompt tokens."""
    usage = raw if isinstance(raw, dict) else {}
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    prompt_details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
    output_details = (usage.get("completion_tokens_details")
                      if isinstance(usage.get("completion_tokens_details"), dict) else {})
    assert isinstance(prompt_details, dict) and isinstance(output_details, dict)
    cached = min(prompt, _count(prompt_details.get("cached_tokens")))
    reasoning = min(completion, _count(output_details.get("reasoning_tokens")))
    summary: JsonObject = {"prompt_tokens": prompt, "cached_tokens": cached, "completion_tokens": completion,
                           "reasoning_tokens": reasoning}
    return TokenUsage(input_tokens=prompt - cached, cached_input_tokens=cached, output_tokens=completion,
                      reasoning_tokens=reasoning), summary


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date) in seconds; ``None`` if absent or bad."""
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = _number(lowered.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000.0
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def classify_status(status: int, message: str, headers: Mapping[str, str]) -> ProviderRequestError:
    """The retry class of an HTTP error status (see docs/providers-chat-and-aws.md)."""
    retry_after = retry_after_seconds(headers)
    text = f"HTTP {status}: {_clip(message)}"
    if status == 429:
        kind = ProviderErrorKind.RATE_LIMITED
    elif status == 425 or status >= 500:
        # 425 Too Early: Fireworks Fast answers it while swapping a checkpoint. It is a
        # server-side condition that clears by itself, so it is retried like a 5xx
        # (indefinitely, capped backoff) rather than spending the transient budget.
        kind = ProviderErrorKind.SERVER_ERROR
    elif status in (408, 409):
        kind = ProviderErrorKind.TRANSIENT
    elif status == 413 or (status in (400, 422) and BODY_LENGTH_PATTERN.search(message)):
        kind = ProviderErrorKind.REQUEST_TOO_LARGE
    else:
        kind = ProviderErrorKind.FATAL
    if kind in (ProviderErrorKind.REQUEST_TOO_LARGE, ProviderErrorKind.FATAL):
        retry_after = None
    return ProviderRequestError(kind, text, status=status, retry_after_s=retry_after)


def classify_openai_error(exc: Exception) -> ProviderRequestError | None:
    """Map an OpenAI SDK exception to its retry class; ``None`` for anything unexpected."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        return classify_status(exc.status_code, error_message(exc.body, exc.message),
                               dict(exc.response.headers.items()))
    if isinstance(exc, openai.APITimeoutError):
        return ProviderRequestError(ProviderErrorKind.TRANSIENT, "request timed out")
    if isinstance(exc, openai.APIConnectionError):
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


def _number(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


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
