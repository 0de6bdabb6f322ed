"""A wire-level fake of Bedrock: runtime ``Converse`` and the control-plane catalog, for boto3.

boto3 is pointed here with ``endpoint_url``; replies use the REST-JSON error convention
(``x-amzn-ErrorType`` header plus ``{"message": ...}``) so botocore raises real ``ClientError``s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

from aiohttp import web
from pydantic import JsonValue

from autocad_bench.providers.models import TokenUsage
from autocad_bench.testing.wire import ExtraHandler, RecordedRequest, Reply, ReplySource, WireServer

ERROR_CODES = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    409: "ConflictException",
    413: "ValidationException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    502: "ServiceUnavailableException",
    503: "ServiceUnavailableException",
}


class ConverseWire(WireServer):
    """``POST /model/{id}/converse``; ``GET /foundation-models``; ``GET /inference-profiles/{id}``."""

    model_routes = (("POST", "/converse"),)

    def __init__(self, *, default: ReplySource | None = None, foundation: Iterable[Mapping[str, Any]] = (),
                 profiles: Mapping[str, Mapping[str, Any]] | None = None,
                 usage: Mapping[str, int] | None = None, keep_bodies: bool = True) -> None:
        super().__init__(default=default, keep_bodies=keep_bodies)
        self.foundation = [dict(f) for f in foundation]
        self.profiles = {k: dict(v) for k, v in (profiles or {}).items()}
        self.usage = dict(usage or {"inputTokens": 1800, "outputTokens": 70, "cacheReadInputTokens": 0,
                                    "cacheWriteInputTokens": 0})

    def body(self, content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
        total = self.usage["inputTokens"] + self.usage["outputTokens"]
        return {"output": {"message": {"role": "assistant", "content": content}}, "stopReason": stop,
                "usage": {**self.usage, "totalTokens": total}, "metrics": {"latencyMs": 321}}

    def tool_call_reply(self, arguments: JsonValue, *, call_id: str, text: str | None = None,
                        name: str = "computer_action") -> Reply:
        content: list[dict[str, Any]] = [{"text": text}] if text else []
        content.append({"toolUse": {"toolUseId": call_id, "name": name, "input": arguments}})
        return Reply.json(self.body(content, "tool_use"), headers={"x-amzn-RequestId": self.next_id("req")})

    def text_reply(self, text: str) -> Reply:
        return Reply.json(self.body([{"text": text}], "end_turn"))

    def malformed_arguments_reply(self, raw: str, *, call_id: str) -> Reply:
        use = {"toolUse": {"toolUseId": call_id, "name": "computer_action", "input": raw}}
        return Reply.json(self.body([use], "tool_use"))

    def refusal_reply(self, text: str) -> Reply:
        """A response stopped by the content filter (``stopReason: content_filtered``), text only."""
        return Reply.json(self.body([{"text": text}], "content_filtered"))

    def billed_usage(self) -> TokenUsage:
        """Converse reports cache reads and writes apart from ``inputTokens``."""
        u = self.usage
        return TokenUsage(input_tokens=u["inputTokens"], cached_input_tokens=u["cacheReadInputTokens"],
                          cache_write_tokens=u["cacheWriteInputTokens"], output_tokens=u["outputTokens"])

    def error_reply(self, status: int, message: str, *, headers: Mapping[str, str] | None = None) -> Reply:
        code = ERROR_CODES.get(status, "InternalServerException" if status >= 500 else "ValidationException")
        return Reply.json({"message": message}, status=status,
                          headers={"x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/", **(headers or {})})

    def extra_routes(self) -> Mapping[tuple[str, str], ExtraHandler]:
        return {("GET", "/foundation-models"): lambda request: Reply.json({"modelSummaries": self.foundation})}

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        marker = "/inference-profiles/"
        if request.method == "GET" and marker in request.path:
            profile_id = unquote(request.path.split(marker, 1)[1])
            with self._lock:
                self._requests.append(RecordedRequest(
                    method=request.method, path=request.path, query=request.query_string,
                    headers={k.lower(): v for k, v in request.headers.items()}, body=b""))
            found = self.profiles.get(profile_id)
            reply = Reply.json(found) if found is not None else self.error_reply(404, f"{profile_id} not found")
            return await self._send(request, reply)
        return await super()._dispatch(request)
