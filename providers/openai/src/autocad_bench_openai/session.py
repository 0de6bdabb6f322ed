"""One rollout's conversation with the OpenAI Responses API.

Every request is rebuilt from scratch (``store`` is off by default, so nothing lives on
the server): fixed instructions, the task with the reference image, the compact
controller history (:mod:`autocad_bench_openai.history`) and the current desktop. The
strict ``computer_action`` function tool is forced on every turn. ``prompt_cache_key`` is
derived from the rollout id, so every request of a rollout (and of its resumed attempts)
shares one key and OpenAI can route it to a warm prompt cache; the task/reference prefix
is byte-identical on every turn and the history changes only at its end except when it
is cut (see ``history_turns``).

The body is serialized here and posted through the SDK's client (authentication, error
types, response parsing, retries off). State changes only after a successful response, so
a failed request is retried with the identical body.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from autocad_bench.actions.schema import COMPUTER_ACTION_DESCRIPTION, COMPUTER_ACTION_TOOL_NAME
from autocad_bench.models import ArtifactRef, JsonObject
from autocad_bench.providers.models import (
    Credentials,
    ModelTurn,
    Observation,
    ProviderErrorKind,
    ProviderRequestError,
    SessionRequest,
    TokenUsage,
)
from autocad_bench.providers.session import ProviderSession
from autocad_bench_openai.errors import classify, failed_response
from autocad_bench_openai.history import Entry, answered, parse_arguments, render, trimmed
from autocad_bench_openai.images import DataUrlCache
from autocad_bench_openai.options import DEFAULT_BASE_URL, OpenaiOptions

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.responses import Response

CREDENTIAL = "OPENAI_API_KEY"
CHECKPOINT_FORMAT = "autocad-bench-openai/1"

INSTRUCTIONS = (
    "You operate a CAD application on a {width}x{height} desktop, only through the "
    "computer_action tool. The first message gives the task and a reference image of the expected "
    "result. After each of your tool calls the controller reports what happened and you receive a "
    "new screenshot of the whole desktop. Work step by step, check every screenshot, and finish with "
    "a batch whose last action is 'done' once the drawing matches the task."
)


def dumps(value: Any) -> bytes:
    """Compact, deterministic JSON bytes (UTF-8, no NaN), as the SDK itself would send them."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def prompt_cache_key(request: SessionRequest) -> str:
    """A short key stable for the whole rollout (all attempts), unique per rollout and model."""
    digest = hashlib.sha256(f"{request.rollout_id}\x00{request.model.model}".encode()).hexdigest()
    return f"acb-{digest[:32]}"


class OpenaiCheckpoint(BaseModel):
    """The exact model-visible state of a session (images as checksummed references)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = CHECKPOINT_FORMAT
    prompt_cache_key: str
    reference: ArtifactRef
    entries: list[Entry] = Field(default_factory=list)
    omitted: int = Field(default=0, ge=0)
    responses: int = Field(default=0, ge=0)
    last_frame: ArtifactRef | None = None


class OpenaiSession(ProviderSession):
    """The ``openai`` provider's session; see the module docstring."""

    provider_name = "openai"

    def __init__(self, request: SessionRequest, options: OpenaiOptions, credentials: Credentials) -> None:
        self._request = request
        self._options = options
        self._api_key = credentials.get(CREDENTIAL)
        self._images = DataUrlCache(request.rollout_dir)
        self._client: AsyncOpenAI | None = None
        self._tool: dict[str, Any] = {
            "type": "function",
            "name": COMPUTER_ACTION_TOOL_NAME,
            "description": COMPUTER_ACTION_DESCRIPTION,
            "parameters": request.action_schema,
            "strict": True,
        }
        self._instructions = INSTRUCTIONS.format(width=request.display.width, height=request.display.height)
        if request.resume_state is not None:
            state = OpenaiCheckpoint.model_validate(request.resume_state)
            if state.format != CHECKPOINT_FORMAT:
                raise ValueError(f"cannot resume from checkpoint format {state.format!r}")
            if state.reference.sha256 != request.reference.sha256:
                raise ValueError("the checkpoint was made with a different reference image")
            self._state = state
        else:
            self._state = OpenaiCheckpoint(prompt_cache_key=prompt_cache_key(request), reference=request.reference)

    def __repr__(self) -> str:
        return (f"OpenaiSession(model={self._request.model.model!r}, rollout={self._request.rollout_id!r}, "
                f"responses={self._state.responses})")

    __str__ = __repr__

    @property
    def encodings(self) -> int:
        """How many images were base64-encoded so far (the reference once, then one per frame)."""
        return self._images.encodings

    # --- the request ---------------------------------------------------------------------

    def build_body(self, observation: Observation) -> tuple[bytes, list[Entry]]:
        """The exact request bytes for ``observation``, without changing any state.

        Also returns the history as it will be after a successful response (the pending
        call answered by the observation's feedback).
        """
        body, entries, _ = self.build_request(observation)
        return dumps(body), entries

    def build_request(self, observation: Observation) -> tuple[dict[str, Any], list[Entry], bool]:
        """The Responses request object for ``observation``, without changing any state.

        Also returns the history as it will be after a successful response (the pending
        call answered) and whether the observation's feedback was used as that answer.
        """
        entries, used = answered(self._state.entries, observation.tool_use_id, observation.feedback)
        o = self._options
        detail = o.image_detail
        first = {
            "role": "user",
            "content": [
                {"type": "input_text", "text": f"Task:\n{self._request.task_prompt}"},
                {"type": "input_text", "text": "Reference image of the expected result:"},
                {"type": "input_image", "image_url": self._images.url(self._request.reference, pin=True),
                 "detail": detail},
            ],
        }
        items: list[dict[str, Any]] = [first]
        if self._state.omitted:
            items.append({"role": "user",
                          "content": f"({self._state.omitted} earlier turns are omitted from this history.)"})
        items.extend(render(entries))
        status = (f"Current desktop at turn {observation.turn_index}; "
                  f"{observation.remaining_actions} actions left in this rollout.")
        if observation.feedback and not used:
            status = f"{observation.feedback}\n{status}"
        items.append({
            "role": "user",
            "content": [
                {"type": "input_text", "text": status},
                {"type": "input_image", "image_url": self._images.url(observation.frame), "detail": detail},
            ],
        })
        body: dict[str, Any] = {
            "model": self._request.model.model,
            "instructions": self._instructions,
            "input": items,
            "tools": [self._tool],
            "tool_choice": {"type": "function", "name": COMPUTER_ACTION_TOOL_NAME},
            "parallel_tool_calls": False,
            "max_output_tokens": o.max_output_tokens,
            "prompt_cache_key": self._state.prompt_cache_key,
            "store": o.store,
        }
        if o.reasoning_effort is not None or o.reasoning_summary is not None:
            reasoning: dict[str, Any] = {}
            if o.reasoning_effort is not None:
                reasoning["effort"] = o.reasoning_effort
            if o.reasoning_summary is not None:
                reasoning["summary"] = o.reasoning_summary
            body["reasoning"] = reasoning
        if o.prompt_cache_retention is not None:
            body["prompt_cache_retention"] = o.prompt_cache_retention
        return body, entries, used

    def _client_for_loop(self) -> AsyncOpenAI:
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self._options.base_url or DEFAULT_BASE_URL,
                max_retries=0,
                timeout=self._options.timeout_s,
            )
        return self._client

    # --- ProviderSession ------------------------------------------------------------------

    async def next_turn(self, observation: Observation) -> ModelTurn:
        if not self._api_key:
            raise ProviderRequestError(ProviderErrorKind.FATAL, f"{CREDENTIAL} is not set")
        body, entries = self.build_body(observation)
        client = self._client_for_loop()
        from openai.types.responses import Response

        try:
            # Pre-serialized: the SDK's per-call transformation of typed params costs tens of
            # milliseconds per turn for this body, and the bytes are ours to keep deterministic.
            response = await client.post(
                "/responses", cast_to=Response, content=body,
                options={"headers": {"Content-Type": "application/json"}, "timeout": self._options.timeout_s},
            )
        except Exception as error:
            classified = classify(error, self.provider_name)
            if classified is None:
                raise
            raise self._redacted(classified) from None
        failed = failed_response(getattr(response, "status", None), getattr(response, "error", None),
                                 self.provider_name)
        if failed is not None:
            raise self._redacted(failed)
        turn, entry = self._read(response, observation.turn_index)
        state = self._state
        history, dropped = trimmed([*entries, entry], self._options.history_turns)
        self._state = state.model_copy(update={
            "entries": history,
            "omitted": state.omitted + dropped,
            "responses": state.responses + 1,
            "last_frame": observation.frame,
        })
        return turn

    def shrink(self) -> bool:
        """Halve the history (oldest first) after a 413; ``False`` when nothing is left to drop."""
        entries = self._state.entries
        # The pending call must keep its place: its answer comes with the next observation.
        droppable = len(entries) - 1
        if droppable <= 0:
            return False
        drop = max(1, droppable // 2)
        self._state = self._state.model_copy(update={
            "entries": entries[drop:], "omitted": self._state.omitted + drop})
        return True

    def checkpoint(self) -> JsonObject:
        return self._state.model_dump(mode="json")

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    # --- response parsing -----------------------------------------------------------------

    def _read(self, response: Response, turn_index: int) -> tuple[ModelTurn, Entry]:
        texts: list[str] = []
        calls: list[Any] = []
        for item in getattr(response, "output", None) or []:
            kind = getattr(item, "type", None)
            if kind == "function_call":
                calls.append(item)
            elif kind == "message":
                for part in getattr(item, "content", None) or []:
                    text = getattr(part, "text", None) or getattr(part, "refusal", None)
                    if isinstance(text, str):
                        texts.append(text)
        text = "\n".join(texts)
        usage = usage_of(response)
        response_id = getattr(response, "id", None)
        status = getattr(response, "status", None) or "completed"
        details = getattr(response, "incomplete_details", None)
        reason = getattr(details, "reason", None) if details is not None else None
        stop = f"{status}:{reason}" if reason else str(status)
        ours = [c for c in calls if getattr(c, "name", None) == COMPUTER_ACTION_TOOL_NAME]
        if not ours:
            others = sorted({str(getattr(c, "name", "?")) for c in calls})
            missing = ("the response called " + ", ".join(others) + " instead of computer_action" if others
                       else "the response did not call computer_action")
            if reason:
                missing += f" (response {status}: {reason})"
            call_id = f"{response_id or f'response-{self._state.responses}'}-nocall"
            turn = ModelTurn(tool_use_id=call_id, action_input=None, malformed=missing, usage=usage,
                             response_id=response_id, text=text, stop_reason=stop)
            return turn, Entry(turn_index=turn_index, call_id=call_id, text=text or f"({missing})")
        call = ours[0]
        call_id = str(call.call_id)
        raw = call.arguments if isinstance(call.arguments, str) else ""
        value, problem = parse_arguments(raw)
        if problem is None and len(ours) > 1:
            problem = f"the response made {len(ours)} computer_action calls; send one batch per turn"
        if problem is not None:
            turn = ModelTurn(tool_use_id=call_id, action_input=None, malformed=problem, usage=usage,
                             response_id=response_id, text=text, stop_reason=stop)
            note = f"(a computer_action call that could not be used: {problem}; arguments: {raw[:2000]})"
            return turn, Entry(turn_index=turn_index, call_id=call_id, text=note)
        turn = ModelTurn(tool_use_id=call_id, action_input=value, usage=usage, response_id=response_id,
                         text=text, stop_reason=stop)
        return turn, Entry(turn_index=turn_index, call_id=call_id, arguments=raw)

    def _redacted(self, error: ProviderRequestError) -> ProviderRequestError:
        message = str(error)
        if self._api_key and self._api_key in message:
            message = message.replace(self._api_key, "[redacted]")
            return ProviderRequestError(error.kind, message, status=error.status, retry_after_s=error.retry_after_s)
        return error


def usage_of(response: Response) -> TokenUsage:
    """TokenUsage from a Responses ``usage``: uncached input = input - cached - cache writes."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return TokenUsage()
    details = getattr(usage, "input_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0)
    written = int(getattr(details, "cache_write_tokens", 0) or 0)
    out_details = getattr(usage, "output_tokens_details", None)
    reasoning = int(getattr(out_details, "reasoning_tokens", 0) or 0)
    total_input = int(usage.input_tokens or 0)
    return TokenUsage(
        input_tokens=max(0, total_input - cached - written),
        cached_input_tokens=cached,
        cache_write_tokens=written,
        output_tokens=int(usage.output_tokens or 0),
        reasoning_tokens=reasoning,
    )
