"""A wire fake of the Anthropic Messages API (``POST /v1/messages``, ``GET /v1/models``).

The real ``anthropic`` SDK is pointed at it through ``base_url``. Replies are non-streaming
Message objects in the API's JSON shape; errors use the API's ``{"type": "error", ...}``
envelope. :func:`estimated_input_tokens` gives a deterministic token estimate of a recorded
request so scripted replies can report realistic usage (and trigger compaction).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiohttp import web
from pydantic import JsonValue

from autocad_bench.providers.models import TokenUsage
from autocad_bench.testing.wire import RecordedRequest, Reply, WireServer

IMAGE_TOKENS = 1600
"""Tokens the fake charges per image (a 1920x1080 screenshot is about this much)."""

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def estimated_input_tokens(body: Mapping[str, Any], *, image_tokens: int = IMAGE_TOKENS) -> int:
    """A deterministic input-token estimate: 1 token per 4 characters of text, a flat cost per image.

    Like the API with server compaction, blocks before the last ``compaction`` block are not counted.
    """
    messages = list(body.get("messages") or [])
    start = 0
    for i, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "compaction" for b in content):
            start = i
    total = sum(len(b.get("text", "")) for b in body.get("system") or []) // 4

    def count(block: Any) -> int:
        if not isinstance(block, dict):
            return len(str(block)) // 4
        kind = block.get("type")
        if kind == "image":
            return image_tokens
        if kind == "text":
            return len(block.get("text", "")) // 4
        if kind == "compaction":
            return len(block.get("content") or "") // 4
        if kind == "tool_result":
            inner = block.get("content")
            return sum(count(b) for b in inner) if isinstance(inner, list) else len(str(inner)) // 4
        if kind == "tool_use":
            return len(json.dumps(block.get("input"))) // 4 + 10
        return len(json.dumps(block)) // 4

    for message in messages[start:]:
        content = message.get("content")
        if isinstance(content, list):
            total += sum(count(b) for b in content)
        else:
            total += len(str(content)) // 4
    return total


class MessagesWire(WireServer):
    """``POST /v1/messages`` (and the beta ``?beta=true`` form) plus the model catalog."""

    model_routes = (("POST", "/v1/messages"),)

    def __init__(self, *, default: Any = None, too_large_above: int | None = None,
                 catalog: Mapping[str, Mapping[str, Any]] | Iterable[str] = (),
                 usage: Mapping[str, int] | None = None) -> None:
        super().__init__(default=default, too_large_above=too_large_above)
        self.catalog: dict[str, dict[str, Any]] = (
            {k: dict(v) for k, v in catalog.items()} if isinstance(catalog, Mapping)
            else {m: {} for m in catalog}
        )
        self.usage = dict(usage or {"input_tokens": 1200, "cache_read_input_tokens": 0,
                                    "cache_creation_input_tokens": 0, "output_tokens": 50})

    # --- message bodies -------------------------------------------------------------------

    def message_body(self, content: list[dict[str, Any]], *, stop_reason: str = "tool_use",
                     usage: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {
            "id": self.next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": "wire-fake-claude",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {**self.usage, **(usage or {})},
        }

    @staticmethod
    def tool_use_block(arguments: JsonValue, *, call_id: str, name: str = "computer_action") -> dict[str, Any]:
        return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}

    def tool_call_reply(self, arguments: JsonValue, *, call_id: str, usage: Mapping[str, Any] | None = None,
                        before: list[dict[str, Any]] | None = None, stop_reason: str = "tool_use") -> Reply:
        blocks = [*(before or []), self.tool_use_block(arguments, call_id=call_id)]
        return Reply.json(self.message_body(blocks, stop_reason=stop_reason, usage=usage))

    def text_reply(self, text: str, *, usage: Mapping[str, Any] | None = None) -> Reply:
        return Reply.json(self.message_body([{"type": "text", "text": text}], stop_reason="end_turn", usage=usage))

    def malformed_arguments_reply(self, raw: str, *, call_id: str, usage: Mapping[str, Any] | None = None) -> Reply:
        """A call cut off at ``max_tokens``: the API returns what it parsed of the input (here ``{}``)."""
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = {}
        return Reply.json(self.message_body([self.tool_use_block(parsed, call_id=call_id)],
                                            stop_reason="max_tokens", usage=usage))

    def refusal_reply(self, text: str, *, usage: Mapping[str, Any] | None = None) -> Reply:
        """A response the model ended with ``stop_reason: refusal`` (its text, no tool call)."""
        return Reply.json(self.message_body([{"type": "text", "text": text}], stop_reason="refusal", usage=usage))

    def billed_usage(self) -> TokenUsage:
        """Messages counts uncached input, cache reads and cache writes apart."""
        u = self.usage
        return TokenUsage(input_tokens=u["input_tokens"], cached_input_tokens=u["cache_read_input_tokens"],
                          cache_write_tokens=u["cache_creation_input_tokens"], output_tokens=u["output_tokens"])

    def error_reply(self, status: int, message: str, *, headers: Mapping[str, str] | None = None) -> Reply:
        return Reply.json(
            {"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": message},
             "request_id": "req_wirefake"},
            status=status,
            headers={"request-id": "req_wirefake", **(headers or {})},
        )

    def reply_with(self, build: Callable[[RecordedRequest], Reply]) -> Callable[[RecordedRequest], Reply]:
        """Identity helper that documents a dynamic reply in a ``push``."""
        return build

    # --- catalog ---------------------------------------------------------------------------------

    def model_info(self, model_id: str) -> dict[str, Any]:
        extra = self.catalog.get(model_id, {})
        capabilities = {
            "image_input": {"supported": extra.get("image_input", True)},
            "structured_outputs": {"supported": True},
            "context_management": {
                "supported": True,
                "compact_20260112": {"supported": extra.get("compaction", True)},
            },
        }
        return {
            "id": model_id,
            "type": "model",
            "display_name": model_id,
            "created_at": "2026-01-01T00:00:00Z",
            "lifecycle": extra.get("lifecycle", "active"),
            "capabilities": capabilities,
        }

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        marker = "/v1/models"
        if request.method == "GET" and marker in request.path:
            tail = request.path.split(marker, 1)[1].strip("/")
            with self._lock:
                self._requests.append(RecordedRequest(
                    method=request.method, path=request.path, query=request.query_string,
                    headers={k.lower(): v for k, v in request.headers.items()}, body=b""))
            if not tail:
                reply = Reply.json({"data": [self.model_info(m) for m in self.catalog], "has_more": False,
                                    "first_id": None, "last_id": None})
            elif tail in self.catalog:
                reply = Reply.json(self.model_info(tail))
            else:
                reply = self.error_reply(404, f"model: {tail}")
            return await self._send(request, reply)
        return await super()._dispatch(request)
