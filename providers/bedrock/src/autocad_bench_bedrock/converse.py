"""One rollout over Bedrock ``Converse`` with a compact, rebuilt controller history.

Every request is rebuilt from controller state rather than appended: the first user
message holds the task, the fixed reference image and (once older exchanges were dropped)
a bounded summary of their outcomes; then the last ``history_turns`` complete
tool-use/tool-result exchanges as text; then the latest tool use and its result together
with the only live screenshot. Requests therefore carry exactly two images and bounded
text, whatever the rollout length. The forced tool has no strict flag: the controller
validates every batch.

boto3 is synchronous, so each request runs in a worker thread; botocore's own retries are
off (one attempt), and every failure is classified by :mod:`.errors`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from pydantic import JsonValue

from autocad_bench.actions.schema import COMPUTER_ACTION_DESCRIPTION, COMPUTER_ACTION_TOOL_NAME
from autocad_bench.models import ArtifactRef, JsonObject
from autocad_bench.providers.models import ModelTurn, Observation, ProviderRequestError, SessionRequest, TokenUsage
from autocad_bench.providers.session import ProviderSession
from autocad_bench.providers.support.text import clip
from autocad_bench.storage import append_jsonl

from .errors import classify_botocore

STATE_VERSION = 1
TELEMETRY_FILE = "provider_telemetry.jsonl"
_HEADER_PREFIXES = ("x-amzn-bedrock-",)
_HEADER_NAMES = frozenset({"x-amzn-requestid", "retry-after"})
_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}


class FrameChecksumError(ValueError):
    """An image file no longer matches its recorded SHA-256; nothing was sent."""


@dataclass(frozen=True, slots=True)
class ConverseSettings:
    """The options of one Converse session, resolved by the provider from the model's options."""

    model: str
    max_tokens: int
    temperature: float | None
    tool_choice: str
    history_turns: int
    summary_outcomes: int
    cache_point: bool
    telemetry: bool
    outcome_chars: int = 400
    call_chars: int = 240


class ConverseSession(ProviderSession):
    """Bedrock Converse for one rollout; ``client`` is a boto3 ``bedrock-runtime`` client."""

    def __init__(self, request: SessionRequest, settings: ConverseSettings, client: Any) -> None:
        self._request = request
        self._settings = settings
        self._client = client
        self._images: dict[str, bytes] = {}
        self._exchanges: list[JsonObject] = []
        self._dropped: list[JsonObject] = []
        self._awaiting: JsonObject | None = None
        self._responses = 0
        self.last_request_bytes = 0
        self.last_messages = 0
        self.adapter_cpu_s = 0.0
        self._sent_bytes = 0
        client.meta.events.register("before-send.bedrock-runtime.Converse", self._measure)
        if request.resume_state is not None:
            self._restore(request.resume_state)

    # --- ProviderSession ------------------------------------------------------------------

    async def next_turn(self, observation: Observation) -> ModelTurn:
        cpu = time.thread_time()
        kwargs = self._request_kwargs(observation)
        cpu = time.thread_time() - cpu
        started = time.monotonic()
        try:
            response = await asyncio.to_thread(self._client.converse, **kwargs)
        except Exception as exc:
            error = classify_botocore(exc)
            if error is None:
                raise
            headers = _error_headers(exc)
            self._telemetry({"error": error.kind.value, "status": error.status, "message": str(error),
                             "retry_after_s": error.retry_after_s, **self._facts(kwargs)}, headers)
            raise error from None
        elapsed = time.monotonic() - started
        resumed = time.thread_time()
        turn, assistant, call_id, summary, usage_raw = self._parse(response)
        self._commit(observation, assistant, call_id, summary)
        self.adapter_cpu_s = cpu + time.thread_time() - resumed
        meta = response.get("ResponseMetadata", {}) if isinstance(response, dict) else {}
        self._telemetry({
            "status": meta.get("HTTPStatusCode"), "elapsed_s": round(elapsed, 4),
            "response_id": turn.response_id, "finish_reason": turn.stop_reason, "malformed": turn.malformed,
            "tool_call": call_id is not None, "usage": usage_raw,
            "latency_ms": (response.get("metrics") or {}).get("latencyMs") if isinstance(response, dict) else None,
            "adapter_cpu_s": round(self.adapter_cpu_s, 6), **self._facts(kwargs),
        }, meta.get("HTTPHeaders", {}) or {})
        return turn

    def shrink(self) -> bool:
        """After a size rejection, fold every retained exchange into the outcome summary."""
        if not self._exchanges:
            return False
        s = self._settings
        for old in self._exchanges:
            self._dropped.append({"turn": old["turn"], "call": old["summary"],
                                  "result": clip(str(old["result"]), s.outcome_chars)})
        self._exchanges = []
        self._dropped = self._dropped[-s.summary_outcomes:]
        return True

    def checkpoint(self) -> JsonObject:
        state: JsonObject = {
            "version": STATE_VERSION,
            "exchanges": list(self._exchanges),
            "dropped": list(self._dropped),
            "awaiting": self._awaiting,
            "responses": self._responses,
        }
        return copy.deepcopy(state)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()

    # --- request --------------------------------------------------------------------------

    def _request_kwargs(self, observation: Observation) -> dict[str, Any]:
        s = self._settings
        tool_choice: JsonObject = {"tool": {"name": COMPUTER_ACTION_TOOL_NAME}} if s.tool_choice == "tool" else {
            "any": {}}
        kwargs: dict[str, Any] = {
            "modelId": s.model,
            "messages": self._messages(observation),
            "inferenceConfig": {"maxTokens": s.max_tokens,
                                **({"temperature": s.temperature} if s.temperature is not None else {})},
            "toolConfig": {
                "tools": [{"toolSpec": {"name": COMPUTER_ACTION_TOOL_NAME, "description": COMPUTER_ACTION_DESCRIPTION,
                                        "inputSchema": {"json": self._request.action_schema}}}],
                "toolChoice": tool_choice,
            },
        }
        return kwargs

    def _messages(self, observation: Observation) -> list[dict[str, Any]]:
        request = self._request
        display = request.display
        first: list[dict[str, Any]] = [
            {"text": f"{request.task_prompt}\n\nYou operate a {display.width}x{display.height} CAD desktop only "
                     "through the computer_action tool. The first image is the fixed reference of the drawing to "
                     "produce; the last image is the live desktop."},
            {"text": "Reference:"},
            self._image(request.reference),
        ]
        if self._settings.cache_point:
            first.append({"cachePoint": {"type": "default"}})
        if self._dropped:
            lines = ["Earlier turns were removed from this conversation. Their controller outcomes, oldest first:"]
            lines += [f"- turn {o['turn']}: {o['call']} -> {o['result']}" for o in self._dropped]
            first.append({"text": "\n".join(lines)})
        desktop = [{"text": f"Current desktop. Actions left in this rollout: {observation.remaining_actions}."},
                   self._image(observation.frame)]
        messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
        for exchange in self._exchanges:
            messages.append({"role": "assistant", "content": _blocks(exchange["assistant"])})
            answer = _answer(exchange.get("tool_use_id"), str(exchange["result"]))
            messages.append({"role": "user", "content": [answer]})
        if self._awaiting is None:
            if observation.feedback:
                first.append({"text": observation.feedback})
            first.extend(desktop)
            return messages
        feedback = observation.feedback or "No controller feedback."
        messages.append({"role": "assistant", "content": _blocks(self._awaiting["assistant"])})
        messages.append({"role": "user", "content": [_answer(self._awaiting.get("tool_use_id"), feedback), *desktop]})
        return messages

    def _image(self, ref: ArtifactRef) -> dict[str, Any]:
        data = self._images.get(ref.sha256)
        if data is None:
            try:
                data = (self._request.rollout_dir / ref.path).read_bytes()
            except OSError as error:
                raise FrameChecksumError(f"image {ref.path} cannot be read ({error}); expected sha256 "
                                         f"{ref.sha256}") from None
            digest = hashlib.sha256(data).hexdigest()
            if digest != ref.sha256:
                raise FrameChecksumError(f"image {ref.path} has sha256 {digest} but the trace recorded "
                                         f"{ref.sha256}: checksum mismatch")
            # Only the reference and the newest frames are ever sent again.
            if len(self._images) >= 4:
                keep = self._request.reference.sha256
                for key in [k for k in self._images if k != keep]:
                    del self._images[key]
            self._images[ref.sha256] = data
        return {"image": {"format": _FORMATS.get(ref.media_type, "png"), "source": {"bytes": data}}}

    # --- response -------------------------------------------------------------------------

    def _parse(self, response: Any) -> tuple[ModelTurn, list[JsonObject], str | None, str, JsonObject]:
        sequence = self._responses
        body = response if isinstance(response, dict) else {}
        message = (body.get("output") or {}).get("message") or {}
        blocks = [b for b in message.get("content") or [] if isinstance(b, dict)]
        text = "".join(b["text"] for b in blocks if isinstance(b.get("text"), str))
        uses = [b["toolUse"] for b in blocks if isinstance(b.get("toolUse"), dict)]
        usage, usage_raw = _usage(body.get("usage"))
        response_id = (body.get("ResponseMetadata") or {}).get("RequestId")
        stop = body.get("stopReason") if isinstance(body.get("stopReason"), str) else None
        kept: list[JsonObject] = [{"text": text}] if text else []
        if not uses:
            turn = ModelTurn(tool_use_id=f"r{sequence:05d}-no-call", action_input=None, usage=usage,
                             response_id=response_id, text=text, stop_reason=stop,
                             malformed=None if message else "the response has no message")
            return turn, kept or [{"text": "(no tool call)"}], None, "(no computer_action call)", usage_raw
        use = uses[0]
        call_id = str(use.get("toolUseId") or f"call-{sequence}")
        name = use.get("name") if isinstance(use.get("name"), str) else ""
        raw_input = use.get("input")
        action_input: Any = raw_input
        malformed: str | None = None
        if isinstance(raw_input, str):
            try:
                action_input = json.loads(raw_input)
            except ValueError as error:
                action_input, malformed = None, f"the computer_action input is not valid JSON ({error})"
        if malformed is None and not isinstance(action_input, dict):
            action_input, malformed = None, "the computer_action input is not a JSON object"
        if name != COMPUTER_ACTION_TOOL_NAME:
            action_input, malformed = None, f"the response called {name or 'an unnamed tool'!r}, not computer_action"
        elif len(uses) > 1:
            action_input, malformed = None, f"{len(uses)} tool uses in one response; exactly one is allowed"
        echoed = _sorted(raw_input) if isinstance(raw_input, dict) else {}
        kept.append({"toolUse": {"toolUseId": call_id, "name": name, "input": echoed}})
        arguments = json.dumps(raw_input, separators=(",", ":")) if not isinstance(raw_input, str) else raw_input
        turn = ModelTurn(tool_use_id=f"r{sequence:05d}-{call_id}", action_input=action_input, malformed=malformed,
                         usage=usage, response_id=response_id, text=text, stop_reason=stop)
        return turn, kept, call_id, clip(f"{name} {arguments}", self._settings.call_chars), usage_raw

    def _commit(self, observation: Observation, assistant: list[JsonObject], call_id: str | None,
                summary: str) -> None:
        s = self._settings
        if self._awaiting is not None:
            result = observation.feedback or "No controller feedback."
            self._exchanges.append({**self._awaiting, "result": result})
        while len(self._exchanges) > s.history_turns:
            old = self._exchanges.pop(0)
            self._dropped.append({"turn": old["turn"], "call": old["summary"],
                                  "result": clip(str(old["result"]), s.outcome_chars)})
        self._dropped = self._dropped[-s.summary_outcomes:]
        self._awaiting = {"turn": observation.turn_index, "assistant": cast(JsonValue, assistant),
                          "tool_use_id": call_id, "summary": summary}
        self._responses += 1

    # --- state ------------------------------------------------------------------------------

    def _restore(self, state: JsonObject) -> None:
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported provider state version {state.get('version')!r}")
        exchanges, dropped, awaiting = state.get("exchanges"), state.get("dropped"), state.get("awaiting")
        self._exchanges = [copy.deepcopy(e) for e in exchanges if isinstance(e, dict)] if isinstance(
            exchanges, list) else []
        self._dropped = [copy.deepcopy(d) for d in dropped if isinstance(d, dict)] if isinstance(dropped, list) else []
        self._awaiting = copy.deepcopy(awaiting) if isinstance(awaiting, dict) else None
        responses = state.get("responses")
        self._responses = responses if isinstance(responses, int) and responses >= 0 else 0
        self._image(self._request.reference)  # rehydrate and checksum-verify before continuing

    def _measure(self, request: Any, **_: Any) -> None:
        body = getattr(request, "body", None)
        self._sent_bytes = len(body) if isinstance(body, (bytes, bytearray)) else len(body or b"")

    def _facts(self, kwargs: dict[str, Any]) -> JsonObject:
        self.last_request_bytes = self._sent_bytes
        messages = kwargs["messages"]
        self.last_messages = len(messages)
        images = sum(1 for m in messages for b in m["content"] if "image" in b)
        return {"request_bytes": self._sent_bytes, "messages": len(messages), "images": images,
                "retained_exchanges": len(self._exchanges), "summarized_outcomes": len(self._dropped)}

    def _telemetry(self, record: JsonObject, headers: Any) -> None:
        if not self._settings.telemetry:
            return
        picked = {str(k).lower(): str(v)[:256] for k, v in dict(headers).items()
                  if str(k).lower() in _HEADER_NAMES or str(k).lower().startswith(_HEADER_PREFIXES)}
        entry: JsonObject = {"at": datetime.now(UTC).isoformat(), "provider": "bedrock",
                             "model": self._settings.model, "response_seq": self._responses, **record,
                             "headers": dict(picked)}
        with contextlib.suppress(OSError):
            append_jsonl(self._request.rollout_dir / TELEMETRY_FILE, entry)


def _blocks(stored: Any) -> list[dict[str, Any]]:
    # Fixed key order: a checkpoint that went through a key-sorting JSON round trip must
    # still serialize to the same request bytes.
    out: list[dict[str, Any]] = []
    for block in stored if isinstance(stored, list) else []:
        if isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            out.append({"toolUse": {"toolUseId": use.get("toolUseId"), "name": use.get("name"),
                                    "input": _sorted(use.get("input") or {})}})
        elif isinstance(block.get("text"), str):
            out.append({"text": block["text"]})
    return out or [{"text": "(no tool call)"}]


def _sorted(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True))


def _answer(tool_use_id: Any, text: str) -> dict[str, Any]:
    if isinstance(tool_use_id, str) and tool_use_id:
        return {"toolResult": {"toolUseId": tool_use_id, "content": [{"text": text}]}}
    return {"text": text}


def _usage(raw: Any) -> tuple[TokenUsage, JsonObject]:
    usage = raw if isinstance(raw, dict) else {}

    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    # Converse reports cache reads and writes apart from inputTokens (believed; see the docs).
    summary: JsonObject = {"input_tokens": count("inputTokens"), "cached_tokens": count("cacheReadInputTokens"),
                           "cache_write_tokens": count("cacheWriteInputTokens"),
                           "output_tokens": count("outputTokens")}
    return TokenUsage(input_tokens=count("inputTokens"), cached_input_tokens=count("cacheReadInputTokens"),
                      cache_write_tokens=count("cacheWriteInputTokens"), output_tokens=count("outputTokens")), summary


def _error_headers(exc: BaseException) -> dict[str, Any]:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        headers = (response.get("ResponseMetadata") or {}).get("HTTPHeaders")
        if isinstance(headers, dict):
            return headers
    return {}


__all__ = ["ConverseSession", "ConverseSettings", "FrameChecksumError", "ProviderRequestError"]
