"""A wire-level fake of OpenAI-compatible Chat Completions (Fireworks, AWS Mantle).

``POST .../chat/completions`` answers from the scripted queue; ``GET .../models`` and
``GET .../models/{id}`` (ids may contain slashes) answer from :attr:`ChatCompletionsWire.catalog`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from aiohttp import web
from pydantic import JsonValue

from autocad_bench.providers.models import TokenUsage
from autocad_bench.testing.wire import ExtraHandler, RecordedRequest, Reply, ReplySource, WireServer

DEFAULT_USAGE = {"prompt_tokens": 1500, "cached_tokens": 1000, "completion_tokens": 60, "reasoning_tokens": 20}


class ChatCompletionsWire(WireServer):
    """Chat Completions (non-streaming) plus an OpenAI-style model catalog."""

    model_routes = (("POST", "/chat/completions"),)

    def __init__(
        self,
        *,
        default: ReplySource | None = None,
        too_large_above: int | None = None,
        catalog: Iterable[str | Mapping[str, Any]] = (),
        usage: Mapping[str, int] | None = None,
        reply_headers: Mapping[str, str] | None = None,
        reasoning: str | None = None,
        unlisted: Iterable[str] = (),
        keep_bodies: bool = True,
    ) -> None:
        super().__init__(default=default, too_large_above=too_large_above, keep_bodies=keep_bodies)
        self.catalog: list[dict[str, Any]] = [
            {"id": c} if isinstance(c, str) else dict(c) for c in catalog
        ]
        self.usage = dict(usage or DEFAULT_USAGE)
        self.reply_headers = dict(reply_headers or {})
        self.reasoning = reasoning
        self.unlisted = set(unlisted)
        """Catalog ids answered by ``GET /models/{id}`` but left out of the listing (like routers)."""
        self.catalog_error: Reply | None = None
        """When set, every catalog request gets this reply (e.g. a 401)."""

    def completion(self, message: dict[str, Any], *, finish_reason: str = "tool_calls",
                   usage: Mapping[str, int] | None = None) -> dict[str, Any]:
        u = {**self.usage, **(usage or {})}
        return {
            "id": self.next_id("chatcmpl"),
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "wire-fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {
                "prompt_tokens": u["prompt_tokens"],
                "completion_tokens": u["completion_tokens"],
                "total_tokens": u["prompt_tokens"] + u["completion_tokens"],
                "prompt_tokens_details": {"cached_tokens": u["cached_tokens"]},
                "completion_tokens_details": {"reasoning_tokens": u["reasoning_tokens"]},
            },
        }

    def _message(self, content: str | None, calls: list[dict[str, Any]] | None,
                 reasoning: str | None) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": content}
        text = reasoning if reasoning is not None else self.reasoning
        if text is not None:
            message["reasoning_content"] = text
        if calls:
            message["tool_calls"] = calls
        return message

    @staticmethod
    def call(arguments: str, call_id: str, name: str = "computer_action") -> dict[str, Any]:
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}

    def reply(self, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> Reply:
        return Reply.json(body, headers={**self.reply_headers, **(headers or {})})

    def tool_call_reply(self, arguments: JsonValue, *, call_id: str, reasoning: str | None = None,
                        usage: Mapping[str, int] | None = None, headers: Mapping[str, str] | None = None,
                        content: str | None = None) -> Reply:
        call = self.call(json.dumps(arguments, separators=(",", ":")), call_id)
        return self.reply(self.completion(self._message(content, [call], reasoning), usage=usage), headers)

    def text_reply(self, text: str, *, reasoning: str | None = None,
                   usage: Mapping[str, int] | None = None) -> Reply:
        return self.reply(self.completion(self._message(text, None, reasoning), finish_reason="stop", usage=usage))

    def malformed_arguments_reply(self, raw: str, *, call_id: str, usage: Mapping[str, int] | None = None) -> Reply:
        return self.reply(self.completion(self._message(None, [self.call(raw, call_id)], None), usage=usage))

    def refusal_reply(self, text: str, *, usage: Mapping[str, int] | None = None) -> Reply:
        """A message with ``refusal`` set, no content and no tool call."""
        message = {**self._message(None, None, None), "refusal": text}
        return self.reply(self.completion(message, finish_reason="stop", usage=usage))

    def billed_usage(self) -> TokenUsage:
        """Cached tokens are part of ``prompt_tokens``, reasoning tokens part of ``completion_tokens``."""
        u = self.usage
        return TokenUsage(input_tokens=u["prompt_tokens"] - u["cached_tokens"], cached_input_tokens=u["cached_tokens"],
                          output_tokens=u["completion_tokens"], reasoning_tokens=u["reasoning_tokens"])

    def extra_routes(self) -> Mapping[tuple[str, str], ExtraHandler]:
        return {("GET", "/models"): self._list_models}

    def _list_models(self, request: RecordedRequest) -> Reply:
        if self.catalog_error is not None:
            return self.catalog_error
        listed = [self._model(m) for m in self.catalog if m["id"] not in self.unlisted]
        return Reply.json({"object": "list", "data": listed})

    @staticmethod
    def _model(entry: Mapping[str, Any]) -> dict[str, Any]:
        return {"object": "model", "created": 1_700_000_000, "owned_by": "wire-fake", **entry}

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        marker = "/models/"
        if request.method == "GET" and marker in request.path:
            model_id = request.path.split(marker, 1)[1]
            with self._lock:
                self._requests.append(RecordedRequest(
                    method=request.method, path=request.path, query=request.query_string,
                    headers={k.lower(): v for k, v in request.headers.items()}, body=b""))
            found = next((m for m in self.catalog if m["id"] == model_id), None)
            reply = (Reply.json(self._model(found)) if found is not None
                     else self.error_reply(404, f"model {model_id!r} not found"))
            if self.catalog_error is not None:
                reply = self.catalog_error
            return await self._send(request, reply)
        return await super()._dispatch(request)
