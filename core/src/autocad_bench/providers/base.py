"""Base class for model provider authors."""

from __future__ import annotations

import abc
from typing import ClassVar

from autocad_bench.errors import Problem
from autocad_bench.hookspecs import PROVIDER_HOOKS, hookimpl
from autocad_bench.plugins.base import PluginBase
from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec, SessionRequest
from autocad_bench.providers.session import ProviderSession


class ModelProvider(PluginBase, abc.ABC):
    """Subclass this to add a model provider; publish it in ``autocad_bench.providers``.

    Set :attr:`name` (the entry-point name and the ``provider`` value in configurations)
    and :attr:`credential_env` (environment variable names the provider reads), and
    implement :meth:`open_session`. Import your SDK inside the methods, not at module
    level, so an installed but unselected provider costs nothing.
    """

    hook_names: ClassVar[tuple[str, ...]] = PROVIDER_HOOKS
    credential_env: ClassVar[tuple[str, ...]] = ()
    optional_env: ClassVar[tuple[str, ...]] = ()
    """Non-secret variables the provider reads when they are set (``OPENAI_BASE_URL``):
    admission hands the set ones to the catalog check and every rollout; never required."""

    @hookimpl
    def validate_model_spec(self, model: ModelSpec, location: str) -> list[Problem]:
        """Accept any non-empty model id and no options unless a provider overrides this."""
        problems = []
        if not model.model.strip():
            problems.append(Problem(f"{location}.model", "model id must not be empty"))
        problems.extend(
            Problem(f"{location}.provider_options.{key}", f"unknown option for provider {self.name!r}")
            for key in sorted(model.options)
        )
        return problems

    @hookimpl
    def credential_names(self, model: ModelSpec) -> list[str]:
        return list(self.credential_env)

    @hookimpl
    def check_model_catalog(self, models: list[ModelSpec], credentials: Credentials) -> list[CatalogEntry]:
        """Providers without a live catalog report every model as not checked but usable."""
        return [
            CatalogEntry(
                provider=self.name,
                model=m.model,
                available=True,
                reason=f"provider {self.name!r} has no live catalog; the id was not checked",
            )
            for m in models
        ]

    @hookimpl
    @abc.abstractmethod
    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        """A new session for one rollout (restored from ``request.resume_state`` if set)."""
