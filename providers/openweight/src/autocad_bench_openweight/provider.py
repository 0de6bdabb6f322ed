"""The ``openweight`` model provider: any OpenAI-compatible Chat Completions server.

For self-hosted or local servers (vLLM, SGLang, Ollama, llama.cpp server, LM Studio),
configured by ``provider_options.base_url`` and the model id the server serves. Two tool
modes:

``function``
    grammar ``function``: the request declares and forces the ``computer_action`` tool and
    the server's tool call is the action batch, exactly as the ``fireworks`` provider does
    (:class:`~autocad_bench.providers.chat.session.ChatCompletionsSession`).
``native``
    a text grammar (``uitars``, ``qwen-computer-use``, ``qwen3-computer-use``,
    ``pyautogui`` or any installed ``autocad_bench.grammars`` entry point): no tools, the
    system message teaches the grammar and each reply is parsed
    (:class:`~autocad_bench_openweight.session.GrammarSession`).

Admission refuses an unknown grammar (listing the installed ones), a grammar that does not
fit the tool mode, and a coordinate override in ``function`` mode (the tool schema is in
desktop pixels). Cost: the provider declares the options' per-token rates
(:meth:`OpenWeightProvider.declared_price`, $0 unless set) and the harness bills the server's
reported ``usage`` at them; the plan says so in a warning.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, ClassVar

from autocad_bench.costs.pricing import ModelPrice
from autocad_bench.errors import PluginError, Problem
from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.grammar import CoordinateConvention, grammar_names, load_grammar
from autocad_bench.providers.models import CatalogEntry, Credentials, ModelSpec, SessionRequest
from autocad_bench.providers.session import ProviderSession

from .options import FUNCTION_GRAMMAR, OpenWeightOptions, parse_options

CATALOG_TIMEOUT_S = 15.0
"""How long the plan waits for a server's model list."""

NO_KEY = "EMPTY"
"""The bearer value sent when no ``api_key_env`` is configured (local servers ignore it; the
SDK refuses an empty key)."""


class OpenWeightProvider(ModelProvider):
    """Open-weight models behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    name: ClassVar[str] = "openweight"
    tool_modes: ClassVar[frozenset[str]] = frozenset({"function", "native"})
    options_model: ClassVar[type[OpenWeightOptions]] = OpenWeightOptions

    def credential_names(self, model: ModelSpec) -> list[str]:
        """The variable named by ``api_key_env``, if any (junk options: none)."""
        value = model.options.get("api_key_env") if isinstance(model.options, dict) else None
        return [value] if isinstance(value, str) and value else []

    def check_options(self, model: ModelSpec, options: OpenWeightOptions, location: str) -> list[Problem]:
        """The grammar is installed and fits ``model.tool_mode``; no coordinate override with tools."""
        where = f"{location}.provider_options"
        installed = grammar_names()
        if options.grammar not in installed:
            return [Problem(f"{where}.grammar", f"unknown action grammar {options.grammar!r} "
                                                f"(installed: {', '.join(installed) or 'none'})")]
        problems: list[Problem] = []
        if model.tool_mode == "function" and options.grammar != FUNCTION_GRAMMAR:
            problems.append(Problem(f"{where}.grammar", f"tool_mode 'function' uses grammar {FUNCTION_GRAMMAR!r} "
                                                        f"(the computer_action tool), not {options.grammar!r}; "
                                                        "set tool_mode 'native' for a text grammar"))
        if model.tool_mode == "native" and options.grammar == FUNCTION_GRAMMAR:
            problems.append(Problem(f"{where}.grammar", "tool_mode 'native' needs a text grammar "
                                                        f"({', '.join(n for n in installed if n != FUNCTION_GRAMMAR)}),"
                                                        f" not {FUNCTION_GRAMMAR!r}"))
        if (model.tool_mode == "function" and options.coordinates is not None
                and options.coordinates is not CoordinateConvention.ABSOLUTE):
            problems.append(Problem(f"{where}.coordinates", "tool_mode 'function' takes desktop pixels as the "
                                                            "computer_action schema says; only 'absolute' fits"))
        if not problems and model.tool_mode == "native":
            try:
                load_grammar(options.grammar, options.coordinates)
            except PluginError as error:
                problems.append(Problem(f"{where}.grammar", str(error)))
        return problems

    def declared_price(self, model: ModelSpec) -> ModelPrice | None:
        """The per-token rates the options state (both $0 unless set): a self-hosted model is
        never billed at the price table's fallback, which would be a cloud model's rates."""
        options = parse_options(model)
        input_rate = Decimal(str(options.usd_per_million_input_tokens))
        return ModelPrice(input=input_rate, cached_input=input_rate, cache_write=input_rate,
                          output=Decimal(str(options.usd_per_million_output_tokens)),
                          server_hour=Decimal(str(options.usd_per_gpu_hour)) * options.gpus)

    def check_model_catalog(self, models: list[ModelSpec], credentials: Credentials) -> list[CatalogEntry]:
        """Ask each server for its model list (``GET {base_url}/models``, SDK retries off).

        A model is available when the server answers and lists its id. A server that does not
        answer, answers with an error, or does not list the model makes it unavailable, with
        the reason: the plan then refuses the batch before any desktop starts.
        """
        import openai

        entries: list[CatalogEntry] = []
        served: dict[tuple[str, str | None], list[str] | str] = {}
        for spec in models:
            try:
                options = parse_options(spec)
            except ValueError:
                entries.append(CatalogEntry(provider=self.name, model=spec.model, available=False,
                                            reason="invalid provider_options"))
                continue
            key = credentials.get(options.api_key_env) if options.api_key_env else NO_KEY
            where = (options.base_url, options.api_key_env)
            if where not in served:
                served[where] = _served_models(openai, options.base_url, key or NO_KEY,
                                               min(options.timeout_s, CATALOG_TIMEOUT_S))
            listing = served[where]
            if isinstance(listing, str):
                entries.append(CatalogEntry(provider=self.name, model=spec.model, available=False,
                                            reason=f"{options.base_url}: {listing}"))
            elif spec.model not in listing:
                shown = ", ".join(listing[:10]) + (" ..." if len(listing) > 10 else "")
                entries.append(CatalogEntry(provider=self.name, model=spec.model, available=False,
                                            reason=f"{options.base_url} does not serve it (it serves: "
                                                   f"{shown or 'nothing'})"))
            else:
                entries.append(CatalogEntry(provider=self.name, model=spec.model, available=True,
                                            reason=f"served by {options.base_url}"))
        return entries

    def open_session(self, request: SessionRequest, credentials: Credentials) -> ProviderSession:
        """A function-mode or native session; raises ``ValueError`` when ``api_key_env`` is unset."""
        from openai import AsyncOpenAI

        from autocad_bench.providers.chat.history import HistoryLimits
        from autocad_bench.providers.chat.session import ChatCompletionsSession, SessionSettings, session_key

        options = parse_options(request.model)
        api_key = NO_KEY
        if options.api_key_env is not None:
            api_key = credentials.get(options.api_key_env) or ""
            if not api_key:
                raise ValueError(f"{options.api_key_env} is not set")
        key = session_key(request)
        if isinstance(request.resume_state, dict) and isinstance(request.resume_state.get("session_key"), str):
            key = str(request.resume_state["session_key"])
        settings = SessionSettings(
            provider=self.name,
            model=request.model.model,
            max_tokens=options.max_tokens,
            limits=HistoryLimits.of(options),
            strict_tools=options.strict_tools,
            temperature=options.temperature,
            telemetry=options.telemetry,
            server_seconds=options.usd_per_gpu_hour > 0,
        )
        client = AsyncOpenAI(api_key=api_key, base_url=options.base_url, max_retries=0, timeout=options.timeout_s)
        if request.model.tool_mode != "native":
            return ChatCompletionsSession(request, settings, key, client)
        from .session import GrammarSession, grammar_geometry

        grammar = load_grammar(options.grammar, options.coordinates)
        geometry = grammar_geometry(grammar, request.display, options.server_resize)
        return GrammarSession(request, settings, key, client, grammar, geometry)


def _served_models(openai: Any, base_url: str, key: str, timeout_s: float) -> list[str] | str:
    """The model ids the server lists, or why it could not be asked (one request, no retries)."""
    client = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=timeout_s)
    try:
        return [model.id for model in client.models.list()]
    except openai.APIStatusError as error:
        return f"the model list request failed: HTTP {error.status_code}"
    except openai.APIConnectionError as error:
        return f"the server did not answer ({type(error).__name__})"
    finally:
        client.close()
