"""One rollout's conversation with OpenRouter's (stateless) Responses endpoint.

OpenRouter keeps nothing between requests, so every request carries the whole history,
which only ever grows at its end:

1. the immutable first user message: task, reference image, first desktop;
2. per turn: the model's ``function_call`` exactly as chosen, the controller's matching
   ``function_call_output`` and the next user desktop message.

Each request's ``input`` list is therefore a prefix of the next one's, which is what
prefix caching needs. A rollout-stable key is sent as ``session_id`` (sticky provider
routing) and ``prompt_cache_key``. Claude routes also get top-level automatic caching and
the structured-outputs beta header (see :class:`~autocad_bench_openrouter.options.OpenrouterOptions`).

The request body is assembled from cached bytes (:class:`~autocad_bench_openrouter.log.AppendOnlyLog`)
and sent through the OpenAI SDK's client (authentication, error types, response parsing,
retries off) as raw content, so long histories are never re-serialized. State changes
only after a successful response: a failed request is retried with the identical body.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from itertools import takewhile
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from autocad_bench.actions.schema import COMPUTER_ACTION_DESCRIPTION, COMPUTER_ACTION_TOOL_NAME
from autocad_bench.models import ArtifactRef, JsonObject
from autocad_bench.providers.models import Credentials, ModelTurn, Observation, SessionRequest
from autocad_bench.providers.support.responses import (
    INSTRUCTIONS,
    ResponsesClientSession,
    read_output,
    rollout_cache_key,
)
from autocad_bench_openrouter.log import AppendOnlyLog, dumps, image_part, text_part, user_message
from autocad_bench_openrouter.options import DEFAULT_BASE_URL, OpenrouterOptions

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.responses import Response

CREDENTIAL = "OPENROUTER_API_KEY"
CHECKPOINT_FORMAT = "autocad-bench-openrouter/1"
NO_RESULT = "(no result was reported for this call)"


class Pending(BaseModel):
    """The last model turn, waiting for the controller's answer in the next observation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_use_id: str
    is_call: bool


class OpenrouterCheckpoint(BaseModel):
    """Exact-resume state: the full history with images as checksummed artifact references."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = CHECKPOINT_FORMAT
    session_key: str
    reference: ArtifactRef
    items: list[dict[str, Any]] = Field(default_factory=list)
    pending: Pending | None = None
    responses: int = Field(default=0, ge=0)


class OpenrouterSession(ResponsesClientSession):
    """The ``openrouter`` provider's session; see the module docstring."""

    provider_name = "openrouter"
    credential = CREDENTIAL
    checkpoint_format = CHECKPOINT_FORMAT

    def __init__(self, request: SessionRequest, options: OpenrouterOptions, credentials: Credentials) -> None:
        super().__init__(request, options, credentials, DEFAULT_BASE_URL)
        self._options = options
        self._log = AppendOnlyLog(self._images)
        self._claude = options.is_claude_route(request.model.model)
        if request.resume_state is not None:
            state = OpenrouterCheckpoint.model_validate(request.resume_state)
            self._check_checkpoint(state.format, state.reference)
            # Every historical image is read back and checksum-verified here, before any request.
            self._log.restore(state.items)
            self._key = state.session_key
            self._pending = state.pending
            self._responses = state.responses
        else:
            self._key = rollout_cache_key(request)
            self._pending = None
            self._responses = 0
        self._head, self._tail = self._frame_bytes()

    def __repr__(self) -> str:
        return (f"OpenrouterSession(model={self._request.model.model!r}, rollout={self._request.rollout_id!r}, "
                f"items={len(self._log)})")

    __str__ = __repr__

    @property
    def encodings(self) -> int:
        """How many images were base64-encoded so far (each image once, unless resumed)."""
        return self._images.encodings

    @property
    def headers(self) -> dict[str, str]:
        """Extra request headers (beta flag on Claude routes, session header, attribution)."""
        o = self._options
        headers = {"Content-Type": "application/json"}
        if self._claude and o.anthropic_beta_header and o.anthropic_beta:
            headers[o.anthropic_beta_header] = o.anthropic_beta
        if o.session_id_header:
            headers[o.session_id_header] = self._key
        if o.app_url:
            headers["HTTP-Referer"] = o.app_url
        if o.app_title:
            headers["X-Title"] = o.app_title
        return headers

    # --- the request ---------------------------------------------------------------------

    def _frame_bytes(self) -> tuple[bytes, bytes]:
        """The constant JSON around the ``input`` array: ``head + items + tail``."""
        o = self._options
        r = self._request
        head = dumps({
            "model": r.model.model,
            "instructions": INSTRUCTIONS.format(width=r.display.width, height=r.display.height),
        })[:-1] + b',"input":['
        rest: dict[str, Any] = {
            "tools": [{
                "type": "function",
                "name": COMPUTER_ACTION_TOOL_NAME,
                "description": COMPUTER_ACTION_DESCRIPTION,
                "parameters": r.action_schema,
                "strict": True,
            }],
            "tool_choice": {"type": "function", "name": COMPUTER_ACTION_TOOL_NAME},
            "parallel_tool_calls": False,
            "max_output_tokens": o.max_output_tokens,
            "prompt_cache_key": self._key,
        }
        if o.send_session_id:
            rest["session_id"] = self._key
        if o.reasoning_effort is not None:
            rest["reasoning"] = {"effort": o.reasoning_effort}
        if o.provider_routing is not None:
            rest["provider"] = o.provider_routing
        if self._claude and o.anthropic_cache_control is not None:
            rest["cache_control"] = o.anthropic_cache_control
        tail = b"]," + dumps(rest)[1:]
        return head, tail

    def pending_items(self, observation: Observation) -> list[dict[str, Any]]:
        """The checkpoint-form items ``observation`` appends to the history (pure)."""
        detail = self._options.image_detail
        status = (f"Current desktop at turn {observation.turn_index}; "
                  f"{observation.remaining_actions} actions left in this rollout.")
        if not self._log.items:
            if observation.feedback:
                status = f"{observation.feedback}\n{status}"
            return [user_message([
                text_part(f"Task:\n{self._request.task_prompt}"),
                text_part("Reference image of the expected result:"),
                image_part(self._request.reference, detail),
                text_part(status),
                image_part(observation.frame, detail),
            ])]
        items: list[dict[str, Any]] = []
        pending = self._pending
        used = False
        if pending is not None and pending.is_call:
            used = observation.tool_use_id == pending.tool_use_id
            output = observation.feedback if used else NO_RESULT
            items.append({"type": "function_call_output", "call_id": pending.tool_use_id, "output": output})
        if observation.feedback and not used:
            status = f"{observation.feedback}\n{status}"
        items.append(user_message([text_part(status), image_part(observation.frame, detail)]))
        return items

    def build_body(self, observation: Observation) -> tuple[list[bytes], int, list[dict[str, Any]], list[bytes]]:
        """The request for ``observation`` as byte chunks and their total length (no state change).

        The chunks are the constant head, the cached history segments, the newly encoded
        items and the constant tail; ``b"".join(chunks)`` is the exact body. Also returns
        the new items and their encodings, appended to the history after a success.
        """
        items = self.pending_items(observation)
        encoded = [self._log.encode(item) for item in items]
        chunks = [self._head, *self._log.segments, self._log.segment(encoded), self._tail]
        length = len(self._head) + self._log.size + len(chunks[-2]) + len(self._tail)
        return chunks, length, items, encoded

    def _connect(self) -> tuple[AsyncOpenAI, type[Response]]:
        import openai
        from openai.types.responses import Response

        return openai.AsyncOpenAI(api_key=self._api_key, base_url=self._base_url, max_retries=0,
                                  timeout=self._timeout_s), Response

    # --- ProviderSession ------------------------------------------------------------------

    async def next_turn(self, observation: Observation) -> ModelTurn:
        self._require_credential()
        chunks, length, items, encoded = self.build_body(observation)
        # Streamed from the cached chunks with an explicit length: the history is never
        # copied into one buffer, so a turn costs the same CPU at turn 300 as at turn 1.
        response = await self._post(_stream(chunks), {**self.headers, "Content-Length": str(length)})
        turn, appended, pending = self._read(response)
        self._log.extend([*items, *appended], [*encoded, *(dumps(item) for item in appended)])
        self._pending = pending
        self._responses += 1
        return turn

    def shrink(self) -> bool:
        """After a 413: replace the older half of the historical screenshots by a short text."""
        return self._log.elide_oldest_screenshots()

    def checkpoint(self) -> JsonObject:
        state = OpenrouterCheckpoint(
            session_key=self._key,
            reference=self._request.reference,
            items=list(self._log.items),
            pending=self._pending,
            responses=self._responses,
        )
        return state.model_dump(mode="json")

    # --- response parsing -----------------------------------------------------------------

    def _read(self, response: Response) -> tuple[ModelTurn, list[dict[str, Any]], Pending]:
        output = read_output(response)
        text, usage, response_id, stop, ours = output.text, output.usage, output.response_id, output.stop, output.ours
        reasoning: list[dict[str, Any]] = []
        if self._options.replay_reasoning:
            # The reasoning items before the first call (the reasoning that led to it) are replayed.
            for item in takewhile(lambda item: getattr(item, "type", None) != "function_call", output.items):
                if getattr(item, "type", None) == "reasoning":
                    reasoning.append(item.model_dump(mode="json", exclude_none=True))
        problem: str | None = None
        value: Any = None
        if not ours:
            problem = output.missing_call()
            tool_use_id = output.no_call_id(self._responses)
            note = text or f"({problem})"
        else:
            call = ours[0]
            tool_use_id = str(call.call_id)
            raw = call.arguments if isinstance(call.arguments, str) else ""
            try:
                value = json.loads(raw)
            except ValueError as error:
                problem = f"the computer_action arguments are not valid JSON ({error})"
            if problem is None and len(ours) > 1:
                problem = f"the response made {len(ours)} computer_action calls; send one batch per turn"
            note = f"(a computer_action call that could not be used: {problem}; arguments: {raw[:2000]})"
        if problem is not None:
            turn = ModelTurn(tool_use_id=tool_use_id, action_input=None, malformed=problem, usage=usage,
                             response_id=response_id, text=text, stop_reason=stop)
            message = {"type": "message", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": note, "annotations": []}]}
            return turn, [message], Pending(tool_use_id=tool_use_id, is_call=False)
        call = ours[0]
        call_item: dict[str, Any] = {"type": "function_call"}
        if getattr(call, "id", None):
            call_item["id"] = call.id
        call_item.update({"call_id": tool_use_id, "name": COMPUTER_ACTION_TOOL_NAME, "arguments": call.arguments})
        turn = ModelTurn(tool_use_id=tool_use_id, action_input=value, usage=usage, response_id=response_id,
                         text=text, stop_reason=stop)
        return turn, [*reasoning, call_item], Pending(tool_use_id=tool_use_id, is_call=True)


async def _stream(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk
