"""The model provider protocol: base class, session and request/response models."""

from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.models import (
    CatalogEntry,
    Credentials,
    DisplaySize,
    ModelSpec,
    ModelTurn,
    Observation,
    ProviderErrorKind,
    ProviderRequestError,
    SessionRequest,
    TokenUsage,
)
from autocad_bench.providers.options import NoOptions
from autocad_bench.providers.session import ProviderSession

__all__ = [
    "CatalogEntry",
    "Credentials",
    "DisplaySize",
    "ModelProvider",
    "ModelSpec",
    "ModelTurn",
    "NoOptions",
    "Observation",
    "ProviderErrorKind",
    "ProviderRequestError",
    "ProviderSession",
    "SessionRequest",
    "TokenUsage",
]
