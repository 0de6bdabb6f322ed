"""``provider_options`` of the ``openweight`` provider (any OpenAI-compatible chat server).

Validated by core at admission through :class:`OpenWeightOptions` (unknown keys are
located problems); :func:`parse_options` is what the provider calls once admitted and
raises pydantic's ``ValidationError`` for options that do not validate.

Pricing fields are recorded, not applied: the harness prices usage from its own pricing
table (:mod:`autocad_bench.costs`), so providers never compute dollars. They exist so a
run's configuration says what the self-hosted server cost.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from autocad_bench.providers.grammar import CoordinateConvention
from autocad_bench.providers.models import ModelSpec

MiB = 1024 * 1024
FUNCTION_GRAMMAR = "function"
"""The grammar of tool mode ``function``: the server's own tool calls of ``computer_action``."""


class OpenWeightOptions(BaseModel):
    """Options of one model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    ``base_url`` is the API root (``http://127.0.0.1:8000/v1`` for vLLM). ``grammar``
    names an ``autocad_bench.grammars`` entry point; ``coordinates`` overrides its
    coordinate convention. ``server_resize`` says which processor the server resizes
    images with, and so which frame "resized" coordinates refer to (ignored for other
    conventions). ``api_key_env`` names the environment variable holding the key when the
    server wants one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(pattern=r"^https?://[^\s/]+\S*$")
    grammar: str = Field(default=FUNCTION_GRAMMAR, min_length=1)
    coordinates: CoordinateConvention | None = None
    server_resize: Literal["qwen2.5-vl", "qwen3-vl", "none"] = "qwen2.5-vl"
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    max_tokens: int = Field(default=1024, ge=16, le=262_144)
    temperature: float | None = Field(default=None, ge=0, le=2)
    timeout_s: float = Field(default=300.0, gt=0, le=3600)
    strict_tools: bool = False
    max_messages: int = Field(default=24, ge=4, le=1000)
    max_request_bytes: int = Field(default=8 * MiB, ge=64 * 1024, le=64 * MiB)
    max_images: int = Field(default=30, ge=2, le=1000)
    max_image_base64_bytes: int = Field(default=10_000_000, ge=64 * 1024, le=1_000_000_000)
    summary_outcomes: int = Field(default=16, ge=1, le=64)
    telemetry: bool = True
    usd_per_million_input_tokens: float = Field(
        default=0.0, ge=0, description="what the server's time costs, spread per million input tokens "
        "(cached input is billed at the same rate); 0 = free, said in a plan warning")
    usd_per_million_output_tokens: float = Field(default=0.0, ge=0,
                                                 description="the same per million output tokens")
    usd_per_gpu_hour: float = Field(
        default=0.0, ge=0, description="what one GPU of the server costs per hour; each response is billed "
        "its request's wall time times gpus at this rate (an upper bound when requests share the server)")
    gpus: int = Field(default=1, ge=1, le=1024, description="GPUs the server holds for this model")


def parse_options(model: ModelSpec) -> OpenWeightOptions:
    """The model's options as :class:`OpenWeightOptions`; raises pydantic's ``ValidationError``."""
    return OpenWeightOptions.model_validate(model.options)
