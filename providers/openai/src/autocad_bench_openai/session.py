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

Requests go to ``provider_options.base_url``, else ``OPENAI_BASE_URL`` (when admission
passed it through), else OpenAI's URL (:func:`~autocad_bench_openai.options.resolve_base_url`).
Connection failures and timeouts name that URL and where it came from, so a rollout that
ends ``transport_exhausted`` says which endpoint could not be reached.
"""

from __future__ import annotations

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
)
from autocad_bench.providers.support.responses import (
    INSTRUCTIONS,
    ResponsesClientSession,
    read_output,
    rollout_cache_key,
)
from autocad_bench_openai.history import Entry, answered, parse_arguments, render, trimmed
from autocad_bench_openai.options import DEFAULT_BASE_URL, OpenaiOptions, resolve_base_url

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.responses import Response

CREDENTIAL = "OPENAI_API_KEY"
CHECKPOINT_FORMAT = "autocad-bench-openai/1"


def dumps(value: Any) -> bytes:
    """Compact, deterministic JSON bytes (UTF-8, no NaN), as the SDK itself would send them."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


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


class OpenaiSession(ResponsesClientSession):
    """The ``openai`` provider's session; see the module docstring."""

    provider_name = "openai"
    credential = CREDENTIAL
    checkpoint_format = CHECKPOINT_FORMAT

    def __init__(self, request: SessionRequest, options: OpenaiOptions, credentials: Credentials) -> None:
        super().__init__(request, options, credentials, DEFAULT_BASE_URL)
        self._endpoint = resolve_base_url(options, credentials)
        self._base_url = self._endpoint.url
        self._options = options
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
            self._check_checkpoint(state.format, state.reference)
            self._state = state
        else:
            self._state = OpenaiCheckpoint(prompt_cache_key=rollout_cache_key(request), reference=request.reference)

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

    def _connect(self) -> tuple[AsyncOpenAI, type[Response]]:
        import openai
        from openai.types.responses import Response

        return openai.AsyncOpenAI(api_key=self._api_key, base_url=self._base_url, max_retries=0,
                                  timeout=self._timeout_s), Response

    @property
    def base_url(self) -> str:
        """Where this session's requests go."""
        return self._endpoint.url

    async def _post(self, content: Any, headers: dict[str, str]) -> Any:
        try:
            return await super()._post(content, headers)
        except ProviderRequestError as error:
            if error.kind is not ProviderErrorKind.TRANSIENT or error.status is not None:
                raise
            # A connection failure or timeout: say which endpoint (the API key is never in it).
            raise ProviderRequestError(error.kind, f"{error} at {self._endpoint}",
                                       retry_after_s=error.retry_after_s) from None

    # --- ProviderSession ------------------------------------------------------------------

    async def next_turn(self, observation: Observation) -> ModelTurn:
        self._require_credential()
        body, entries = self.build_body(observation)
        # Pre-serialized: the SDK's per-call transformation of typed params costs tens of
        # milliseconds per turn for this body, and the bytes are ours to keep deterministic.
        response = await self._post(body, {"Content-Type": "application/json"})
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

    # --- response parsing -----------------------------------------------------------------

    def _read(self, response: Response, turn_index: int) -> tuple[ModelTurn, Entry]:
        output = read_output(response)
        text, usage, response_id, stop, ours = output.text, output.usage, output.response_id, output.stop, output.ours
        if not ours:
            missing = output.missing_call()
            call_id = output.no_call_id(self._state.responses)
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
