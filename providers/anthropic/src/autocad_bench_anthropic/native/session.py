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
* the pointer: a reply's batch starts where :attr:`Observation.pointer` says the pointer
  was when the observed frame was captured (the broker's reading, so moves the application
  made itself count); without it, at the last position the session sent (kept in the
  checkpoint; unknown at the start). Every mapped action that names a point moves it on.
  ``left_mouse_down``/``left_mouse_up``, clicks and scrolls without a coordinate act at that
  current position (an ``unsupported`` result while it is unknown). ``cursor_position``
  costs the same 0.1 s wait and its tool result is ``X=..., Y=...`` in screenshot
  coordinates: the pointer of the *next* observation when it carries one and no later call
  of the same reply moved the pointer, else the current position at that call (an
  ``is_error`` result while it is unknown);
* ``zoom`` (``computer_20251124``, declared with ``enable_zoom``) costs the same 0.1 s wait;
  its tool result image is the next frame (desktop resolution) cropped to the region
  (screenshot coordinates mapped to desktop pixels) and resized with Lanczos to
  :func:`zoom_size`: the largest size within Anthropic's image limits with the region's
  aspect ratio, so a small region is scaled *up* to fill the image budget, as the SDK's
  ``BetaComputerZoomInput`` describes. It is written to ``native-zoom/`` in the rollout
  directory;
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

History bounds (the function session's server-mode rules, without a model-made summary):

* **recent screenshots.** The history keeps the images (screenshots and zoom crops) of the
  ``history_turns`` to ``2 * history_turns`` most recent user messages; when a commit
  passes the upper bound, the images of all but the newest ``history_turns`` are replaced
  by a short text (:func:`~autocad_bench_anthropic.history.screenshot_placeholder`). Cut in
  one step, the request prefix stays byte-identical (and cached) between two cuts. Every
  ``tool_use`` keeps its ``tool_result``; only images go;
* **the byte guard.** A request above ``request_guard_bytes`` (the function session's
  option) or with more than :data:`MAX_REQUEST_IMAGES` images has every historical image
  replaced, then, while still above the guard, the oldest complete assistant/result pairs
  dropped (a pair holds a reply's ``tool_use`` blocks and the message that answers them);
* **413.** :meth:`shrink` rewrites the committed history so that the same observation
  makes a strictly smaller request (first every historical image removed; if that is not
  enough, the older half of the complete pairs dropped too) and returns ``True``;
  ``False`` when no rewrite is smaller (nothing committed yet, or nothing left to remove).

The first user message (task and the fixed reference, with its cache breakpoint) is never
dropped and the reference never stripped, so the three cache breakpoints stay where
:mod:`autocad_bench_anthropic.caching` puts them. Stripped and dropped counts are kept in
the checkpoint (``screenshots_removed``, ``pairs_dropped``).
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import math
from dataclasses import dataclass
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
    drop_oldest_pairs,
    encoded_size,
    image_block,
    iter_images,
    messages_size,
    strip_screenshots,
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

DEFAULT_HISTORY_TURNS = 16
"""Default ``history_turns``: the images of the 16 to 32 most recent user messages are kept
(the same default, and the same keep-between-N-and-2N rule, as the OpenAI sessions'
``history_turns`` option)."""

MAX_REQUEST_IMAGES = 100
"""Most images one Messages API request may carry (Anthropic vision docs, "up to 100 images
per API request"); the byte guard also strips historical images above it."""

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


def zoom_size(width: int, height: int) -> DisplaySize:
    """The size a ``width`` x ``height`` zoom crop is shown at: the largest size within
    Anthropic's image limits (long edge, megapixels) with the crop's aspect ratio.

    Larger than the crop when the crop is small (the zoom fills the image budget), smaller
    when it exceeds the limits; the short edge is rounded as :meth:`ScreenGeometry.fit`
    rounds it, and is at least 1. Raises ``ValueError`` for a size below 1.
    """
    if width < 1 or height < 1:
        raise ValueError(f"a zoom crop must be at least 1x1, got {width}x{height}")
    # fit() never goes above its input, so hand it the crop blown up past the limits (same
    # aspect ratio): the result is then bounded only by the limits.
    factor = ANTHROPIC_MAX_LONG_EDGE
    blown_up = DisplaySize(width=width * factor, height=height * factor)
    return anthropic_geometry(blown_up).shown


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
    """A fixed result text of a call answered by the session."""
    cursor: tuple[int, int] | None = None
    """For ``cursor_position``: the pointer (desktop pixels) at that call of the batch."""
    cursor_observed: bool = False
    """For ``cursor_position``: no later call of the reply moved the pointer, so the next
    observation's :attr:`Observation.pointer`, when present, is the answer."""
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
    """The pointer position after the last committed batch, in desktop pixels (None:
    unknown): the last point it sent, or the observed pointer the batch started from."""
    screenshots_removed: int = Field(default=0, ge=0)
    """Historical images replaced by a text (history bound, byte guard, 413 rewrite)."""
    pairs_dropped: int = Field(default=0, ge=0)
    """Complete assistant/result pairs dropped (byte guard, 413 rewrite)."""


@dataclass
class Plan:
    """The request one observation leads to (history + pending message) and its size."""

    messages: list[Entry]
    size: int
    images: int
    stripped: int = 0
    dropped: int = 0


class NativeAnthropicSession(ProviderSession):
    """A :class:`ProviderSession` over the Messages beta with Anthropic's native computer tool."""

    def __init__(self, request: SessionRequest, options: AnthropicOptions, api_key: str | None, *,
                 tool_version: str = DEFAULT_COMPUTER_TOOL, history_turns: int = DEFAULT_HISTORY_TURNS) -> None:
        if tool_version not in TOOL_VERSIONS:
            raise ValueError(f"unknown computer tool version {tool_version!r}; expected one of {sorted(TOOL_VERSIONS)}")
        if history_turns < 1:
            raise ValueError(f"history_turns must be at least 1, got {history_turns}")
        self._history_turns = history_turns
        self._last_attempt: tuple[Observation, int] | None = None
        self._skeleton_size: int | None = None
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

        plan = self._plan(observation)
        self._last_attempt = (observation, plan.size)
        kwargs = self._kwargs(plan.messages)
        try:
            message: Any = await client.beta.messages.create(**kwargs)
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as error:
            raise classify(error) from None
        except (anthropic.APIResponseValidationError, json.JSONDecodeError) as error:
            return self._unusable(f"the response body could not be parsed ({type(error).__name__})")
        try:
            return self._receive(observation, plan, message)
        except (AttributeError, KeyError, TypeError) as error:
            return self._unusable(f"the response is not a Messages object ({type(error).__name__})")

    def shrink(self) -> bool:
        """After a 413: rewrite the history so the same observation makes a smaller request.

        First every historical image is replaced by a short text; if that does not make the
        request smaller, the older half of the complete assistant/result pairs is dropped
        too. Returns ``True`` once the rewritten request is strictly smaller than the one
        refused, ``False`` (history unchanged) when no request was made yet or nothing
        smaller is possible.
        """
        if self._last_attempt is None or not self._history:
            return False
        observation, failed_size = self._last_attempt
        saved_history, saved_state = self._history, self._state
        try:
            smaller = self._shrink_history(observation, failed_size)
        except ProviderRequestError:
            smaller = False
        if not smaller:
            self._history, self._state = saved_history, saved_state
        return smaller

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

    def request_kwargs(self, observation: Observation) -> dict[str, Any]:
        """The ``beta.messages.create`` arguments ``observation`` leads to (no state changes).

        Raises :class:`ArtifactIntegrityError` when an image file is missing or changed.
        """
        return self._kwargs(self._plan(observation).messages)

    def _body(self) -> dict[str, Any]:
        shown = self._geometry.shown
        return {
            "model": self._model,
            "max_tokens": self._options.max_tokens,
            "system": self._system,
            "tools": [tool_definition(self._version, shown.width, shown.height,
                                      enable_zoom=self._version == ZOOM_VERSION)],
            "cache_control": cache_control(),
        }

    def _kwargs(self, messages: list[Entry]) -> dict[str, Any]:
        kwargs = self._body()
        kwargs["messages"] = [e.render(self._store) for e in messages]
        beta = BETA_HEADERS.get(self._version)  # the toolset has no beta flag
        if beta is not None:
            kwargs["betas"] = [beta]
        return kwargs

    def _size(self, messages: list[Entry]) -> int:
        """Serialized bytes of the request body the SDK sends for ``messages``."""
        if self._skeleton_size is None:
            self._skeleton_size = encoded_size({**self._body(), "messages": []})
        return self._skeleton_size + messages_size(messages, self._store)

    # --- history bounds --------------------------------------------------------------------

    def _plan(self, observation: Observation) -> Plan:
        """The request for ``observation``: committed history plus the pending message, guarded."""
        messages = [*self._history, self._pending_message(observation)]
        plan = Plan(messages, self._size(messages), _image_count(messages))
        if plan.size > self._options.request_guard_bytes or plan.images > MAX_REQUEST_IMAGES:
            self._guard(plan)
        return plan

    def _guard(self, plan: Plan) -> None:
        """Bring a request above the byte guard (or the image limit) down: strip, then drop pairs."""
        *older, pending = plan.messages
        stripped = []
        for entry in older:
            new, removed = strip_screenshots(entry, self._reference, self._store)
            stripped.append(new)
            plan.stripped += removed
        plan.messages = [*stripped, pending]
        plan.size = self._size(plan.messages)
        # Pairs go from the history only: the pending results and the current desktop stay.
        while plan.size > self._options.request_guard_bytes:
            stripped, dropped = drop_oldest_pairs(stripped, 1)
            if not dropped:
                break
            plan.dropped += dropped
            plan.messages = [*stripped, pending]
            plan.size = self._size(plan.messages)
        plan.images = _image_count(plan.messages)

    def _bounded(self, history: list[Entry]) -> tuple[list[Entry], int]:
        """``history`` with the images of all but the newest ``history_turns`` user messages
        replaced, once more than ``2 * history_turns`` of them carry images."""
        keep = (self._reference.path, self._reference.sha256)
        carriers = [i for i, entry in enumerate(history)
                    if entry.role == "user" and any((b["source"]["path"], b["source"]["sha256"]) != keep
                                                    for b in iter_images(entry.ref))]
        if len(carriers) <= 2 * self._history_turns:
            return history, 0
        bounded = list(history)
        removed = 0
        for index in carriers[:-self._history_turns]:
            bounded[index], count = strip_screenshots(bounded[index], self._reference, self._store)
            removed += count
        return bounded, removed

    def _shrink_history(self, observation: Observation, failed_size: int) -> bool:
        removed = 0
        history = []
        for entry in self._history:
            new, count = strip_screenshots(entry, self._reference, self._store)
            history.append(new)
            removed += count
        if removed and self._adopt(history, observation, failed_size, removed=removed, dropped=0):
            return True
        pairs = sum(1 for e in history[1:] if e.role == "assistant")
        history, dropped = drop_oldest_pairs(history, max(1, pairs // 2))
        return bool(dropped) and self._adopt(history, observation, failed_size, removed=removed, dropped=dropped)

    def _adopt(self, history: list[Entry], observation: Observation, failed_size: int, *,
               removed: int, dropped: int) -> bool:
        """Take ``history`` (and count the rewrite) if the request it makes is smaller."""
        previous_history, previous_state = self._history, self._state
        self._history = history
        self._state = self._state.model_copy(update={
            "screenshots_removed": self._state.screenshots_removed + removed,
            "pairs_dropped": self._state.pairs_dropped + dropped,
        })
        if self._plan(observation).size < failed_size:
            return True
        self._history, self._state = previous_history, previous_state
        return False

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
            if call.error is None and (call.text is not None or call.cursor is not None or call.zoom is not None):
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
        if call.cursor is not None:
            observed = observation.pointer if call.cursor_observed else None
            x, y = self._geometry.to_shown(*(observed if observed is not None else call.cursor))
            blocks.append(text_block(f"X={x}, Y={y}"))
        if call.zoom is not None:
            x0, y0, x1, y1 = call.zoom
            blocks.append(text_block(f"Zoomed view of desktop pixels x {x0}-{x1 - 1}, y {y0}-{y1 - 1} "
                                     "(taken after this reply's actions ran):"))
            blocks.append(image_block(self._zoom_image(observation.frame, call.zoom)))
        return blocks

    def _zoom_image(self, frame: ArtifactRef, box: Region) -> ArtifactRef:
        """Crop ``frame`` to ``box`` (desktop pixels), resize it to :func:`zoom_size`, store it.

        The file name depends only on the frame and the box, so a resent request is
        identical. Raises :class:`ArtifactIntegrityError` when the frame is missing or
        changed.
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
            buffer = io.BytesIO()
            crop.save(buffer, format="PNG")
        cropped = DisplaySize(width=crop.width, height=crop.height)
        shown = zoom_size(cropped.width, cropped.height)
        png = scale_png(buffer.getvalue(), ScreenGeometry(cropped, shown))
        relative = f"{ZOOM_DIR}/{frame.sha256[:16]}-{'-'.join(map(str, box))}.png"
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(png)
        return ArtifactRef(path=relative, sha256=hashlib.sha256(png).hexdigest(),
                           width=shown.width, height=shown.height)

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

    def _receive(self, observation: Observation, plan: Plan, message: Any) -> ModelTurn:
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
            problem = None
            errors = {}
        start = observation.pointer if observation.pointer is not None else self._state.pointer
        if calls and problem is None:
            actions, errors, answers, pointer = self._map_calls(calls, start)
            if not errors:
                self._commit(plan, blocks, ids, {}, malformed=False, answers=answers, pointer=pointer)
                return turn({"actions": actions})
            problem = "; ".join(errors.values())
            errors = {i: errors.get(i, NOT_PERFORMED) for i in ids}
        if calls:
            self._commit(plan, blocks, ids, errors, malformed=True, pointer=start)
        else:
            self._count_uncommitted()
        return turn(None, problem)

    def _map_calls(
        self, calls: list[Json], pointer: tuple[int, int] | None
    ) -> tuple[list[JsonValue], dict[str, str], dict[str, PendingCall], tuple[int, int] | None]:
        """The batch, the errors by call id, the session's own answers by call id, the pointer after.

        ``pointer`` is where the batch starts (desktop pixels; None: unknown).
        """
        actions: list[JsonValue] = []
        errors: dict[str, str] = {}
        answers: dict[str, PendingCall] = {}
        cursors: list[str] = []
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
                answers[call_id] = PendingCall(id=call_id, cursor=pointer, cursor_observed=True)
                cursors.append(call_id)
                actions.append({"type": "wait", "seconds": SCREENSHOT_WAIT_SECONDS})
            elif step.kind in ("screenshot_only", "zoom"):
                actions.append({"type": "wait", "seconds": SCREENSHOT_WAIT_SECONDS})
            else:
                actions.extend(_json_actions(step.actions))
                moved = _last_point(step.actions)
                if moved is not None and moved != pointer:
                    pointer = moved
                    # A later move: the next observation no longer shows the earlier answers.
                    for earlier in cursors:
                        answers[earlier] = answers[earlier].model_copy(update={"cursor_observed": False})
                    cursors.clear()
        return actions, errors, answers, pointer

    def _commit(self, plan: Plan, blocks: list[Json], ids: list[str], errors: dict[str, str], *,
                malformed: bool, answers: dict[str, PendingCall] | None = None,
                pointer: tuple[int, int] | None = None) -> None:
        history, removed = self._bounded([*plan.messages, Entry({"role": "assistant", "content": blocks})])
        self._history = history
        state = self._state
        answers = answers or {}
        self._state = NativeState(
            pending=tuple(answers.get(i) or PendingCall(id=i, error=errors.get(i)) for i in ids),
            committed_turns=state.committed_turns + 1,
            malformed_turns=state.malformed_turns + (1 if malformed else 0),
            uncommitted_replies=state.uncommitted_replies,
            pointer=pointer,
            screenshots_removed=state.screenshots_removed + plan.stripped + removed,
            pairs_dropped=state.pairs_dropped + plan.dropped,
        )
        self._store.retain([self._reference.sha256, *(s for e in self._history for s in e.image_shas())])

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


def _image_count(messages: list[Entry]) -> int:
    return sum(len(e.image_shas()) for e in messages)


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
