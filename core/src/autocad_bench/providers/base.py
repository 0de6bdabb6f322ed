"""Base class for model provider authors."""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from pydantic import BaseModel

from autocad_bench.costs.pricing import ModelPrice
from autocad_bench.errors import Problem
from autocad_bench.hookspecs import PROVIDER_HOOKS, hookimpl
from autocad_bench.plugins.base import PluginBase
from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec, SessionRequest
from autocad_bench.providers.options import NoOptions, check_options_model, tool_mode_message, validate_options
from autocad_bench.providers.session import ProviderSession


class ModelProvider(PluginBase, abc.ABC):
    """Subclass this to add a model provider; publish it in ``autocad_bench.providers``.

    Set :attr:`name` (the entry-point name and the ``provider`` value in configurations),
    :attr:`credential_env` (environment variable names the provider reads) and
    :attr:`options_model` (the pydantic model of ``provider_options``), and implement
    :meth:`open_session`. Import your SDK inside the methods, not at module level, so an
    installed but unselected provider costs nothing.

    Options: core validates ``provider_options`` through :attr:`options_model` at admission,
    before a batch starts, and reports one located problem per wrong value
    (``batch.json: $.rollouts[0].provider_options.timeout_s: ...``). Checks that need the
    model id or the configuration directory go in :meth:`check_options`; read the parsed
    options in :meth:`open_session` with :meth:`parse_options`. Defining a subclass whose
    :attr:`options_model` does not forbid extra keys raises
    :class:`~autocad_bench.errors.PluginError`.
    """

    hook_names: ClassVar[tuple[str, ...]] = PROVIDER_HOOKS
    options_model: ClassVar[type[BaseModel]] = NoOptions
    """The pydantic model (``extra="forbid"``) of ``provider_options``; the default takes none."""
    tool_modes: ClassVar[frozenset[str]] = frozenset({"function"})
    """The tool modes (:data:`~autocad_bench.metrics.conditions.TOOL_MODES`) this provider speaks;
    admission refuses a rollout whose ``tool_mode`` is not among them."""
    credential_env: ClassVar[tuple[str, ...]] = ()
    optional_env: ClassVar[tuple[str, ...]] = ()
    """Variables the provider reads when they are set (``OPENAI_BASE_URL``; the AWS chain's
    ``AWS_PROFILE`` or keys): admission hands the set ones, by name like credentials, to the
    catalog check and every rollout; never required."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_options_model(cls)

    @hookimpl
    def validate_model_spec(self, model: ModelSpec, location: str) -> list[Problem]:
        """Located problems of the model id and of ``provider_options``; never raises.

        The id must be non-empty; the options must validate against :attr:`options_model`
        (problems under ``{location}.provider_options``); when they do, :meth:`check_options`
        adds the provider's checks that need the model id or ``model.base_dir``. Providers
        normally override :meth:`check_options`, not this.
        """
        problems: list[Problem] = []
        if not isinstance(model.model, str) or not model.model.strip():
            problems.append(Problem(f"{location}.model", "model id must not be empty"))
        option_problems, options = validate_options(self.options_model, model.options,
                                                    f"{location}.provider_options")
        problems.extend(option_problems)
        if model.tool_mode not in self.tool_modes:
            problems.append(Problem(f"{location}.tool_mode",
                                    tool_mode_message(self.name, model.tool_mode, frozenset(self.tool_modes))))
        if options is not None:
            try:
                problems.extend(self.check_options(model, options, location))
            except (TypeError, ValueError, OSError) as error:  # never raise on junk input
                problems.append(Problem(f"{location}.provider_options", str(error) or type(error).__name__))
        return problems

    def check_options(self, model: ModelSpec, options: Any, location: str) -> list[Problem]:
        """Problems beyond :attr:`options_model` (default: none): checks that need the model id
        or files under ``model.base_dir``. ``options`` is the parsed :attr:`options_model`
        instance; locate problems under ``location`` (``{location}.model``,
        ``{location}.provider_options.<key>``)."""
        return []

    def declared_price(self, model: ModelSpec) -> ModelPrice | None:
        """The rates of ``model`` as its configuration states them, or ``None`` (the default).

        For providers whose cost is the operator's own (a self-hosted server): admission adds
        the returned rates to the batch's price table for that model id, says so in a plan
        warning, and every response is billed at them. Called after the options validated;
        must not raise for valid options.
        """
        return None

    def parse_options(self, model: ModelSpec) -> Any:
        """The :attr:`options_model` instance of ``model.options``.

        Call it after admission validated the spec (in :meth:`open_session`, a catalog
        check); raises :class:`pydantic.ValidationError` for options that do not validate.
        """
        return self.options_model.model_validate(model.options)

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
