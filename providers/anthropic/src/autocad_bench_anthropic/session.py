"""One rollout's Messages conversation: request planning, commit on success, checkpoints.

``next_turn`` is a pure *plan* of the request (from the committed state and the
observation), one SDK call, and a *commit* that happens only after a well-formed
``computer_action`` response. A failed request, or a malformed response, commits nothing
to the history, so the core can resend the same unconsumed turn; a malformed response only
records a format-repair note (and a larger output ceiling) for the next request.

Message layout::

    system   [prompt + 5m breakpoint]                     tools [strict computer_action]
    user     [task, fixed reference + 5m breakpoint, desktop text, desktop image]
    assistant[... exactly one computer_action tool_use ...]       (exact, as returned)
    user     [tool_result{feedback, desktop image}]                (exact, as sent)
    ...
    + top-level automatic caching on every request
"""

from __future__ import annotations

import copy
import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from autocad_bench.actions.schema import COMPUTER_ACTION_TOOL_NAME
from autocad_bench.models import JsonObject
from autocad_bench.providers.models import (
    ModelTurn,
    Observation,
    ProviderErrorKind,
    ProviderRequestError,
    SessionRequest,
    TokenUsage,
)
from autocad_bench.providers.session import ProviderSession
from autocad_bench_anthropic.caching import (
    cache_control,
    computer_action_tool,
    default_system_prompt,
    forced_tool_choice,
    system_blocks,
)
from autocad_bench_anthropic.compaction import (
    Outcome,
    checkpoint_text,
    context_management,
    live_compaction,
    make_outcome,
)
from autocad_bench_anthropic.errors import classify
from autocad_bench_anthropic.history import (
    Entry,
    ImageStore,
    Json,
    drop_oldest_pairs,
    encoded_size,
    image_block,
    messages_size,
    strip_screenshots,
    text_block,
)
from autocad_bench_anthropic.options import COMPACTION_BETA, CREDENTIAL_ENV, AnthropicOptions

if TYPE_CHECKING:
    import anthropic

log = logging.getLogger(__name__)

STATE_FORMAT = "autocad-bench-anthropic/1"
COMPACTED_PLACEHOLDER = (
    "The earlier conversation was compacted by the API; its summary follows in the next assistant message."
)


class Outstanding(BaseModel):
    """The committed ``computer_action`` call whose result the next observation carries."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_use_id: str
    turn: int = Field(ge=0)
    action_input: JsonValue


class Repair(BaseModel):
    """A malformed response is pending: the observation it failed to answer, and its ids."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: Observation
    ids: tuple[str, ...]


class Counters(BaseModel):
    """Deterministic counters of the conversation (part of the checkpoint)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    completed_turns: int = 0
    turns_since_checkpoint: int = 0
    client_checkpoints: int = 0
    server_compactions: int = 0
    failed_compactions: int = 0
    screenshots_removed: int = 0
    pairs_dropped: int = 0


class SessionState(BaseModel):
    """Everything besides the messages that decides the next request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    outstanding: Outstanding | None = None
    repair: Repair | None = None
    reattach_next: bool = False
    force_checkpoint: bool = False
    last_effective_input_tokens: int = 0
    outcomes: tuple[Outcome, ...] = ()
    counters: Counters = Field(default_factory=Counters)


@dataclass
class Plan:
    """The request one observation leads to, and the state it commits on success."""

    messages: list[Entry]
    size: int
    max_tokens: int
    answers: Outstanding | None
    outcomes: tuple[Outcome, ...]
    checkpoint: bool
    completed_since: int
    stripped: int = 0
    dropped: int = 0


@dataclass
class TurnStats:
    """Diagnostics of the last ``next_turn`` (not part of the model-visible state)."""

    request_bytes: int = 0
    adapter_cpu_s: float = 0.0
    messages: int = 0
    client_checkpoint: bool = False
    server_compaction: bool = False


class AnthropicSession(ProviderSession):
    """A :class:`ProviderSession` over the Anthropic Messages API (official SDK, retries off)."""

    def __init__(self, request: SessionRequest, options: AnthropicOptions, api_key: str | None) -> None:
        self._request = request
        self._options = options
        self._model = request.model.model
        self._mode = options.compaction_mode(self._model)
        self._api_key = api_key
        self._client: anthropic.AsyncAnthropic | None = None
        self._store = ImageStore(request.rollout_dir)
        self._reference = request.reference
        display = request.display
        self._system = system_blocks(options.system_prompt or default_system_prompt(display))
        self._tools = [computer_action_tool(dict(request.action_schema))]
        self._tool_choice = forced_tool_choice(disable_parallel_tool_use=options.disable_parallel_tool_use)
        self._task_text = (
            f"Task:\n{request.task_prompt}\n\n"
            "Fixed reference image of the expected result (it stays the same for the whole rollout):"
        )
        self._skeleton_sizes: dict[int, int] = {}
        self._last_attempt: tuple[Observation, int] | None = None
        self.stats = TurnStats()
        self._history: list[Entry] = []
        self._state = SessionState()
        if request.resume_state is not None:
            self._restore(request.resume_state)

    def __repr__(self) -> str:
        return f"AnthropicSession(model={self._model!r}, compaction={self._mode!r}, messages={len(self._history)})"

    __str__ = __repr__

    # --- protocol ------------------------------------------------------------------------

    async def next_turn(self, observation: Observation) -> ModelTurn:
        client = self._ensure_client()  # one-time SDK import and client setup, not per-turn work
        import anthropic

        started = time.thread_time()
        plan = self._plan(observation)
        self._last_attempt = (observation, plan.size)
        kwargs = self._request_kwargs(plan)
        cpu = time.thread_time() - started

        try:
            if self._mode == "server":
                kwargs["betas"] = [COMPACTION_BETA]
                kwargs["context_management"] = context_management(self._options.server_compaction_trigger_tokens)
                message: Any = await client.beta.messages.create(**kwargs)
            else:
                message = await client.messages.create(**kwargs)
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as error:
            raise classify(error) from None
        except (anthropic.APIResponseValidationError, json.JSONDecodeError) as error:
            # A 200 whose body is not a Messages response: an actual response, without a call.
            return self._unusable(observation, f"the response body could not be parsed ({type(error).__name__})")
        started = time.thread_time()
        try:
            turn = self._receive(observation, plan, message)
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            return self._unusable(observation, f"the response is not a Messages object ({type(error).__name__})")
        self.stats.adapter_cpu_s = cpu + time.thread_time() - started
        return turn

    def shrink(self) -> bool:
        """After a 413: rewrite the history so the same observation makes a smaller request."""
        if self._last_attempt is None:
            return False
        observation, failed_size = self._last_attempt
        saved_history, saved_state = self._history, self._state
        try:
            if self._mode == "client":
                if self._state.force_checkpoint:
                    return False
                self._state = self._state.model_copy(update={"force_checkpoint": True})
                smaller = self._plan(observation).size < failed_size
            else:
                smaller = self._shrink_history(observation, failed_size)
        except ProviderRequestError:
            smaller = False
        if not smaller:
            self._history, self._state = saved_history, saved_state
        return smaller

    def checkpoint(self) -> JsonObject:
        return copy.deepcopy({
            "format": STATE_FORMAT,
            "model": self._model,
            "compaction": self._mode,
            "messages": [e.ref for e in self._history],
            "state": self._state.model_dump(mode="json"),
        })

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    # --- planning ------------------------------------------------------------------------

    def _plan(self, observation: Observation) -> Plan:
        state = self._state
        base, note = self._resolve(observation)
        answers = state.outstanding if self._history else None
        outcomes = state.outcomes
        if answers is not None:
            outcome = make_outcome(answers.turn, answers.tool_use_id, answers.action_input, base.feedback)
            outcomes = (*outcomes, outcome)[-self._options.checkpoint_outcomes:]
        completed = state.counters.turns_since_checkpoint + (1 if answers is not None else 0)
        max_tokens = self._options.repair_max_tokens if note is not None else self._options.max_tokens

        checkpoint = False
        if self._mode == "client" and answers is not None:
            checkpoint = (
                state.force_checkpoint
                or completed >= self._options.client_compaction_turns
                or state.last_effective_input_tokens >= self._options.client_compaction_input_tokens
            )
        if checkpoint:
            messages = [self._checkpoint_message(base, note, outcomes)]
        else:
            messages = [*self._history, self._pending_message(base, note, answers)]
        size = self._size(messages, max_tokens)
        plan = Plan(messages, size, max_tokens, answers, outcomes, checkpoint, completed)
        if size > self._options.request_guard_bytes:
            self._guard(plan, base, note)
        return plan

    def _guard(self, plan: Plan, base: Observation, note: str | None) -> None:
        """Bring a request above the byte guard down (checkpoint, or remove old screenshots)."""
        limit = self._options.request_guard_bytes
        if self._mode == "client":
            if not plan.checkpoint and plan.answers is not None:
                plan.checkpoint = True
                plan.messages = [self._checkpoint_message(base, note, plan.outcomes)]
                plan.size = self._size(plan.messages, plan.max_tokens)
            return
        *older, pending = plan.messages
        stripped_entries = []
        for entry in older:
            new, removed = strip_screenshots(entry, self._reference, self._store)
            stripped_entries.append(new)
            plan.stripped += removed
        plan.messages = [*stripped_entries, pending]
        plan.size = self._size(plan.messages, plan.max_tokens)
        # Pairs are only dropped from the history: the pending result and its desktop stay.
        while plan.size > limit:
            stripped_entries, dropped = drop_oldest_pairs(stripped_entries, 1)
            if not dropped:
                break
            plan.messages = [*stripped_entries, pending]
            plan.dropped += dropped
            plan.size = self._size(plan.messages, plan.max_tokens)

    def _shrink_history(self, observation: Observation, failed_size: int) -> bool:
        """Remove historical screenshots; if that is not enough, also half the complete pairs."""
        removed = 0
        history = []
        for entry in self._history:
            new, count = strip_screenshots(entry, self._reference, self._store)
            history.append(new)
            removed += count
        if removed and self._try_history(history, observation, failed_size, removed=removed, dropped=0):
            return True
        pairs = sum(1 for e in history[1:] if e.role == "assistant")
        history, dropped = drop_oldest_pairs(history, max(1, pairs // 2))
        return bool(dropped) and self._try_history(history, observation, failed_size, removed=removed,
                                                   dropped=dropped)

    def _try_history(self, history: list[Entry], observation: Observation, failed_size: int, *,
                     removed: int, dropped: int) -> bool:
        """Adopt ``history`` (and count the rewrite) if it makes the request smaller."""
        previous_history, previous_state = self._history, self._state
        counters = self._state.counters.model_copy(update={
            "screenshots_removed": self._state.counters.screenshots_removed + removed,
            "pairs_dropped": self._state.counters.pairs_dropped + dropped,
        })
        self._history = history
        self._state = self._state.model_copy(update={"counters": counters})
        if self._plan(observation).size < failed_size:
            return True
        self._history, self._state = previous_history, previous_state
        return False

    def _resolve(self, observation: Observation) -> tuple[Observation, str | None]:
        """The observation the request answers, and the repair note if a malformed reply is pending."""
        repair = self._state.repair
        if repair is not None and observation.tool_use_id in repair.ids:
            base = repair.base.model_copy(update={
                "frame": observation.frame, "remaining_actions": observation.remaining_actions})
            return base, observation.feedback or "Reply with exactly one computer_action call."
        return observation, None

    # --- messages ------------------------------------------------------------------------

    def _desktop_text(self, observation: Observation, *, with_feedback: bool) -> str:
        display = self._request.display
        parts = []
        if with_feedback and observation.feedback:
            parts.append(observation.feedback)
        parts.append(f"Current desktop ({display.width}x{display.height} pixels). "
                     f"Actions left in this rollout: {observation.remaining_actions}.")
        return "\n".join(parts)

    def _task_blocks(self) -> list[Json]:
        return [text_block(self._task_text), image_block(self._reference, cache_control=cache_control())]

    def _entry(self, ref: Json) -> Entry:
        return Entry.of(ref, self._store)

    def _pending_message(self, base: Observation, note: str | None, answers: Outstanding | None) -> Entry:
        if answers is None:
            content = [*self._task_blocks(), text_block(self._desktop_text(base, with_feedback=True)),
                       image_block(base.frame)]
        else:
            result: Json = {
                "type": "tool_result",
                "tool_use_id": answers.tool_use_id,
                "content": [text_block(base.feedback or "The batch finished."), image_block(base.frame)],
            }
            content = [result]
            if self._state.reattach_next:
                content.extend([
                    text_block("The context was compacted; the task and the fixed reference are repeated here.\n"
                               + self._task_text),
                    image_block(self._reference),
                ])
        if note is not None:
            content.append(text_block(f"Format repair: {note}"))
        return self._entry({"role": "user", "content": content})

    def _checkpoint_message(self, base: Observation, note: str | None, outcomes: tuple[Outcome, ...]) -> Entry:
        counters = self._state.counters
        text = checkpoint_text(
            number=counters.client_checkpoints + 1,
            dropped_calls=sum(1 for e in self._history if e.role == "assistant"),
            completed_turns=counters.completed_turns + 1,
            outcomes=list(outcomes),
        )
        content = [*self._task_blocks(), text_block(text),
                   text_block(self._desktop_text(base, with_feedback=False)), image_block(base.frame)]
        if note is not None:
            content.append(text_block(f"Format repair: {note}"))
        return self._entry({"role": "user", "content": content})

    # --- the request -----------------------------------------------------------------------

    def _base_kwargs(self, max_tokens: int) -> dict[str, Any]:
        return {
            "model": self._model,
            "max_tokens": max_tokens,
            "system": self._system,
            "tools": self._tools,
            "tool_choice": self._tool_choice,
            "cache_control": cache_control(),
        }

    def _request_kwargs(self, plan: Plan) -> dict[str, Any]:
        kwargs = self._base_kwargs(plan.max_tokens)
        kwargs["messages"] = [e.render(self._store) for e in plan.messages]
        return kwargs

    def _size(self, messages: list[Entry], max_tokens: int) -> int:
        """Serialized bytes of the request body the SDK will send for ``messages``."""
        skeleton = self._skeleton_sizes.get(max_tokens)
        if skeleton is None:
            body = {**self._base_kwargs(max_tokens), "messages": []}
            if self._mode == "server":
                body["context_management"] = context_management(self._options.server_compaction_trigger_tokens)
            skeleton = encoded_size(body)
            self._skeleton_sizes[max_tokens] = skeleton
        return skeleton + messages_size(messages, self._store)

    def _ensure_client(self) -> anthropic.AsyncAnthropic:
        if self._client is None:
            if not self._api_key:
                raise ProviderRequestError(ProviderErrorKind.FATAL, f"{CREDENTIAL_ENV} is not set")
            import anthropic

            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key,
                base_url=self._options.base_url,
                max_retries=0,
                timeout=self._options.timeout_s,
            )
        return self._client

    # --- responses -----------------------------------------------------------------------

    def _receive(self, observation: Observation, plan: Plan, message: Any) -> ModelTurn:
        usage, effective = _usage(message)
        blocks = [_dump(block) for block in (message.content or [])]
        text = "\n".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
        stop_reason = message.stop_reason
        calls = [b for b in blocks if b.get("type") == "tool_use"]
        actions = [b for b in calls if b.get("name") == COMPUTER_ACTION_TOOL_NAME]
        problem = None
        if not calls:
            problem = f"the response did not call computer_action (stop_reason={stop_reason})"
        elif len(calls) > 1:
            problem = f"the response made {len(calls)} tool calls; exactly one computer_action call is allowed"
        elif not actions:
            problem = f"the response called {calls[0].get('name')!r} instead of computer_action"
        elif stop_reason == "max_tokens":
            problem = "the computer_action call was cut off at the output limit (stop_reason=max_tokens)"
        elif not isinstance(actions[0].get("input"), dict):
            problem = "the computer_action input is not a JSON object"
        if problem is not None:
            if actions and actions[0].get("id"):
                call_id = str(actions[0]["id"])
            elif message.id:
                call_id = f"missing-{message.id}"
            else:
                call_id = self._anonymous_id()
            self._state = self._state.model_copy(update={
                "repair": Repair(base=self._resolve(observation)[0],
                                 ids=(*(self._state.repair.ids if self._state.repair else ()), call_id)[-16:]),
                "last_effective_input_tokens": effective,
            })
            return ModelTurn(tool_use_id=call_id, action_input=None, malformed=problem, usage=usage,
                             response_id=message.id, text=text, stop_reason=stop_reason)
        call = actions[0]
        action_input: JsonValue = call["input"]
        self._commit(observation, plan, blocks, call, effective)
        return ModelTurn(tool_use_id=str(call["id"]), action_input=action_input, usage=usage,
                         response_id=message.id, text=text, stop_reason=stop_reason)

    def _anonymous_id(self) -> str:
        state = self._state
        return f"unparsed-{state.counters.completed_turns}-{len(state.repair.ids) if state.repair else 0}"

    def _unusable(self, observation: Observation, problem: str) -> ModelTurn:
        state = self._state
        call_id = self._anonymous_id()
        self._state = state.model_copy(update={
            "repair": Repair(base=self._resolve(observation)[0],
                             ids=(*(state.repair.ids if state.repair else ()), call_id)[-16:]),
        })
        return ModelTurn(tool_use_id=call_id, action_input=None, malformed=problem)

    def _commit(self, observation: Observation, plan: Plan, blocks: list[Json], call: Json, effective: int) -> None:
        state = self._state
        failed = sum(1 for b in blocks if b.get("type") == "compaction" and not live_compaction(b))
        kept = [b for b in blocks if b.get("type") != "compaction" or live_compaction(b)]
        assistant = self._entry({"role": "assistant", "content": kept})
        compacted = self._mode == "server" and any(live_compaction(b) for b in kept)
        if compacted:
            # The API ignores everything before the compaction block: keep only a user opener.
            history = [self._entry({"role": "user", "content": [text_block(COMPACTED_PLACEHOLDER)]}), assistant]
        else:
            history = [*plan.messages, assistant]
        c = state.counters
        counters = Counters(
            completed_turns=c.completed_turns + (1 if plan.answers is not None else 0),
            turns_since_checkpoint=0 if plan.checkpoint else plan.completed_since,
            client_checkpoints=c.client_checkpoints + (1 if plan.checkpoint else 0),
            server_compactions=c.server_compactions + (1 if compacted else 0),
            failed_compactions=c.failed_compactions + failed,
            screenshots_removed=c.screenshots_removed + plan.stripped,
            pairs_dropped=c.pairs_dropped + plan.dropped,
        )
        self._history = history
        self._state = SessionState(
            outstanding=Outstanding(tool_use_id=str(call["id"]), turn=observation.turn_index,
                                    action_input=call["input"]),
            repair=None,
            reattach_next=compacted and self._options.reattach_after_server_compaction,
            force_checkpoint=False,
            last_effective_input_tokens=effective,
            outcomes=plan.outcomes,
            counters=counters,
        )
        self._store.retain([self._reference.sha256, *(s for e in history for s in e.image_shas())])
        self.stats = TurnStats(
            request_bytes=plan.size, messages=len(plan.messages), client_checkpoint=plan.checkpoint,
            server_compaction=compacted,
        )

    # --- resume ------------------------------------------------------------------------------

    def _restore(self, saved: JsonObject) -> None:
        if saved.get("format") != STATE_FORMAT:
            raise ValueError(f"unsupported Anthropic session checkpoint format {saved.get('format')!r}")
        messages = saved.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ValueError("Anthropic session checkpoint has no message list")
        try:
            self._state = SessionState.model_validate(saved.get("state") or {})
        except ValidationError as error:
            raise ValueError(f"invalid Anthropic session checkpoint: {error}") from None
        # Rendered lazily: the first request re-reads and checksum-verifies every image.
        self._history = [Entry(dict(copy.deepcopy(m))) for m in messages if isinstance(m, dict)]


def _dump(block: Any) -> Json:
    """A response content block exactly as the API returned it (what the SDK would send back)."""
    if isinstance(block, dict):
        return dict(block)
    dumped: Json = block.model_dump(mode="json", exclude_unset=True, by_alias=True, warnings=False)
    return dumped


def _usage(message: Any) -> tuple[TokenUsage, int]:
    """Billed usage (compaction iterations included) and the effective input of the response."""
    u = message.usage
    if u is None:
        return TokenUsage(), 0
    uncached = u.input_tokens or 0
    read = u.cache_read_input_tokens or 0
    write = u.cache_creation_input_tokens or 0
    output = u.output_tokens or 0
    effective = uncached + read + write
    # Compaction runs as an extra sampling step whose tokens are not in the top-level fields.
    for item in getattr(u, "iterations", None) or []:
        if getattr(item, "type", None) == "compaction":
            uncached += item.input_tokens or 0
            read += item.cache_read_input_tokens or 0
            write += item.cache_creation_input_tokens or 0
            output += item.output_tokens or 0
    return TokenUsage(input_tokens=uncached, cached_input_tokens=read, cache_write_tokens=write,
                      output_tokens=output), effective
