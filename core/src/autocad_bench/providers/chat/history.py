"""The model-visible conversation of one rollout: append-only, byte-bounded, resumable.

Shared by the OpenAI-compatible providers (Fireworks, AWS Mantle), whatever the wire
format: a :class:`Renderer` turns the stored records into Chat Completions messages
(:mod:`.wire`) or Responses input items.

The first user message carries the task, the fixed reference and the live desktop. Each
later turn appends, without touching anything before it, the assistant's response, the
controller's answer to its tool call and (when the desktop changed) a user message with
the newest screenshot. Every message is rendered to its wire form and serialized once,
so the prefix of the next request is byte-identical and its size is known without
serializing the whole body again.

Before a request would exceed any limit (message count, serialized bytes, image count,
base64 image bytes) or after a body-length rejection, the history is replaced by one
fresh compaction summary: the task, the reference, a bounded summary of the most recent
controller outcomes and the current desktop. Nothing else is summarized and no extra
model call is made, so compaction is deterministic.

Images are referenced by :class:`~autocad_bench.models.ArtifactRef` (path relative to the
rollout directory plus SHA-256) in records and checkpoints; their bytes are read,
checksum-verified and base64-encoded once per rollout, when first rendered.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from pydantic import JsonValue

from autocad_bench.models import ArtifactRef, JsonObject
from autocad_bench.providers.models import Observation, SessionRequest
from autocad_bench.providers.support.text import clip

STATE_VERSION = 1
MiB = 1024 * 1024

Record = dict[str, Any]
"""One message as stored in checkpoints: JSON, images as ``{"type": "image_ref", "ref": ...}``."""

WireItem = dict[str, Any]


def dumps(value: Any) -> bytes:
    """JSON exactly as the OpenAI SDK serializes request bodies (compact, UTF-8, no NaN)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class FrameChecksumError(ValueError):
    """An image file no longer matches the SHA-256 recorded for it; nothing was sent."""


class ImageStore:
    """Reads, verifies and base64-encodes rollout images once; keeps only those still in use."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._cache: dict[str, str] = {}

    def base64(self, ref: ArtifactRef) -> str:
        cached = self._cache.get(ref.sha256)
        if cached is not None:
            return cached
        path = self._root / ref.path
        try:
            data = path.read_bytes()
        except OSError as error:
            raise FrameChecksumError(
                f"image {ref.path} cannot be read ({error}); expected sha256 {ref.sha256}"
            ) from None
        digest = hashlib.sha256(data).hexdigest()
        if digest != ref.sha256:
            raise FrameChecksumError(
                f"image {ref.path} has sha256 {digest} but the trace recorded {ref.sha256}: checksum mismatch"
            )
        encoded = base64.b64encode(data).decode("ascii")
        self._cache[ref.sha256] = encoded
        return encoded

    def retain(self, digests: set[str]) -> None:
        for digest in [d for d in self._cache if d not in digests]:
            del self._cache[digest]


class Renderer(Protocol):
    """Turns stored records into wire items of one API (Chat Completions or Responses)."""

    container_key: str
    """Body key holding the rendered items (``messages`` or ``input``)."""

    def render(self, record: Record, images: ImageStore) -> list[WireItem]: ...


@dataclass(frozen=True, slots=True)
class HistoryLimits:
    """When the conversation is cut to a fresh compaction summary (any limit crossed)."""

    max_messages: int = 24
    max_request_bytes: int = 8 * MiB
    max_images: int = 30
    max_image_base64_bytes: int = 10_000_000
    summary_outcomes: int = 16
    outcome_chars: int = 400
    call_chars: int = 240

    @classmethod
    def of(cls, options: LimitOptions) -> HistoryLimits:
        """The limits a provider's options set (the summary clipping keeps its defaults)."""
        return cls(
            max_messages=options.max_messages,
            max_request_bytes=options.max_request_bytes,
            max_images=options.max_images,
            max_image_base64_bytes=options.max_image_base64_bytes,
            summary_outcomes=options.summary_outcomes,
        )


class LimitOptions(Protocol):
    """Provider options that carry the history limits (fields of the same names)."""

    @property
    def max_messages(self) -> int: ...

    @property
    def max_request_bytes(self) -> int: ...

    @property
    def max_images(self) -> int: ...

    @property
    def max_image_base64_bytes(self) -> int: ...

    @property
    def summary_outcomes(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Entry:
    """A record with its rendered wire items, their serialized sizes and image counts."""

    record: Record
    items: tuple[WireItem, ...]
    size: int
    images: int
    image_bytes: int
    digests: frozenset[str]


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """The next request, computed without changing the history (committed on success)."""

    entries: tuple[Entry, ...]
    new_entries: int
    compacted: bool
    reason: str | None
    size: int
    images: int
    image_bytes: int
    pending_outcome: JsonObject | None
    sent_frame: str | None
    observation_turn: int

    @property
    def messages(self) -> int:
        return sum(len(e.items) for e in self.entries)

    def wire(self) -> list[WireItem]:
        return [item for entry in self.entries for item in entry.items]


@dataclass(slots=True)
class _State:
    entries: list[Entry] = field(default_factory=list)
    awaiting: JsonObject | None = None
    outcomes: list[JsonObject] = field(default_factory=list)
    compactions: int = 0
    responses: int = 0
    last_frame: str | None = None
    force_compaction: bool = False


class Conversation:
    """The history state machine of one session.

    :meth:`prepare` builds the next request for an observation; :meth:`commit` appends it
    and the model's reply once a response arrived, so a failed request leaves everything
    unchanged and the retry is byte-identical. ``overhead`` is the serialized size of the
    request body with an empty item list; request sizes are exact for the SDK serializer.
    """

    def __init__(
        self,
        request: SessionRequest,
        limits: HistoryLimits,
        renderer: Renderer,
        overhead: int,
        images: ImageStore | None = None,
    ) -> None:
        self._request = request
        self.limits = limits
        self._renderer = renderer
        self._overhead = overhead
        self.images = images or ImageStore(request.rollout_dir)
        self._s = _State()
        self._last: PreparedRequest | None = None

    # --- queries --------------------------------------------------------------------------

    @property
    def responses(self) -> int:
        """Responses committed so far (the next response's sequence number)."""
        return self._s.responses

    @property
    def compactions(self) -> int:
        return self._s.compactions

    @property
    def retained_messages(self) -> int:
        return sum(len(e.items) for e in self._s.entries)

    # --- the turn -------------------------------------------------------------------------

    def prepare(self, observation: Observation) -> PreparedRequest:
        """The request answering ``observation``; raises :class:`FrameChecksumError` before any send."""
        s = self._s
        pending = self._pending_outcome(observation)
        new_records: list[Record] = []
        sent_frame: str | None = s.last_frame
        if not s.entries:
            new_records.append(self._initial_message(observation))
            sent_frame = observation.frame.sha256
        else:
            call_id = s.awaiting.get("call_id") if s.awaiting else None
            if isinstance(call_id, str):
                new_records.append({"role": "tool", "tool_call_id": call_id,
                                    "content": observation.feedback or "No controller feedback."})
            if observation.frame.sha256 != s.last_frame:
                new_records.append(self._desktop_message(observation, with_feedback=call_id is None))
                sent_frame = observation.frame.sha256
            elif call_id is None:
                new_records.append(self._text_message(observation))
        new_entries = [self._entry(r) for r in new_records]
        candidate = [*s.entries, *new_entries]
        reason = "forced" if s.force_compaction else self._limit_crossed(candidate)
        compacted = reason is not None and bool(s.entries)
        if compacted:
            outcomes = [*s.outcomes, *([pending] if pending else [])][-self.limits.summary_outcomes:]
            candidate = [self._entry(self._checkpoint_message(observation, outcomes))]
            new_entries = candidate
            sent_frame = observation.frame.sha256
        prepared = PreparedRequest(
            entries=tuple(candidate),
            new_entries=len(new_entries),
            compacted=compacted,
            reason=reason if compacted else None,
            size=self._size(candidate),
            images=sum(e.images for e in candidate),
            image_bytes=sum(e.image_bytes for e in candidate),
            pending_outcome=pending,
            sent_frame=sent_frame,
            observation_turn=observation.turn_index,
        )
        self._last = prepared
        return prepared

    def commit(self, prepared: PreparedRequest, assistant: Record, call_id: str | None, call_summary: str) -> None:
        """Append ``prepared`` and the assistant's reply; ``call_id`` is the call to answer next."""
        s = self._s
        entry = self._entry(assistant)
        if prepared.pending_outcome is not None:
            s.outcomes = [*s.outcomes, prepared.pending_outcome][-self.limits.summary_outcomes:]
        s.entries = [*prepared.entries, entry]
        s.awaiting = {"turn": prepared.observation_turn, "call_id": call_id,
                      "summary": clip(call_summary, self.limits.call_chars)}
        s.responses += 1
        s.compactions += int(prepared.compacted)
        s.last_frame = prepared.sent_frame
        s.force_compaction = False
        self._last = None
        self.images.retain(set().union(*(e.digests for e in s.entries)))

    def shrink(self) -> bool:
        """Force compaction of the pending request; ``False`` if it is already a bare compaction summary."""
        last = self._last
        if last is None or len(last.entries) <= 1:
            return False
        self._s.force_compaction = True
        return True

    # --- checkpoint -----------------------------------------------------------------------

    def snapshot(self) -> JsonObject:
        s = self._s
        state: JsonObject = {
            "version": STATE_VERSION,
            "messages": [cast(JsonValue, e.record) for e in s.entries],
            "awaiting": s.awaiting,
            "outcomes": cast(list[JsonValue], s.outcomes),
            "compactions": s.compactions,
            "responses": s.responses,
            "last_frame": s.last_frame,
            "force_compaction": s.force_compaction,
        }
        return copy.deepcopy(state)

    def restore(self, state: JsonObject) -> None:
        """Rebuild from :meth:`snapshot` output, re-verifying every referenced image."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported provider state version {state.get('version')!r}")
        messages = state.get("messages")
        if not isinstance(messages, list):
            raise ValueError("provider state has no message list")
        awaiting = state.get("awaiting")
        outcomes = state.get("outcomes") or []
        last_frame = state.get("last_frame")
        self._s = _State(
            entries=[self._entry(copy.deepcopy(m)) for m in messages if isinstance(m, dict)],
            awaiting=copy.deepcopy(awaiting) if isinstance(awaiting, dict) else None,
            outcomes=[copy.deepcopy(o) for o in outcomes if isinstance(o, dict)] if isinstance(outcomes, list) else [],
            compactions=_int(state.get("compactions")),
            responses=_int(state.get("responses")),
            last_frame=last_frame if isinstance(last_frame, str) else None,
            force_compaction=state.get("force_compaction") is True,
        )

    # --- internals ------------------------------------------------------------------------

    def _entry(self, record: Record) -> Entry:
        items = tuple(self._renderer.render(record, self.images))
        digests = frozenset(_image_digests(record))
        image_bytes = sum(len(self.images.base64(image_ref(p))) for p in _image_parts(record))
        return Entry(
            record=record,
            items=items,
            size=sum(len(dumps(item)) for item in items),
            images=len(_image_parts(record)),
            image_bytes=image_bytes,
            digests=digests,
        )

    def _size(self, entries: Sequence[Entry]) -> int:
        count = sum(len(e.items) for e in entries)
        return self._overhead + sum(e.size for e in entries) + max(0, count - 1)

    def _limit_crossed(self, entries: Sequence[Entry]) -> str | None:
        limits = self.limits
        messages = sum(len(e.items) for e in entries)
        if messages > limits.max_messages:
            return f"{messages} messages > {limits.max_messages}"
        size = self._size(entries)
        if size > limits.max_request_bytes:
            return f"{size} request bytes > {limits.max_request_bytes}"
        images = sum(e.images for e in entries)
        if images > limits.max_images:
            return f"{images} images > {limits.max_images}"
        image_bytes = sum(e.image_bytes for e in entries)
        if image_bytes > limits.max_image_base64_bytes:
            return f"{image_bytes} base64 image bytes > {limits.max_image_base64_bytes}"
        return None

    def _pending_outcome(self, observation: Observation) -> JsonObject | None:
        awaiting = self._s.awaiting
        if awaiting is None:
            return None
        return {
            "turn": awaiting.get("turn"),
            "call": awaiting.get("summary") or "",
            "result": clip(observation.feedback or "No controller feedback.", self.limits.outcome_chars),
        }

    def _intro(self) -> str:
        d = self._request.display
        return (
            f"{self._request.task_prompt}\n\n"
            f"You operate a {d.width}x{d.height} CAD desktop only through the computer_action tool. "
            "The first image is the fixed reference of the drawing to produce; the last image is the "
            "live desktop."
        )

    @staticmethod
    def _desktop_text(observation: Observation) -> str:
        return f"Current desktop. Actions left in this rollout: {observation.remaining_actions}."

    def _initial_message(self, observation: Observation) -> Record:
        text = self._desktop_text(observation)
        if observation.feedback:
            text = f"{observation.feedback}\n{text}"
        return {"role": "user", "content": [
            {"type": "text", "text": self._intro()},
            {"type": "text", "text": "Reference:"},
            _image_part(self._request.reference),
            {"type": "text", "text": text},
            _image_part(observation.frame),
        ]}

    def _desktop_message(self, observation: Observation, *, with_feedback: bool) -> Record:
        text = self._desktop_text(observation)
        if with_feedback:
            text = f"{observation.feedback or 'No controller feedback.'}\n{text}"
        return {"role": "user", "content": [{"type": "text", "text": text}, _image_part(observation.frame)]}

    def _text_message(self, observation: Observation) -> Record:
        text = f"{observation.feedback or 'No controller feedback.'}\n{self._desktop_text(observation)}"
        return {"role": "user", "content": [{"type": "text", "text": text}]}

    def _checkpoint_message(self, observation: Observation, outcomes: list[JsonObject]) -> Record:
        done = self._s.responses
        lines = [
            f"Context summary: the conversation was compacted after {done} model responses. "
            "Your earlier messages and screenshots were removed; the task, the reference and the "
            "current desktop follow. Most recent controller outcomes, oldest first:"
        ]
        lines.extend(f"- turn {o.get('turn')}: {o.get('call')} -> {o.get('result')}" for o in outcomes)
        if not outcomes:
            lines.append("- (none)")
        return {"role": "user", "content": [
            {"type": "text", "text": self._intro()},
            {"type": "text", "text": "Reference:"},
            _image_part(self._request.reference),
            {"type": "text", "text": "\n".join(lines)},
            {"type": "text", "text": self._desktop_text(observation)},
            _image_part(observation.frame),
        ]}


def _image_part(ref: ArtifactRef) -> Record:
    return {"type": "image_ref", "ref": ref.model_dump(mode="json")}


def _image_parts(record: Record) -> list[Record]:
    content = record.get("content")
    if not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, dict) and p.get("type") == "image_ref"]


def _image_digests(record: Record) -> list[str]:
    return [image_ref(p).sha256 for p in _image_parts(record)]


def image_ref(part: Record) -> ArtifactRef:
    """The artifact reference of an ``image_ref`` content part."""
    return ArtifactRef.model_validate(part["ref"])


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def call_summary(name: str, arguments: str, limit: int = 240) -> str:
    """A one-line description of a tool call for compaction summaries."""
    return clip(f"{name} {arguments}", limit)

