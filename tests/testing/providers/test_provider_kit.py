"""Meta-tests of the provider kit: each planted fault fails it with the rule's name.

Every case runs :class:`~autocad_bench.testing.ProviderConformance` in a separate pytest
session (``pytester``, in a temporary directory, so none of this repository's pytest
settings apply: no ``asyncio_mode``, no timeout) against one deliberately broken provider
from :mod:`tests.testing.providers.broken`, selects the tests of the rule and expects a
failure whose message names it. The healthy provider passes the whole kit the same way.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from autocad_bench_bedrock.provider import BedrockProvider
from autocad_bench_fireworks.provider import FireworksProvider
from autocad_bench_mantle.provider import MantleProvider
from autocad_bench_openrouter.provider import OpenrouterProvider
from pydantic import BaseModel, ConfigDict

from autocad_bench.errors import PluginError
from autocad_bench.providers.base import ModelProvider
from autocad_bench.providers.options import NoOptions, options_model_problem
from autocad_bench.providers.scripted import ScriptedProvider
from autocad_bench.testing.provider_conformance import (
    COST_ACCOUNTING,
    MODEL_OUTPUT,
    OPTIONS_VALIDATION,
    RETRY_CLASSIFICATION,
    RULES,
    TOOL_SCHEMA,
)
from autocad_bench_anthropic.provider import AnthropicProvider
from autocad_bench_openai.provider import OpenaiProvider

pytest_plugins = ["pytester"]

SUITE = '''
import pytest

from autocad_bench.providers.models import ModelSpec
from autocad_bench.testing import ProviderConformance
from autocad_bench.testing.wire import ResponsesWire
from {module} import {name} as Provider


class TestKit(ProviderConformance):
    @pytest.fixture
    def provider(self):
        return Provider()

    @pytest.fixture
    def wire_server(self):
        with ResponsesWire(catalog=["gpt-5.5"]) as wire:
            yield wire

    @pytest.fixture
    def model_spec(self, wire_server):
        return ModelSpec(provider="openai", model="gpt-5.5",
                         options={{"base_url": wire_server.url + "/v1", "timeout_s": 20}})
'''

BROKEN = "tests.testing.providers.broken"

CASES = [
    ("WrongToolSchema", "test_requests_declare_the_tool_schema", TOOL_SCHEMA,
     "differs from the declared one"),
    ("RateLimitIsFatal", "test_errors_are_classified and 429", RETRY_CLASSIFICATION,
     "HTTP 429 classified as fatal"),
    ("UnauthorizedIsRetried", "test_errors_are_classified and 401", RETRY_CLASSIFICATION,
     "HTTP 401 classified as transient"),
    ("TimeoutIsFatal", "test_client_timeout_is_transient", RETRY_CLASSIFICATION,
     "client timeout classified as fatal"),
    ("CostCountedTwice", "test_cost_is_counted_once_per_response", COST_ACCOUNTING, "counted twice"),
    ("CostNotCounted", "test_cost_is_counted_once_per_response", COST_ACCOUNTING, "reports no usage"),
    ("ReasoningAddedToOutput", "test_cost_is_counted_once_per_response", COST_ACCOUNTING,
     "reasoning tokens added to output"),
    ("ExtraOptionsAccepted", "test_unknown_option_is_one_located_problem", OPTIONS_VALIDATION,
     "was accepted silently"),
    ("RefusalBecomesEmptyActions", "test_missing_or_malformed_call_is_a_turn_not_an_exception and refusal",
     MODEL_OUTPUT, "became an empty action list"),
    ("MalformedOutputRaises", "test_missing_or_malformed_call_is_a_turn_not_an_exception and malformed",
     MODEL_OUTPUT, "raised ValueError"),
]


ROOT = Path(__file__).resolve().parents[3]


def run_kit(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, module: str, name: str,
            selection: str | None) -> pytest.RunResult:
    """Runs the kit in its own Python process.

    Not in-process: pytester then removes every module the inner session imported, and
    libraries that cache classes of a lazily imported module (httpx2 keeps a map of
    httpcore2's exception classes in a module global) keep the removed classes. The next
    session's re-imported exceptions then escape unmapped and the kit fails for reasons of
    this test, not of the provider.
    """
    pytester.makepyfile(test_kit=SUITE.format(module=module, name=name))
    # The broken providers live in this repository's tests package.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    # No asyncio plugin and no timeout plugin: the kit must not depend on either.
    args = ["-p", "no:cacheprovider", "-p", "no:asyncio", "-p", "no:timeout", "-p", "no:xdist", "-q"]
    if selection is not None:
        args += ["-k", selection]
    return pytester.runpytest_subprocess(*args, timeout=300)


@pytest.mark.parametrize(("broken", "selection", "rule", "detail"), CASES, ids=[c[0] for c in CASES])
def test_a_broken_provider_fails_the_kit_naming_the_rule(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, broken: str, selection: str, rule: str, detail: str
) -> None:
    result = run_kit(pytester, monkeypatch, BROKEN, broken, selection)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1, result.stdout.str()
    text = result.stdout.str()
    assert f"provider contract rule '{rule}' violated" in text, text
    assert detail in text, text


def test_every_rule_has_a_planted_fault() -> None:
    assert {case[2] for case in CASES} == set(RULES)


def test_the_healthy_provider_passes_the_whole_kit_without_repository_settings(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_kit(pytester, monkeypatch, "autocad_bench_openai.provider", "OpenaiProvider", None)
    text = result.stdout.str()
    assert not re.search(r"\d+ (failed|error)", text), text
    assert result.parseoutcomes().get("passed", 0) >= 40, text
    assert "asyncio_mode" not in text


SHIPPED: list[type[ModelProvider]] = [
    OpenaiProvider, OpenrouterProvider, AnthropicProvider, FireworksProvider, MantleProvider, BedrockProvider,
    ScriptedProvider,
]


@pytest.mark.parametrize("provider", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_shipped_provider_declares_a_forbidding_options_model(provider: type[ModelProvider]) -> None:
    assert provider.options_model is not NoOptions
    assert options_model_problem(provider.options_model) is None


def test_an_options_model_that_ignores_extra_keys_is_refused_at_class_definition() -> None:
    class Lenient(BaseModel):
        model_config = ConfigDict(extra="ignore")

    with pytest.raises(PluginError, match="extra='forbid'"):
        class LenientProvider(OpenaiProvider):
            options_model = Lenient  # type: ignore[assignment]
