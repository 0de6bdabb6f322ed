"""Native tool mode: one rollout driven through OpenAI's own computer-use tool.

:class:`NativeOpenAISession` speaks ``client.responses.create`` (official SDK,
``max_retries=0``; failures classified by the function session's classifier,
:func:`autocad_bench.providers.support.errors.classify`, with the API key redacted, and a
2xx ``status: failed`` response classified by ``failed_response``) and turns each response
into one harness batch in desktop pixels.

Two tool variants (field names from the pinned SDK, ``openai`` 3.57.0,
``openai/types/responses/``; see :mod:`autocad_bench_openai.native.actions`):

* ``computer`` (GA, ``computer_tool_param.py``): ``{"type": "computer"}`` without size
  fields; the shown size is implied by the screenshots. One ``computer_call`` may carry a
  batched ``actions`` list (``computer_action_list.py``).
* ``computer_use_preview`` (``computer_use_preview_tool_param.py``): ``display_width`` and
  ``display_height`` are the shown size, ``environment`` is ``"linux"`` (the SDK's Literal
  allows windows, mac, linux, ubuntu, browser; the desktop runs LibreCAD on Linux), and
  the request sets ``truncation: "auto"`` (``response_create_params.py``), which that tool
  requires. A call carries one ``action``.

The variant is an explicit constructor argument; :func:`default_variant` picks
``computer_use_preview`` for model ids starting with ``computer-use-preview`` and the GA
tool otherwise (``provider_options.computer_tool`` overrides it).

Conversation (``store`` is always false, so nothing lives on the server and every request
carries the whole kept history)::

    instructions  native prompt                       tools [computer tool]
    user          [task, reference image, (omitted turns note), status, oldest kept screenshot]
    reasoning / message / computer_call ...           (exactly as returned, in order)
    computer_call_output per computer_call            (the new screenshot; acknowledged checks)
    user          [controller feedback + status]
    ...

``include=["reasoning.encrypted_content"]`` (``response_includable.py``) makes the API
return the encrypted reasoning (``response_reasoning_item.py``), and every reasoning item
is replayed as returned, before the ``computer_call`` it preceded. Every ``computer_call``
of the previous reply is answered with its own ``computer_call_output``
(``response_input_item_param.py`` ``ComputerCallOutput``: ``call_id``, ``output`` =
``{"type": "computer_screenshot", "image_url": data-url}``, optional
``acknowledged_safety_checks``): the API wants an output for each call id it returned, and
each output is a screenshot, so with several calls each gets the same new frame (the state
after all of them ran). Controller feedback (receipts, validation errors, errors of calls
that were not performed) follows as a user text message, because a screenshot output has no
text.

Screenshots: the desktop frame (and the reference, when it has the desktop's size) is
scaled with :func:`scale_png` to :func:`openai_geometry`, the largest size within OpenAI's
``detail: high`` limits (fits 2048 x 2048, short edge at most 768: 1920x1080 becomes
1366x768), so the model's coordinates are pixels of exactly the image it saw; they are
mapped back with :meth:`ScreenGeometry.to_desktop`.

Responses:

* all actions of all ``computer_call`` items form one batch, in order; a ``screenshot``
  action becomes ``{"type": "wait", "seconds": 0.1}`` (it costs one action: the broker
  captures a fresh frame after every batch);
* an unsupported or malformed action makes the whole turn invalid (nothing runs); its calls
  are still committed and answered next request (screenshot outputs, and the error text in
  the user message that follows);
* no ``computer_call`` but a message: the model's own finish, batch ``[{"type": "done"}]``
  with the text kept; no call and no message: an invalid turn;
* a ``refusal`` content part, or ``status: incomplete`` (``incomplete_details.reason``, e.g.
  ``max_output_tokens``): an invalid turn with ``stop_reason`` ``"refusal"`` or the reason;
  nothing is committed (a cut-off call is never replayed).

pending_safety_checks policy (``safety_checks``, ``provider_options.safety_checks``):

* ``"stop"`` (default): a reply whose calls carry ``pending_safety_checks`` is an invalid
  turn, ``malformed`` names every check (id, code, message) and ``stop_reason`` is
  ``"safety_check"``; nothing runs and nothing is committed, so the rollout never silently
  continues past a check;
* ``"acknowledge"``: the actions run and the next ``computer_call_output`` of that call lists
  the checks in ``acknowledged_safety_checks``.

Either way the checks are recorded in :attr:`ModelTurn.text`.

History bound (``history_turns``, the option the function session uses for the same
purpose): a committed exchange (a *step*: the observation sent and the reply's output items)
is dropped only as a whole, because a ``computer_call_output`` must carry a screenshot (no
text placeholder is possible) and every reasoning item must stay with the call it preceded.
Once more than ``2 * history_turns`` steps are kept, the oldest are dropped down to
``history_turns`` in one cut (the request prefix stays byte-identical between two cuts).
The oldest kept step then opens the conversation: its screenshot and status follow the task
and the reference in the first user message, with a note of how many turns were omitted,
and its calls are answered as before. The last step (the calls the next observation
answers) is never dropped.

413: :meth:`shrink` drops the older half of the kept steps (never the last) and returns
``True`` when the same observation then makes a strictly smaller request; ``False`` (nothing
changed) when only the last step is left or no request was made yet.

A failed request commits nothing, so resending the same observation resends the same
request; a checkpoint (images as checksummed references, ``omitted`` included) resumes to a
byte-identical next request.

The pointer: every pointer action of OpenAI's computer tool carries its own coordinates
(``click``, ``double_click``, ``move`` and ``scroll`` have ``x``/``y``, ``drag`` a path that
starts at its first point) and no action asks where the pointer is, so
:attr:`Observation.pointer` changes nothing here.
"""

from __future__ import annotations

import base64
import copy
import io
import json
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from autocad_bench.models import ArtifactRef, JsonObject
from autocad_bench.providers.geometry import (
    OPENAI_HIGH_DETAIL_MAX_EDGE,
    OPENAI_HIGH_DETAIL_SHORT_EDGE,
    ScreenGeometry,
    scale_png,
)
from autocad_bench.providers.models import (
    Credentials,
    DisplaySize,
    ModelTurn,
    Observation,
    ProviderErrorKind,
    ProviderRequestError,
    SessionRequest,
)
from autocad_bench.providers.session import ProviderSession
from autocad_bench.providers.support.errors import classify, failed_response, redacted
from autocad_bench.providers.support.images import read_verified
from autocad_bench.providers.support.responses import rollout_cache_key, usage_of
from autocad_bench_openai.native.actions import (
    ComputerToolDefinition,
    ComputerVariant,
    NativeActionError,
    map_computer_action,
    tool_definition,
)
from autocad_bench_openai.options import OpenaiOptions, resolve_base_url

CREDENTIAL = "OPENAI_API_KEY"
STATE_FORMAT = "autocad-bench-openai-native/1"
PROVIDER = "openai"

SafetyPolicy: TypeAlias = Literal["acknowledge", "stop"]

SCREENSHOT_WAIT_SECONDS = 0.1
"""The wait that stands for a ``screenshot`` action (the broker screenshots after each batch)."""

IMAGE_DETAIL = "high"
"""``detail`` of the ``input_image`` parts (the shown size is fitted to its limits)."""

INCLUDE = ["reasoning.encrypted_content"]
"""``include`` of every request: ``store`` is false, so reasoning must come back encrypted."""

NOT_PERFORMED = "Not performed: another computer action in the same reply could not be performed."


def default_variant(model: str) -> ComputerVariant:
    """``computer_use_preview`` for ``computer-use-preview*`` model ids, else the GA ``computer`` tool."""
    return "computer_use_preview" if model.startswith("computer-use-preview") else "computer"


def openai_geometry(desktop: DisplaySize) -> ScreenGeometry:
    """The shown screenshot size for ``desktop`` within OpenAI's ``detail: high`` limits."""
    return ScreenGeometry.fit(desktop, max_long_edge=OPENAI_HIGH_DETAIL_MAX_EDGE,
                              max_short_edge=OPENAI_HIGH_DETAIL_SHORT_EDGE)


def native_instructions(shown: DisplaySize) -> str:
    """The ``instructions`` of native mode: the tool, the screen, and how the episode ends."""
    return (
        f"You operate a CAD application (LibreCAD on Linux) through the computer tool; the screen is "
        f"{shown.width}x{shown.height} pixels. After your computer actions run you get a fresh screenshot and "
        "the controller's notes. The first message gives the task and a fixed reference image of the expected "
        "result. The episode ends when you reply with a message and no computer call: do that only when the "
        "drawing is complete and saved."
    )


class SafetyCheck(BaseModel):
    """One ``pending_safety_checks`` entry of a ``computer_call`` (``id``, ``code``, ``message``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    code: str | None = None
    message: str | None = None

    def describe(self) -> str:
        """``code: message (id)`` for the model and the trace."""
        return f"{self.code or 'unknown'}: {self.message or 'no message'} ({self.id})"


class PendingCall(BaseModel):
    """A ``computer_call`` of a committed reply: its error if not performed, the checks acknowledged."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    call_id: str
    error: str | None = None
    acknowledged: tuple[SafetyCheck, ...] = ()


class Step(BaseModel):
    """One committed exchange: the observation sent (frame + text) and the reply's output items."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    frame: ArtifactRef
    text: str
    items: list[JsonObject]
    calls: tuple[PendingCall, ...]


class NativeCheckpoint(BaseModel):
    """Everything that decides the next request (the session's checkpoint)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = STATE_FORMAT
    model: str
    variant: ComputerVariant
    safety_checks: SafetyPolicy
    shown: DisplaySize
    reference: ArtifactRef
    prompt_cache_key: str
    steps: list[Step] = Field(default_factory=list)
    omitted: int = Field(default=0, ge=0)
    """Steps dropped from the front of the history (bound, 413 rewrite)."""
    malformed_turns: int = Field(default=0, ge=0)
    uncommitted_replies: int = Field(default=0, ge=0)


class ShownImages:
    """``data:`` URLs of checksum-verified images, desktop-sized ones scaled to the shown size."""

    def __init__(self, request: SessionRequest, geometry: ScreenGeometry) -> None:
        self._root = request.rollout_dir
        self._geometry = geometry
        self._urls: dict[tuple[str, str], str] = {}
        self.encodings = 0

    def retain(self, refs: list[ArtifactRef]) -> None:
        """Forget the URLs of images not in ``refs``."""
        keep = {(ref.path, ref.sha256) for ref in refs}
        for key in [k for k in self._urls if k not in keep]:
            del self._urls[key]

    def url(self, ref: ArtifactRef) -> str:
        """The ``data:`` URL of ``ref`` (read, verified and scaled once)."""
        key = (ref.path, ref.sha256)
        cached = self._urls.get(key)
        if cached is None:
            data = read_verified(self._root, ref)
            if not self._geometry.is_identity and _size(data) == (self._geometry.desktop.width,
                                                                  self._geometry.desktop.height):
                data = scale_png(data, self._geometry)
            cached = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
            self._urls[key] = cached
            self.encodings += 1
        return cached


def _size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
        return width, height


class NativeOpenAISession(ProviderSession):
    """A :class:`ProviderSession` over the Responses API with OpenAI's native computer tool."""

    def __init__(self, request: SessionRequest, options: OpenaiOptions, credentials: Credentials, *,
                 variant: ComputerVariant | None = None, safety_checks: SafetyPolicy = "stop") -> None:
        chosen = variant or default_variant(request.model.model)
        if chosen not in ("computer", "computer_use_preview"):
            raise ValueError(f"unknown computer tool {chosen!r}; expected 'computer' or 'computer_use_preview'")
        if safety_checks not in ("acknowledge", "stop"):
            raise ValueError(f"safety_checks must be 'acknowledge' or 'stop', got {safety_checks!r}")
        self._request = request
        self._options = options
        self._api_key = credentials.get(CREDENTIAL)
        self._base_url = resolve_base_url(options, credentials).url
        self._client: Any = None
        self._geometry = openai_geometry(request.display)
        if request.resume_state is not None:
            state = NativeCheckpoint.model_validate(request.resume_state)
            if state.format != STATE_FORMAT:
                raise ValueError(f"cannot resume from checkpoint format {state.format!r}")
            if state.reference.sha256 != request.reference.sha256:
                raise ValueError("the checkpoint was made with a different reference image")
            self._geometry = ScreenGeometry(request.display, state.shown)
        else:
            state = NativeCheckpoint(model=request.model.model, variant=chosen, safety_checks=safety_checks,
                                     shown=self._geometry.shown, reference=request.reference,
                                     prompt_cache_key=rollout_cache_key(request))
        self._state = state
        self._images = ShownImages(request, self._geometry)
        self._last_attempt: tuple[Observation, int] | None = None

    def __repr__(self) -> str:
        shown = self._geometry.shown
        return (f"NativeOpenAISession(model={self._state.model!r}, tool={self._state.variant!r}, "
                f"shown={shown.width}x{shown.height}, steps={len(self._state.steps)})")

    __str__ = __repr__

    @property
    def geometry(self) -> ScreenGeometry:
        """The desktop and the shown screenshot size of this session."""
        return self._geometry

    @property
    def variant(self) -> ComputerVariant:
        """The declared computer tool variant."""
        return self._state.variant

    @property
    def safety_checks(self) -> SafetyPolicy:
        """The pending_safety_checks policy."""
        return self._state.safety_checks

    # --- protocol ------------------------------------------------------------------------

    async def next_turn(self, observation: Observation) -> ModelTurn:
        """Send the history plus ``observation``; map the reply's computer calls to one batch."""
        client = self._ensure_client()
        pending = self._pending_step(observation)
        kwargs = self.request_kwargs(observation)
        self._last_attempt = (observation, _body_size(kwargs))
        try:
            response = await client.responses.create(**kwargs)
        except Exception as error:
            classified = classify(error, PROVIDER)
            if classified is None:
                raise
            raise redacted(classified, self._api_key) from None
        failed = failed_response(getattr(response, "status", None), getattr(response, "error", None), PROVIDER)
        if failed is not None:
            raise redacted(failed, self._api_key)
        return self._receive(pending, response)

    def shrink(self) -> bool:
        """After a 413: drop the older half of the kept steps (never the last one).

        Returns ``True`` when the same observation then makes a strictly smaller request,
        ``False`` (state unchanged) when no request was made yet or only the last step is left.
        """
        if self._last_attempt is None:
            return False
        observation, failed_size = self._last_attempt
        steps = self._state.steps
        droppable = len(steps) - 1
        if droppable <= 0:
            return False
        drop = max(1, droppable // 2)
        saved = self._state
        self._state = saved.model_copy(update={"steps": steps[drop:], "omitted": saved.omitted + drop})
        try:
            smaller = _body_size(self.request_kwargs(observation)) < failed_size
        except ProviderRequestError:
            smaller = False
        if not smaller:
            self._state = saved
        return smaller

    def checkpoint(self) -> JsonObject:
        """The committed steps (images as checksummed references), policy, geometry and counters."""
        return copy.deepcopy(self._state.model_dump(mode="json"))

    async def aclose(self) -> None:
        """Close the SDK client."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    # --- the request -----------------------------------------------------------------------

    def tool(self) -> ComputerToolDefinition:
        """The ``tools[]`` entry of this session's variant."""
        shown = self._geometry.shown
        return tool_definition(self._state.variant, shown.width, shown.height)

    def request_kwargs(self, observation: Observation) -> dict[str, Any]:
        """The ``responses.create`` arguments for ``observation``, without changing any state."""
        o = self._options
        kwargs: dict[str, Any] = {
            "model": self._state.model,
            "instructions": native_instructions(self._geometry.shown),
            "input": self.render([*self._state.steps, self._pending_step(observation)]),
            "tools": [self.tool()],
            "store": False,
            "include": list(INCLUDE),
            "max_output_tokens": o.max_output_tokens,
            "prompt_cache_key": self._state.prompt_cache_key,
        }
        if self._state.variant == "computer_use_preview":
            kwargs["truncation"] = "auto"
        if o.reasoning_effort is not None or o.reasoning_summary is not None:
            reasoning: dict[str, Any] = {}
            if o.reasoning_effort is not None:
                reasoning["effort"] = o.reasoning_effort
            if o.reasoning_summary is not None:
                reasoning["summary"] = o.reasoning_summary
            kwargs["reasoning"] = reasoning
        if o.prompt_cache_retention is not None:
            kwargs["prompt_cache_retention"] = o.prompt_cache_retention
        return kwargs

    def render(self, steps: list[Step]) -> list[dict[str, Any]]:
        """Responses input items of ``steps`` (the last one may be the pending observation)."""
        items: list[dict[str, Any]] = []
        for index, step in enumerate(steps):
            screenshot = self._images.url(step.frame)
            if index == 0:
                content: list[dict[str, Any]] = [
                    {"type": "input_text", "text": f"Task:\n{self._request.task_prompt}"},
                    {"type": "input_text", "text": "Fixed reference image of the expected result "
                                                   "(it stays the same for the whole rollout):"},
                    {"type": "input_image", "image_url": self._images.url(self._state.reference),
                     "detail": IMAGE_DETAIL},
                ]
                if self._state.omitted:
                    content.append({"type": "input_text", "text": (
                        f"({self._state.omitted} earlier turns are omitted from this history to keep the "
                        "request small.)")})
                content.extend([
                    {"type": "input_text", "text": step.text},
                    {"type": "input_image", "image_url": screenshot, "detail": IMAGE_DETAIL},
                ])
                items.append({"role": "user", "content": content})
            else:
                previous = steps[index - 1]
                for call in previous.calls:
                    output: dict[str, Any] = {
                        "type": "computer_call_output", "call_id": call.call_id,
                        "output": {"type": "computer_screenshot", "image_url": screenshot},
                    }
                    if call.acknowledged:
                        output["acknowledged_safety_checks"] = [c.model_dump(mode="json") for c in call.acknowledged]
                    items.append(output)
                if not previous.calls:  # unreachable by construction; keeps the frame in view
                    items.append({"role": "user", "content": [
                        {"type": "input_image", "image_url": screenshot, "detail": IMAGE_DETAIL}]})
                items.append({"role": "user", "content": [{"type": "input_text", "text": step.text}]})
            items.extend(copy.deepcopy(step.items))
        return items

    def _status(self, observation: Observation) -> str:
        shown = self._geometry.shown
        return (f"Current desktop at turn {observation.turn_index} ({shown.width}x{shown.height} pixels; computer "
                f"tool coordinates are pixels of this screenshot). Actions left in this rollout: "
                f"{observation.remaining_actions}.")

    def _pending_step(self, observation: Observation) -> Step:
        steps = self._state.steps
        parts: list[str] = []
        if steps:
            for call in steps[-1].calls:
                if call.error is not None and call.error not in observation.feedback and call.error not in parts:
                    parts.append(call.error)
            parts.append(observation.feedback or "The actions ran.")
        elif observation.feedback:
            parts.append(observation.feedback)
        parts.append(self._status(observation))
        return Step(frame=observation.frame, text="\n".join(parts), items=[], calls=())

    def _ensure_client(self) -> Any:
        if not self._api_key:
            raise ProviderRequestError(ProviderErrorKind.FATAL, f"{CREDENTIAL} is not set")
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(api_key=self._api_key, base_url=self._base_url, max_retries=0,
                                              timeout=self._options.timeout_s)
        return self._client

    # --- responses -------------------------------------------------------------------------

    def _to_desktop(self, x: int, y: int) -> tuple[int, int]:
        shown = self._geometry.shown
        if x >= shown.width or y >= shown.height:
            raise ValueError(f"is outside the {shown.width}x{shown.height} screenshot")
        return self._geometry.to_desktop(x, y)

    def _receive(self, pending: Step, response: Any) -> ModelTurn:
        usage = usage_of(response)
        response_id = getattr(response, "id", None)
        items = [_dump(item) for item in (getattr(response, "output", None) or [])]
        texts: list[str] = []
        refused = False
        for item in items:
            if item.get("type") != "message":
                continue
            content: Any = item.get("content") or []
            for part in content:
                if isinstance(part, dict) and part.get("type") == "refusal":
                    refused = True
                    texts.append(str(part.get("refusal") or ""))
                elif isinstance(part, dict) and isinstance(part.get("text"), str):
                    texts.append(str(part["text"]))
        calls = [item for item in items if item.get("type") == "computer_call"]
        ids = [str(call.get("call_id")) for call in calls]
        checks = {call_id: _checks(call) for call_id, call in zip(ids, calls, strict=True)}
        all_checks = [check for found in checks.values() for check in found]
        notes = list(texts)
        if all_checks:
            verb = "acknowledged" if self._state.safety_checks == "acknowledge" else "stopped at"
            notes.append(f"[pending safety checks {verb}: " + "; ".join(c.describe() for c in all_checks) + "]")
        text = "\n".join(notes)
        status = getattr(response, "status", None)
        details = getattr(response, "incomplete_details", None)
        reason = getattr(details, "reason", None) if details is not None else None
        messages = [item for item in items if item.get("type") == "message"]

        def turn(action_input: JsonValue | None, malformed: str | None = None, stop: str | None = None) -> ModelTurn:
            call_id = ids[-1] if ids else f"{response_id or 'response'}-{self._state.uncommitted_replies}-nocall"
            return ModelTurn(tool_use_id=call_id, action_input=action_input, malformed=malformed, usage=usage,
                             response_id=response_id, text=text, stop_reason=stop or (str(status) if status else None))

        if refused:
            self._count_uncommitted()
            return turn(None, f"the model refused: {' '.join(texts).strip() or 'no explanation given'}", "refusal")
        if status == "incomplete":
            self._count_uncommitted()
            cause = reason or "unknown reason"
            return turn(None, f"the reply is incomplete ({cause}); nothing was performed", str(reason or "incomplete"))
        if not calls:
            self._count_uncommitted()
            if messages:
                return turn({"actions": [{"type": "done"}]})
            return turn(None, "the reply made no computer call and no message")
        if all_checks and self._state.safety_checks == "stop":
            self._count_uncommitted()
            named = "; ".join(c.describe() for c in all_checks)
            return turn(None, f"the computer call has pending safety checks and the policy is to stop: {named}",
                        "safety_check")
        actions, errors = self._map_calls(calls, ids)
        acknowledged = checks if self._state.safety_checks == "acknowledge" else {}
        if not errors:
            self._commit(pending, items, ids, {}, acknowledged, malformed=False)
            return turn({"actions": actions})
        problem = "; ".join(errors.values())
        self._commit(pending, items, ids, {i: errors.get(i, NOT_PERFORMED) for i in ids}, acknowledged,
                     malformed=True)
        return turn(None, problem)

    def _map_calls(self, calls: list[dict[str, Any]], ids: list[str]) -> tuple[list[JsonValue], dict[str, str]]:
        actions: list[JsonValue] = []
        errors: dict[str, str] = {}
        for call_id, call in zip(ids, calls, strict=True):
            batch = call.get("actions")
            single = call.get("action")
            if isinstance(batch, list) and batch:
                requested: list[Any] = batch
            elif single is not None:
                requested = [single]
            else:
                errors[call_id] = "the computer_call has neither an action nor actions"
                continue
            for position, action in enumerate(requested, start=1):
                label = f"action {position} ({action.get('type') if isinstance(action, dict) else '?'})"
                try:
                    step = map_computer_action(action, self._to_desktop)
                except NativeActionError as error:
                    errors[call_id] = f"{label}: {error}"
                    break
                if step.kind == "unsupported":
                    errors[call_id] = f"{label}: {step.message or 'not available on this desktop'}"
                    break
                if step.kind == "screenshot_only":
                    actions.append({"type": "wait", "seconds": SCREENSHOT_WAIT_SECONDS})
                else:
                    actions.extend(json.loads(json.dumps(step.actions)))
        return actions, errors

    def _commit(self, pending: Step, items: list[JsonObject], ids: list[str], errors: dict[str, str],
                acknowledged: dict[str, list[SafetyCheck]], *, malformed: bool) -> None:
        calls = tuple(PendingCall(call_id=i, error=errors.get(i), acknowledged=tuple(acknowledged.get(i, [])))
                      for i in ids)
        step = pending.model_copy(update={"items": items, "calls": calls})
        state = self._state
        steps = [*state.steps, step]
        keep = self._options.history_turns
        dropped = len(steps) - keep if len(steps) > 2 * keep else 0
        self._state = state.model_copy(update={
            "steps": steps[dropped:],
            "omitted": state.omitted + dropped,
            "malformed_turns": state.malformed_turns + (1 if malformed else 0),
        })
        self._images.retain([self._state.reference, *(s.frame for s in self._state.steps)])

    def _count_uncommitted(self) -> None:
        self._state = self._state.model_copy(update={"uncommitted_replies": self._state.uncommitted_replies + 1})


def _body_size(kwargs: dict[str, Any]) -> int:
    """Serialized bytes of a request body (compact JSON, UTF-8), to compare two requests."""
    return len(json.dumps(kwargs, ensure_ascii=False, separators=(",", ":")).encode())


def _checks(call: dict[str, Any]) -> list[SafetyCheck]:
    found = call.get("pending_safety_checks") or []
    out: list[SafetyCheck] = []
    for check in found:
        if isinstance(check, dict):
            out.append(SafetyCheck(id=str(check.get("id")), code=check.get("code"), message=check.get("message")))
    return out


def _dump(item: Any) -> JsonObject:
    """A response output item exactly as the API returned it (the fields it set)."""
    if isinstance(item, dict):
        return copy.deepcopy(item)
    dumped: JsonObject = item.model_dump(mode="json", exclude_unset=True, by_alias=True, warnings=False)
    return dumped
