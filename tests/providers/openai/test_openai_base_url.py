"""Where the openai provider sends requests: ``provider_options.base_url``, else ``OPENAI_BASE_URL``,
else OpenAI's URL; an unreachable URL is named in the catalog check and in the rollout's failure.

Every request goes through the official SDK to the loopback wire fake (or to a closed port).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.providers.models import Credentials, ModelSpec
from autocad_bench.testing.wire import ResponsesWire
from autocad_bench_openai.options import DEFAULT_BASE_URL, OpenaiOptions, resolve_base_url
from autocad_bench_openai.provider import CONNECT_TIMEOUT_S, OpenaiProvider
from tests.providers.openai.pilot_support import DONE, MOVE, run_pilot

CREDENTIAL = "OPENAI_API_KEY"
KEY = {CREDENTIAL: "sk-k"}


@pytest.fixture
def wire() -> Iterator[ResponsesWire]:
    with ResponsesWire(catalog=["gpt-5.5"]) as server:
        yield server


def closed_url() -> str:
    """A loopback URL nothing listens on (connection refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def spec(**options: Any) -> ModelSpec:
    return ModelSpec(provider="openai", model="gpt-5.5", options={"timeout_s": 20, **options})


# --- resolution ----------------------------------------------------------------------------


def test_configuration_wins_then_environment_then_default() -> None:
    configured = OpenaiOptions(base_url="http://config.example/v1/")
    assert str(resolve_base_url(configured, {"OPENAI_BASE_URL": "http://env.example/v1"})) == \
        "http://config.example/v1 (from provider_options.base_url)"
    environment = resolve_base_url(OpenaiOptions(), {"OPENAI_BASE_URL": " http://env.example/v1/ "})
    assert (environment.url, environment.source) == ("http://env.example/v1", "environment")
    assert str(environment) == "http://env.example/v1 (from environment OPENAI_BASE_URL)"
    assert resolve_base_url(OpenaiOptions(), {"OPENAI_BASE_URL": ""}).url == DEFAULT_BASE_URL
    assert resolve_base_url(OpenaiOptions(), {}).source == "default"
    with pytest.raises(ValueError, match="OPENAI_BASE_URL='ftp://x' must be an http"):
        resolve_base_url(OpenaiOptions(), {"OPENAI_BASE_URL": "ftp://x"})


def test_the_provider_declares_the_variable_as_optional_not_as_a_credential() -> None:
    provider = OpenaiProvider()
    assert provider.credential_names(spec()) == [CREDENTIAL]
    assert provider.optional_env == ("OPENAI_BASE_URL",)


# --- sessions, through the real pilot and the SDK -----------------------------------------------


def test_a_rollout_uses_openai_base_url_from_its_environment(tmp_path: Path, wire: ResponsesWire) -> None:
    wire.push_tool_call(MOVE)
    wire.push_tool_call(DONE)
    run = run_pilot(tmp_path, OpenaiProvider(), spec(), CREDENTIAL,
                    environment={"OPENAI_BASE_URL": wire.url + "/v1"})
    assert (run.result["status"], run.result["turns"]) == ("completed", 2)
    assert len(wire.model_requests()) == 2


def test_provider_options_base_url_wins_over_the_environment(tmp_path: Path, wire: ResponsesWire) -> None:
    wire.push_tool_call(DONE)
    run = run_pilot(tmp_path, OpenaiProvider(), spec(base_url=wire.url + "/v1"), CREDENTIAL,
                    environment={"OPENAI_BASE_URL": closed_url()})
    assert run.result["status"] == "completed"
    assert len(wire.model_requests()) == 1


def test_transport_exhausted_names_the_unreachable_url_and_its_origin(tmp_path: Path) -> None:
    dead = closed_url()
    run = run_pilot(tmp_path, OpenaiProvider(), spec(), CREDENTIAL, environment={"OPENAI_BASE_URL": dead})
    assert (run.result["status"], run.result["failure_class"]) == ("failed", "transport_exhausted")
    assert f"at {dead} (from environment OPENAI_BASE_URL)" in run.result["failure_detail"]
    assert all(dead in r["message"] for r in run.retries())


# --- the catalog check of the plan -----------------------------------------------------------


def test_catalog_reports_the_url_used_and_where_it_came_from(wire: ResponsesWire) -> None:
    url = wire.url + "/v1"
    provider = OpenaiProvider()
    (from_env,) = provider.check_model_catalog([spec()], Credentials({**KEY, "OPENAI_BASE_URL": url}))
    assert from_env.available and from_env.reason == f"available at {url} (from environment OPENAI_BASE_URL)"
    (from_config,) = provider.check_model_catalog([spec(base_url=url)],
                                                  Credentials({**KEY, "OPENAI_BASE_URL": closed_url()}))
    assert from_config.available and from_config.reason == f"available at {url} (from provider_options.base_url)"
    assert len(wire.requests()) == 2


def test_catalog_without_a_key_still_names_the_url(wire: ResponsesWire) -> None:
    (entry,) = OpenaiProvider().check_model_catalog([spec()], Credentials({"OPENAI_BASE_URL": wire.url}))
    assert entry.available and entry.reason.startswith("not checked: OPENAI_API_KEY is not set")
    assert f"{wire.url} (from environment OPENAI_BASE_URL)" in entry.reason
    assert wire.requests() == []


@pytest.mark.parametrize("where", ["config", "environment"])
def test_an_unreachable_base_url_fails_the_catalog_quickly_and_once(where: str) -> None:
    dead = closed_url()
    options = {"base_url": dead} if where == "config" else {}
    environment = {"OPENAI_BASE_URL": dead} if where == "environment" else {}
    models = [spec(**options), ModelSpec(provider="openai", model="gpt-other", options=options)]
    started = time.monotonic()
    entries = OpenaiProvider().check_model_catalog(models, Credentials({**KEY, **environment}))
    assert time.monotonic() - started < 2 * CONNECT_TIMEOUT_S
    origin = "provider_options.base_url" if where == "config" else "environment OPENAI_BASE_URL"
    assert [(e.model, e.available) for e in entries] == [("gpt-5.5", False), ("gpt-other", False)]
    for entry in entries:
        assert entry.reason.startswith(f"cannot connect to base URL {dead} (from {origin}): ")


def test_an_invalid_environment_url_makes_the_models_unavailable() -> None:
    (entry,) = OpenaiProvider().check_model_catalog([spec()], Credentials({**KEY, "OPENAI_BASE_URL": "api.local"}))
    assert not entry.available and "OPENAI_BASE_URL='api.local' must be an http" in entry.reason


def test_a_catalog_that_answers_an_error_status_is_not_called_unreachable(wire: ResponsesWire) -> None:
    wire.catalog_error = 500
    (entry,) = OpenaiProvider().check_model_catalog([spec(base_url=wire.url + "/v1")], Credentials(KEY))
    assert entry.available and entry.reason.startswith("not checked: catalog answered HTTP 500 at ")
