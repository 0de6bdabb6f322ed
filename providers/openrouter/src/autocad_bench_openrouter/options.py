"""``provider_options`` of the ``openrouter`` provider."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
STRUCTURED_OUTPUTS_BETA = "structured-outputs-2025-11-13"


def _ephemeral() -> dict[str, JsonValue]:
    return {"type": "ephemeral"}


class OpenrouterOptions(BaseModel):
    """Options of one OpenRouter model (all optional; unknown keys are errors).

    Claude routes are the model ids starting with one of ``claude_route_prefixes``. They
    get the top-level ``anthropic_cache_control`` body field (automatic prompt caching) and
    the ``anthropic_beta_header: anthropic_beta`` request header (structured outputs for the
    strict tool). Both names are configurable because OpenRouter has not confirmed them for
    its Responses endpoint; set either to ``null`` to omit it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = Field(default=None, description="API base URL (default: OpenRouter's)")
    max_output_tokens: int = Field(default=4096, ge=16, le=256_000)
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    replay_reasoning: bool = Field(
        default=False, description="keep the returned reasoning items in the history before each call"
    )
    image_detail: Literal["auto", "low", "high", "original"] = "auto"
    timeout_s: float = Field(default=600.0, gt=0, le=3600, allow_inf_nan=False)
    provider_routing: dict[str, JsonValue] | None = Field(
        default=None, description="OpenRouter 'provider' preferences, sent as is (e.g. order, allow_fallbacks)"
    )
    claude_route_prefixes: tuple[str, ...] = ("anthropic/",)
    anthropic_cache_control: dict[str, JsonValue] | None = Field(default_factory=_ephemeral)
    anthropic_beta_header: str | None = "x-anthropic-beta"
    anthropic_beta: str | None = STRUCTURED_OUTPUTS_BETA
    send_session_id: bool = Field(default=True, description="send the rollout's sticky 'session_id' body field")
    session_id_header: str | None = Field(default=None, description="also send the session id in this header")
    app_url: str | None = Field(default=None, description="sent as HTTP-Referer (OpenRouter app attribution)")
    app_title: str | None = Field(default=None, description="sent as X-Title (OpenRouter app attribution)")

    @field_validator("base_url", "app_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/") if value else value

    @field_validator("anthropic_beta_header", "session_id_header")
    @classmethod
    def _header_name(cls, value: str | None) -> str | None:
        if value is not None and (not value or not all(c.isalnum() or c == "-" for c in value)):
            raise ValueError("must be an HTTP header name (letters, digits and '-')")
        return value

    def is_claude_route(self, model: str) -> bool:
        return any(model.startswith(prefix) for prefix in self.claude_route_prefixes)
