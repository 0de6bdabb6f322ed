"""Request and response models of the model-provider protocol.

A provider turns one :class:`Observation` (what the model may see now) into one
:class:`ModelTurn` (the raw ``computer_action`` input it produced and the usage billed).
Validation of the action batch, retries and budgets belong to the core harness; providers
only speak their wire format and classify their errors.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from pathlib import Path

from pydantic import Field, JsonValue

from autocad_bench.metrics.conditions import DEFAULT_TOOL_MODE, ToolMode
from autocad_bench.models import ArtifactRef, EnvName, JsonObject, StrictModel


class ModelSpec(StrictModel):
    """A model selected by a rollout: provider name, model id and provider-owned options."""

    provider: str
    model: str
    options: JsonObject = Field(default_factory=dict)
    tool_mode: ToolMode = Field(default=DEFAULT_TOOL_MODE,
                                description="function or native; see ModelProvider.tool_modes")
    base_dir: Path | None = Field(
        default=None, description="directory that relative paths in ``options`` are resolved against"
    )
    task_dir: Path | None = Field(
        default=None, description="the folder of the task this rollout runs (task.json, reference "
        "solutions), when the batch has a task directory; None in catalog-only checks")


class CatalogEntry(StrictModel):
    """Result of a live catalog lookup for one model."""

    provider: str
    model: str
    available: bool
    image_input: bool | None = None
    reason: str = ""


class TokenUsage(StrictModel):
    """Tokens billed for one model response.

    ``input_tokens`` is uncached input; cached reads and cache writes are counted apart
    because they are priced apart. ``reasoning_tokens`` is a diagnostic subset of
    ``output_tokens``, never added to it. ``server_seconds`` is the time a self-hosted server
    spent on the response, reported only by providers whose model is billed by server time
    (a GPU-hour price); it is 0 for every metered API.
    """

    input_tokens: int = Field(default=0, ge=0)
    cached_input_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    reasoning_tokens: int = Field(default=0, ge=0)
    server_seconds: float = Field(default=0.0, ge=0, allow_inf_nan=False)

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cached_input_tokens + self.cache_write_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            server_seconds=round(self.server_seconds + other.server_seconds, 6),
        )


class DisplaySize(StrictModel):
    """The desktop size in pixels the model is told about and its actions are validated against
    (default 1920x1080)."""

    width: int = Field(default=1920, ge=1)
    height: int = Field(default=1080, ge=1)


class SessionRequest(StrictModel):
    """Everything a provider session needs for one rollout.

    ``rollout_dir`` is where referenced artifacts live (``ArtifactRef.path`` is relative to
    it). ``resume_state`` is a value previously returned by ``ProviderSession.checkpoint``;
    when present the session continues exactly where that checkpoint left off. ``trial`` is
    the 1-based trial index of this assignment (batches may run each assignment several
    times); a provider may use it to vary sampling seeds.
    """

    rollout_id: str
    attempt_id: str
    trial: int = Field(
        default=1, ge=1,
        description="1-based trial index of this assignment; a provider may use it to vary sampling seeds")
    model: ModelSpec
    task_prompt: str
    reference: ArtifactRef
    rollout_dir: Path
    display: DisplaySize = Field(default_factory=DisplaySize)
    action_schema: JsonObject
    action_budget: int = Field(ge=0)
    resume_state: JsonObject | None = None


class Observation(StrictModel):
    """What the model sees at the start of a turn.

    ``frame`` is the current desktop; ``feedback`` is the controller's text for the model
    (the previous batch's receipts, a validation error, the budget left). ``tool_use_id``
    is the id of the call this observation answers (``None`` on the first turn).
    """

    turn_index: int = Field(ge=0)
    frame: ArtifactRef
    feedback: str = ""
    tool_use_id: str | None = None
    remaining_actions: int = Field(ge=0)
    post_action_visual_stable: bool | None = None
    pointer: tuple[int, int] | None = None
    """Where the desktop's pointer was when ``frame`` was captured, in desktop pixels, as the
    broker read it (so moves the application made itself are included); ``None`` when the
    broker did not report it (an older broker, or a frame restored from an older trace)."""


class ModelTurn(StrictModel):
    """One model response.

    ``action_input`` is the raw argument object of the ``computer_action`` call, unvalidated;
    ``None`` means the call was missing, and ``malformed`` explains what was wrong with it.
    """

    tool_use_id: str
    action_input: JsonValue | None
    malformed: str | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    response_id: str | None = None
    text: str = ""
    stop_reason: str | None = None


class ProviderErrorKind(enum.StrEnum):
    """How a failed provider request is retried (see the retry accounting contract)."""

    RATE_LIMITED = "rate_limited"
    """429 or provider-equivalent throttling: retried indefinitely, honouring retry-after."""
    SERVER_ERROR = "server_error"
    """HTTP 5xx: retried indefinitely, backoff capped at 60 s."""
    TRANSIENT = "transient"
    """408, 409, connection or read failure: at most 10 consecutive."""
    REQUEST_TOO_LARGE = "request_too_large"
    """413 or a body-length rejection: retried once, only after a byte-reducing rewrite."""
    FATAL = "fatal"
    """Anything else (400 with a bad request, 401, 403...): fails the rollout."""


class ProviderRequestError(Exception):
    """Raised by a provider session for a failed request, already classified."""

    def __init__(
        self,
        kind: ProviderErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after_s = retry_after_s


class Credentials(Mapping[str, str]):
    """Credential values handed to a provider, keyed by environment variable name.

    Its ``repr`` shows names only, so hook-call tracing and error messages cannot leak
    values. Build it from the parent environment with :meth:`from_environ`.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)

    @classmethod
    def from_environ(cls, names: tuple[EnvName, ...] | list[str], environ: Mapping[str, str]) -> Credentials:
        return cls({name: environ[name] for name in names if name in environ})

    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Credentials(names={sorted(self._values)!r})"

    __str__ = __repr__
