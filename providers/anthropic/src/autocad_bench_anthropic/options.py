"""``provider_options`` of the ``anthropic`` provider, and the constants of its request shape."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

CREDENTIAL_ENV = "ANTHROPIC_API_KEY"
DEFAULT_BASE_URL = "https://api.anthropic.com"

COMPACTION_BETA = "compact-2026-01-12"
"""Beta header value that enables Anthropic's official server compaction edit."""
COMPACTION_EDIT = "compact_20260112"
"""``context_management.edits[].type`` of the server compaction edit."""
SERVER_COMPACTION_DEFAULT_TOKENS = 150_000
SERVER_COMPACTION_MIN_TOKENS = 50_000

MIB = 1024 * 1024
PROVIDER_REQUEST_LIMIT_BYTES = 32 * MIB
"""Anthropic's documented hard limit of a Messages request (HTTP 413 above it)."""
DEFAULT_REQUEST_GUARD_BYTES = 24 * MIB
"""Client-side guard: a request is rewritten before it reaches this many serialized bytes."""

DEFAULT_CLIENT_COMPACTION_MODELS: tuple[str, ...] = ("claude-fable-5", "claude-fable-5-*")
"""Claude Fable 5 and its dated snapshots (an id ending in ``*`` is a prefix)."""

CompactionMode = Literal["server", "client", "none"]


class AnthropicOptions(BaseModel):
    """Options accepted under ``provider_options`` for ``"provider": "anthropic"``.

    Every field has a default; an empty options object is a complete configuration.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(default=DEFAULT_BASE_URL, min_length=1,
                          description="API root handed to the SDK (always explicit: ANTHROPIC_BASE_URL is ignored)")
    max_tokens: int = Field(default=4096, ge=256, le=21_000)
    repair_max_tokens: int = Field(
        default=8192, ge=256, le=21_000,
        description="output ceiling of the request that follows a missing or truncated computer_action call")
    timeout_s: float = Field(default=600.0, gt=0, le=3600, allow_inf_nan=False)
    system_prompt: str | None = Field(default=None, min_length=1)
    disable_parallel_tool_use: bool = True

    client_compaction_models: tuple[str, ...] = Field(
        default=DEFAULT_CLIENT_COMPACTION_MODELS,
        description="model ids (exact, or a prefix ending in '*') that use deterministic client compaction")
    client_compaction_input_tokens: int = Field(default=90_000, ge=1_000)
    client_compaction_turns: int = Field(default=24, ge=2)
    checkpoint_outcomes: int = Field(default=16, ge=1, le=256)

    server_compaction: bool = Field(
        default=True, description="use the official compact-2026-01-12 edit on models not listed for client compaction")
    server_compaction_trigger_tokens: int = Field(default=SERVER_COMPACTION_DEFAULT_TOKENS,
                                                  ge=SERVER_COMPACTION_MIN_TOKENS)
    reattach_after_server_compaction: bool = Field(
        default=True,
        description="after a server compaction, repeat the task and fixed reference in the next user message")

    computer_tool: Literal["computer_20250124", "computer_20251124", "computer_toolset_20260801"] | None = Field(
        default=None,
        description="native tool mode only: the computer tool version to declare; by default it is chosen from "
        "the model id (autocad_bench_anthropic.native.session.COMPUTER_TOOL_BY_MODEL); the toolset "
        "computer_toolset_20260801 is used only when named here")
    native_history_turns: int = Field(
        default=16, ge=1, le=256,
        description="native tool mode only: screenshots of at least this many (at most twice as many) recent "
        "turns stay images; older ones become a short placeholder, cut in one step so the cached prefix holds")
    request_guard_bytes: int = Field(default=DEFAULT_REQUEST_GUARD_BYTES, ge=64 * 1024,
                                     lt=PROVIDER_REQUEST_LIMIT_BYTES)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError("base_url must start with https:// or http://")
        return value.rstrip("/")

    @field_validator("client_compaction_models")
    @classmethod
    def _non_empty_ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not item.strip() or item.strip() == "*":
                raise ValueError("model ids must be non-empty (a bare '*' is not allowed)")
        return value

    def compaction_mode(self, model: str) -> CompactionMode:
        """Which compaction path ``model`` takes under these options."""
        for pattern in self.client_compaction_models:
            if pattern.endswith("*") and model.startswith(pattern[:-1]):
                return "client"
            if model == pattern:
                return "client"
        return "server" if self.server_compaction else "none"
