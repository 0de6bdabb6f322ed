"""Native tool mode: one rollout driven through Anthropic's own ``computer`` tool.

:class:`NativeAnthropicSession` speaks ``client.beta.messages.create`` (official SDK,
``max_retries=0``; failures classified by :func:`autocad_bench_anthropic.errors.classify`)
with the computer-use beta flag of its tool version (none for the toolset), and turns each
response into one harness batch in desktop pixels.

Message layout::

    system    [native prompt + 5m breakpoint]        tools [computer_2025xxxx, shown size]
    user      [task, fixed reference + 5m breakpoint, desktop text, screenshot]
    assistant [text..., tool_use computer, tool_use computer, ...]   (exact, as returned)
    user      [tool_result per tool_use id; the last one: feedback + screenshot]
    ...       + top-level automatic caching on every request

Screenshots: the desktop frame is scaled to the shown geometry
(:meth:`ScreenGeometry.fit` with Anthropic's vision limits) with Lanczos before it is sent;
the tool declares the shown size, and every coordinate the model sends is mapped back with
:meth:`ScreenGeometry.to_desktop`. Any image of exactly the desktop's size (the frames, and
the reference when it has that size) is scaled; images of other sizes are sent unchanged.

Responses:

* every ``tool_use`` named ``computer`` is mapped with :func:`map_computer_action` and the
  actions of all of them are concatenated into one batch, in order. With
  ``computer_toolset_20260801`` (only when the ``computer_tool`` option names it) the tool
  declares no size and each ``tool_use`` is named after its member (the action, e.g.
  ``left_click``) and mapped with :func:`map_toolset_call`; any other name is malformed;
* a ``screenshot`` request becomes ``{"type": "wait", "seconds": 0.1}``: it costs one
  action, because the broker captures a fresh frame after every batch and the model needs a
  batch to get one;
* the session tracks the pointer position it last sent (the last point of every mapped
  action that has one; unknown at the start, kept in the checkpoint). ``left_mouse_down``/
  ``left_mouse_up`` without a coordinate act there. ``cursor_position`` costs the same 0.1 s
  wait and its tool result is ``X=..., Y=...`` in screenshot coordinates (an ``is_error``
  result while the position is unknown). The position is the one the harness sent: pointer
  moves made by the application or a rejected batch are not seen;
* ``zoom`` (``computer_20251124``, declared with ``enable_zoom``) costs the same 0.1 s wait;
  its tool result image is the next frame cropped at desktop resolution to the region
  (screenshot coordinates mapped to desktop pixels), scaled down only beyond Anthropic's
  image limits, and written to ``native-zoom/`` in the rollout directory;
* an ``unsupported`` action or a :class:`NativeActionError` makes the whole turn malformed
  (nothing runs); the next request answers that call with an ``is_error`` result carrying
  the message, and every other call of the reply with an ``is_error`` "not performed";
* ``stop_reason == "end_turn"`` without a tool call ends the episode: the batch is
  ``[{"type": "done"}]``; ``refusal`` and ``max_tokens`` (without a complete call) are
  malformed turns with their ``stop_reason`` kept.

A response with tool calls is committed to the history even when the turn is malformed,
because its calls must be answered. A response without any call commits nothing: the next
request is planned from the same history with the new observation (the core reports the
problem in its ``feedback``). A failed request commits nothing either, so resending the
same observation resends the same request.

Not done here (unlike the function-mode session): compaction, screenshot stripping and the
413 rewrite (:meth:`shrink` returns ``False``); the history grows for the whole rollout.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from autocad_bench.models import ArtifactRef, JsonObject
from autocad_bench.providers.geometry import (
    ANTHROPIC_MAX_LONG_EDGE,
    ANTHROPIC_MAX_PIXELS,
    ScreenGeometry,
    scale_png,
)
from autocad_bench.providers.models import (
    DisplaySize,
    ModelTurn,
    Observation,
    ProviderErrorKind,
    ProviderRequestError,
    SessionRequest,
    TokenUsage,
)
from autocad_bench.providers.session import ProviderSession
from autocad_bench_anthropic.caching import cache_control, system_blocks
from autocad_bench_anthropic.errors import classify
from autocad_bench_anthropic.history import (
    ArtifactIntegrityError,
    Entry,
    ImageStore,
    Json,
    image_block,
    text_block,
)
from autocad_bench_anthropic.native.actions import (
    BETA_HEADERS,
    TOOL_NAME,
    TOOL_VERSIONS,
    TOOLSET_VERSION,
    NativeActionError,
    NativeStep,
    Region,
    map_computer_action,
    map_toolset_call,
    tool_definition,
)
from autocad_bench_anthropic.options import CREDENTIAL_ENV, AnthropicOptions

if TYPE_CHECKING:
    import anthropic

STATE_FORMAT = "autocad-bench-anthropic-native/1"

DEFAULT_COMPUTER_TOOL = "computer_20250124"
"""The tool version of models not matched by :data:`COMPUTER_TOOL_BY_MODEL`."""

COMPUTER_TOOL_BY_MODEL: tuple[tuple[str, str], ...] = (
    ("opus-4-5", "computer_20251124"),
    ("opus-4-6", "computer_20251124"),
    ("opus-4-7", "computer_20251124"),
    ("opus-4-8", "computer_20251124"),
    ("opus-5", "computer_20251124"),
)
"""``(substring of the model id, tool version)``, first match wins; others get
:data:`DEFAULT_COMPUTER_TOOL`. Claude Opus 4.5 introduced ``computer_20251124`` (with
``zoom``); newer Opus ids are listed as using it too. Edit this table (or pass
``tool_version`` to :class:`NativeAnthropicSession`) to change the mapping."""

SCREENSHOT_WAIT_SECONDS = 0.1
"""The wait that stands for a ``screenshot`` request (the broker screenshots after each batch)."""

ZOOM_DIR = "native-zoom"
"""Folder of the rollout directory that holds the cropped ``zoom`` images."""

ZOOM_VERSION = "computer_20251124"
"""The tool version that has ``zoom`` (declared with ``enable_zoom``)."""

NOT_PERFORMED = "Not performed: another computer call in the same reply could not be performed."
CUT_OFF = "the reply was cut off at max_tokens"


def computer_tool_version(model: str, table: tuple[tuple[str, str], ...] = COMPUTER_TOOL_BY_MODEL) -> str:
    """The computer tool version to declare for ``model`` (first substring match in ``table``)."""
    for fragment, version in table:
        if fragment in model:
            return version
    return DEFAULT_COMPUTER_TOOL


def native_system_prompt(task: str) -> str:
    """The system prompt of native mode: the task, the tool, and how the episode ends."""
    return (
        "You operate a CAD application on a desktop through the computer tool. Each reply may make one or "
        "more computer calls; they run in order and you then get one fresh screenshot with the controller's "
        "notes. Compare your drawing with the fixed reference image in the first user message.\n\n"
        f"Task:\n{task}\n\n"
        "The episode ends when you reply without a tool call: do that only when the drawing is complete and "
        "saved."
    )


def anthropic_geometry(desktop: DisplaySize) -> ScreenGeometry:
    """The shown screenshot size for ``desktop`` within Anthropic's vision limits."""
    return ScreenGeometry.fit(desktop, max_long_edge=ANTHROPIC_MAX_LONG_EDGE, max_pixels=ANTHROPIC_MAX_PIXELS)


class ScaledImageStore(ImageStore):
    """An :class:`ImageStore` whose desktop-sized images are scaled to the shown geometry."""

    def __init__(self, root: Path, geometry: ScreenGeometry) -> None:
        super().__init__(root)
        self.geometry = geometry

    def prepare(self, data: bytes) -> bytes:
        """A desktop-sized image scaled to the shown geometry; other images as they are."""
        if not self.geometry.is_identity and self._desktop_sized(data):
            return scale_png(data, self.geometry)
        return data

    def _desktop_sized(self, data: bytes) -> bool:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:
            desktop = self.geometry.desktop
            return image.size == (desktop.width, desktop.height)


class PendingCall(BaseModel):
    """A ``tool_use`` of the last committed assistant message, and its error if it was not run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    error: str | None = None
    text: str | None = None
    """The result text of a call answered by the session (``cursor_position``)."""
    zoom: Region | None = None
    """For ``zoom``: the desktop-pixel box ``(x0, y0, x1, y1)`` (end exclusive) to crop."""


class NativeState(BaseModel):
    """Everything besides the messages that decides the next request (part of the checkpoint)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pending: tuple[PendingCall, ...] = ()
    committed_turns: int = Field(default=0, ge=0)
    malformed_turns: int = Field(default=0, ge=0)
    uncommitted_replies: int = Field(default=0, ge=0)
    pointer: tuple[int, int] | None = None
    """The last pointer position the session sent, in desktop pixels (None: unknown)."""


class NativeAnthropicSession(ProviderSession):
    """A :class:`ProviderSession` over the Messages beta with Anthropic's native computer tool."""

    def __init__(self, request: SessionRequest, options: AnthropicOptions, api_key: str | None, *,
                 tool_version: str = DEFAULT_COMPUTER_TOOL) -> None:
        if tool_version not in TOOL_VERSIONS:
            raise ValueError(f"unknown computer tool version {tool_version!r}; expected one of {sorted(TOOL_VERSIONS)}")
        self._request = request
        self._options = options
        self._model = request.model.model
        self._api_key = api_key
        self._client: anthropic.AsyncAnthropic | None = None
        self._version = tool_version
        self._geometry = anthropic_geometry(request.display)
        self._reference = request.reference
        self._system = system_blocks(options.system_prompt or native_system_prompt(request.task_prompt))
        self._task_text = (
            f"Task:\n{request.task_prompt}\n\n"
            "Fixed reference image of the expected result (it stays the same for the whole rollout):"
        )
        self._history: list[Entry] = []
        self._state = NativeState()
        if request.resume_state is not None:
            self._restore(request.resume_state)
        self._store = ScaledImageStore(request.rollout_dir, self._geometry)

    def __repr__(self) -> str:
        return (f"NativeAnthropicSession(model={self._model!r}, tool={self._version!r}, "
                f"shown={self._geometry.shown.width}x{self._geometry.shown.height}, messages={len(self._history)})")

    __str__ = __repr__

    @property
    def geometry(self) -> ScreenGeometry:
        """The desktop and the shown screenshot size of this session."""
        return self._geometry

    @property
    def tool_version(self) -> str:
        """The declared computer tool ``type``."""
        return self._version

    # --- protocol ------------------------------------------------------------------------

    async def next_turn(self, observation: Observation) -> ModelTurn:
        """Send the history plus ``observation``; map the reply's computer calls to one batch."""
        client = self._ensure_client()
        import anthropic

        pending = self._pending_message(observation)
        kwargs = self.request_kwargs(pending)
        try:
            message: Any = await client.beta.messages.create(**kwargs)
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as error:
            raise classify(error) from None
        except (anthropic.APIResponseValidationError, json.JSONDecodeError) as error:
            return self._unusable(f"the response body could not be parsed ({type(error).__name__})")
        try:
            return self._receive(pending, message)
        except (AttributeError, KeyError, TypeError) as error:
            return self._unusable(f"the response is not a Messages object ({type(error).__name__})")

    def checkpoint(self) -> JsonObject:
        """The committed messages (images as checksummed file references), pending calls, counters."""
        return copy.deepcopy({
            "format": STATE_FORMAT,
            "model": self._model,
            "tool_version": self._version,
            "shown": self._geometry.shown.model_dump(mode="json"),
            "messages": [e.ref for e in self._history],
            "state": self._state.model_dump(mode="json"),
        })

    async def aclose(self) -> None:
        """Close the SDK client."""
        if self._client is not None:
            await self._client.close()
            self._client = None

    # --- the request -----------------------------------------------------------------------

    def request_kwargs(self, pending: Entry) -> dict[str, Any]:
        """The ``beta.messages.create`` arguments of the committed history plus ``pending``."""
        shown = self._geometry.shown
        kwargs: dict[str, Any] = {
            "model": self._model,
            "max_tokens": self._options.max_tokens,
            "system": self._system,
            "tools": [tool_definition(self._version, shown.width, shown.height,
                                      enable_zoom=self._version == ZOOM_VERSION)],
            "messages": [e.render(self._store) for e in [*self._history, pending]],
            "cache_control": cache_control(),
        }
        beta = BETA_HEADERS.get(self._version)  # the toolset has no beta flag
        if beta is not None:
            kwargs["betas"] = [beta]
        return kwargs

    def _desktop_text(self, observation: Observation) -> str:
        shown = self._geometry.shown
        return (f"Current desktop screenshot ({shown.width}x{shown.height} pixels; computer tool coordinates are "
                f"pixels of this image). Actions left in this rollout: {observation.remaining_actions}.")

    def _pending_message(self, observation: Observation) -> Entry:
        pending = self._state.pending
        if not self._history or not pending:
            text = self._desktop_text(observation)
            if observation.feedback:
                text = f"{observation.feedback}\n{text}"
            content: list[Json] = [
                text_block(self._task_text),
                image_block(self._reference, cache_control=cache_control()),
                text_block(text),
                image_block(observation.frame),
            ]
            if self._history:  # unreachable by construction; keeps the message well-formed
                content = content[2:]
            return Entry({"role": "user", "content": content})
        content = []
        for call in pending[:-1]:
            if call.error is None and (call.text is not None or call.zoom is not None):
                blocks = self._answer_blocks(call, observation)
            else:
                blocks = [text_block(call.error or "Performed; the screenshot is in the last result.")]
            result: Json = {"type": "tool_result", "tool_use_id": call.id, "content": blocks}
            if call.error is not None:
                result["is_error"] = True
            content.append(result)
        last = pending[-1]
        parts = []
        if last.error is not None and last.error not in observation.feedback:
            parts.append(last.error)
        parts.append(observation.feedback or "The actions ran.")
        parts.append(self._desktop_text(observation))
        answer = self._answer_blocks(last, observation) if last.error is None else []
        final: Json = {"type": "tool_result", "tool_use_id": last.id,
                       "content": [*answer, text_block("\n".join(parts)), image_block(observation.frame)]}
        if last.error is not None:
            final["is_error"] = True
        content.append(final)
        return Entry({"role": "user", "content": content})

    def _answer_blocks(self, call: PendingCall, observation: Observation) -> list[Json]:
        """The session's own answer to ``call``: its text and, for ``zoom``, the cropped frame."""
        blocks: list[Json] = []
        if call.text is not None:
            blocks.append(text_block(call.text))
        if call.zoom is not None:
            x0, y0, x1, y1 = call.zoom
            blocks.append(text_block(f"Zoomed view of desktop pixels x {x0}-{x1 - 1}, y {y0}-{y1 - 1} "
                                     "(taken after this reply's actions ran):"))
            blocks.append(image_block(self._zoom_image(observation.frame, call.zoom)))
        return blocks

    def _zoom_image(self, frame: ArtifactRef, box: Region) -> ArtifactRef:
        """Crop ``frame`` to ``box`` (desktop pixels), shrink it to Anthropic's limits, store it.

        The file name depends only on the frame and the box, so a resent request is identical.
        """
        from PIL import Image

        root = self._request.rollout_dir
        try:
            data = (root / frame.path).read_bytes()
        except OSError as error:
            raise ArtifactIntegrityError(f"image {frame.path!r} cannot be read: {error.strerror or error}") from None
        if hashlib.sha256(data).hexdigest() != frame.sha256:
            raise ArtifactIntegrityError(f"image {frame.path!r} does not match its recorded sha256 checksum")
        with Image.open(io.BytesIO(data)) as image:
            crop = image.crop(box)
            size = DisplaySize(width=crop.width, height=crop.height)
            fitted = anthropic_geometry(size)
            if not fitted.is_identity:
                crop = crop.resize((fitted.shown.width, fitted.shown.height), Image.Resampling.LANCZOS)
            buffer = io.BytesIO()
            crop.save(buffer, format="PNG")
        png = buffer.getvalue()
        relative = f"{ZOOM_DIR}/{frame.sha256[:16]}-{'-'.join(map(str, box))}.png"
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(png)
        return ArtifactRef(path=relative, sha256=hashlib.sha256(png).hexdigest(),
                           width=crop.width, height=crop.height)

    def _zoom_box(self, region: Region) -> Region:
        """The desktop-pixel box (end exclusive) of a shown-screenshot ``region``."""
        shown, desktop = self._geometry.shown, self._geometry.desktop
        x0, y0, x1, y1 = region
        if x1 > shown.width or y1 > shown.height:
            raise NativeActionError(
                f"region {list(region)} is outside the {shown.width}x{shown.height} screenshot; "
                f"x1 may be at most {shown.width} and y1 at most {shown.height}"
            )
        left = math.floor(x0 * desktop.width / shown.width)
        top = math.floor(y0 * desktop.height / shown.height)
        right = max(left + 1, min(desktop.width, math.ceil(x1 * desktop.width / shown.width)))
        bottom = max(top + 1, min(desktop.height, math.ceil(y1 * desktop.height / shown.height)))
        return (left, top, right, bottom)

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

    def _to_desktop(self, x: int, y: int) -> tuple[int, int]:
        shown = self._geometry.shown
        if x >= shown.width or y >= shown.height:
            raise ValueError(f"is outside the {shown.width}x{shown.height} screenshot")
        return self._geometry.to_desktop(x, y)

    def _receive(self, pending: Entry, message: Any) -> ModelTurn:
        usage = _usage(message)
        blocks = [_dump(block) for block in (message.content or [])]
        text = "\n".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
        stop_reason = message.stop_reason
        response_id = message.id
        calls = [b for b in blocks if b.get("type") == "tool_use"]
        ids = [str(c.get("id")) for c in calls]

        def turn(action_input: JsonValue | None, malformed: str | None = None) -> ModelTurn:
            call_id = ids[-1] if ids else f"missing-{response_id or self._state.uncommitted_replies}"
            return ModelTurn(tool_use_id=call_id, action_input=action_input, malformed=malformed, usage=usage,
                             response_id=response_id, text=text, stop_reason=stop_reason)

        if stop_reason == "refusal":
            problem = f"the model refused: {text.strip() or 'no explanation given'}"
            errors = {i: "Not performed: the reply ended in a refusal." for i in ids}
        elif stop_reason == "max_tokens" and (not calls or blocks[-1].get("type") == "tool_use"):
            problem = CUT_OFF
            errors = {i: f"Not performed: {CUT_OFF}; send the call again." for i in ids}
        elif not calls:
            if stop_reason == "end_turn":
                self._count_uncommitted()
                return turn({"actions": [{"type": "done"}]})
            problem = f"the reply made no computer call (stop_reason={stop_reason})"
            errors = {}
        else:
            actions, errors, answers, pointer = self._map_calls(calls)
            if not errors:
                self._commit(pending, blocks, ids, {}, malformed=False, answers=answers, pointer=pointer)
                return turn({"actions": actions})
            problem = "; ".join(errors.values())
            errors = {i: errors.get(i, NOT_PERFORMED) for i in ids}
        if calls:
            self._commit(pending, blocks, ids, errors, malformed=True)
        else:
            self._count_uncommitted()
        return turn(None, problem)

    def _map_calls(
        self, calls: list[Json]
    ) -> tuple[list[JsonValue], dict[str, str], dict[str, PendingCall], tuple[int, int] | None]:
        """The batch, the errors by call id, the session's own answers by call id, the pointer after."""
        actions: list[JsonValue] = []
        errors: dict[str, str] = {}
        answers: dict[str, PendingCall] = {}
        pointer = self._state.pointer
        for call in calls:
            call_id = str(call.get("id"))
            if self._version != TOOLSET_VERSION and call.get("name") != TOOL_NAME:
                errors[call_id] = f"unknown tool {call.get('name')!r}; the only tool is {TOOL_NAME!r}"
                continue
            tool_input: Any = call.get("input")
            try:
                step: NativeStep
                if self._version == TOOLSET_VERSION:
                    step = map_toolset_call(call.get("name"), tool_input, self._to_desktop, pointer)
                else:
                    step = map_computer_action(tool_input, self._version, self._to_desktop, pointer)
                if step.kind == "zoom":
                    assert step.region is not None
                    answers[call_id] = PendingCall(id=call_id, zoom=self._zoom_box(step.region))
            except NativeActionError as error:
                errors[call_id] = str(error)
                continue
            if step.kind == "unsupported":
                errors[call_id] = step.message or "this action is not available on this desktop"
            elif step.kind == "cursor_position":
                if pointer is None:
                    errors[call_id] = ("the pointer position is not known yet; move the pointer with mouse_move "
                                       "or click somewhere first")
                    continue
                x, y = self._geometry.to_shown(*pointer)
                answers[call_id] = PendingCall(id=call_id, text=f"X={x}, Y={y}")
                actions.append({"type": "wait", "seconds": SCREENSHOT_WAIT_SECONDS})
            elif step.kind in ("screenshot_only", "zoom"):
                actions.append({"type": "wait", "seconds": SCREENSHOT_WAIT_SECONDS})
            else:
                actions.extend(_json_actions(step.actions))
                pointer = _last_point(step.actions) or pointer
        return actions, errors, answers, pointer

    def _commit(self, pending: Entry, blocks: list[Json], ids: list[str], errors: dict[str, str], *,
                malformed: bool, answers: dict[str, PendingCall] | None = None,
                pointer: tuple[int, int] | None = None) -> None:
        self._history = [*self._history, pending, Entry({"role": "assistant", "content": blocks})]
        state = self._state
        answers = answers or {}
        self._state = NativeState(
            pending=tuple(answers.get(i) or PendingCall(id=i, error=errors.get(i)) for i in ids),
            committed_turns=state.committed_turns + 1,
            malformed_turns=state.malformed_turns + (1 if malformed else 0),
            uncommitted_replies=state.uncommitted_replies,
            pointer=state.pointer if malformed else pointer,
        )
        self._store.retain([s for e in self._history for s in e.image_shas()])

    def _count_uncommitted(self) -> None:
        self._state = self._state.model_copy(update={"uncommitted_replies": self._state.uncommitted_replies + 1})

    def _unusable(self, problem: str) -> ModelTurn:
        count = self._state.uncommitted_replies
        self._count_uncommitted()
        return ModelTurn(tool_use_id=f"unparsed-{self._state.committed_turns}-{count}", action_input=None,
                         malformed=problem)

    # --- resume ------------------------------------------------------------------------------

    def _restore(self, saved: JsonObject) -> None:
        if saved.get("format") != STATE_FORMAT:
            raise ValueError(f"unsupported native Anthropic checkpoint format {saved.get('format')!r}")
        version = saved.get("tool_version")
        if not isinstance(version, str) or version not in TOOL_VERSIONS:
            raise ValueError(f"native Anthropic checkpoint has an unknown tool version {version!r}")
        messages = saved.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ValueError("native Anthropic checkpoint has no message list")
        try:
            self._state = NativeState.model_validate(saved.get("state") or {})
            shown = DisplaySize.model_validate(saved.get("shown"))
        except ValidationError as error:
            raise ValueError(f"invalid native Anthropic checkpoint: {error}") from None
        self._version = version
        self._geometry = ScreenGeometry(self._request.display, shown)
        self._history = [Entry(dict(copy.deepcopy(m))) for m in messages if isinstance(m, dict)]


def _last_point(actions: list[dict[str, object]]) -> tuple[int, int] | None:
    """Where ``actions`` (wire form) leave the pointer: the last point any of them names."""
    point: tuple[int, int] | None = None
    for action in actions:
        x, y, path = action.get("x"), action.get("y"), action.get("path")
        if isinstance(x, int) and isinstance(y, int):
            point = (x, y)
        elif isinstance(path, list | tuple) and path:
            last = path[-1]
            if isinstance(last, list | tuple) and len(last) == 2 and all(isinstance(v, int) for v in last):
                point = (int(last[0]), int(last[1]))
    return point


def _json_actions(actions: list[dict[str, object]]) -> list[JsonValue]:
    out: list[JsonValue] = json.loads(json.dumps(actions))
    return out


def _dump(block: Any) -> Json:
    """A response content block exactly as the API returned it (what the SDK would send back)."""
    if isinstance(block, dict):
        return dict(block)
    dumped: Json = block.model_dump(mode="json", exclude_unset=True, by_alias=True, warnings=False)
    return dumped


def _usage(message: Any) -> TokenUsage:
    u = getattr(message, "usage", None)
    if u is None:
        return TokenUsage()
    return TokenUsage(
        input_tokens=u.input_tokens or 0,
        cached_input_tokens=u.cache_read_input_tokens or 0,
        cache_write_tokens=u.cache_creation_input_tokens or 0,
        output_tokens=u.output_tokens or 0,
    )
