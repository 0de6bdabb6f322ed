"""Plan-mode reports of where model requests go and what they cost (issue 17, also-fix items).

* ``OPENAI_BASE_URL`` is honoured: admission hands it (a provider's ``optional_env`` that is
  set) to the catalog check and to every rollout, and the report says which URL is used
  and where it came from;
* an unreachable base URL fails the plan, naming the URL and the rollout it belongs to;
* a model the price table does not list is named in ``warnings`` with the fallback rate.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autocad_bench.admission import AdmissionOptions, admit
from autocad_bench.admission.admit import describe_rates
from autocad_bench.config import effective_budgets, load_config
from autocad_bench.costs.pricing import default_pricing, fallback_price
from autocad_bench.plugins import PluginHost
from autocad_bench.testing.wire import ResponsesWire
from tests.core.batch_configs import pool_config, write
from tests.core.test_admission import env, run

__all__ = ["env"]  # the fixture, shared with test_admission


@pytest.fixture
def wire() -> Iterator[ResponsesWire]:
    with ResponsesWire(catalog=["gpt-5.5"]) as server:
        yield server


def closed_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def openai_config(url: str, tmp_path: Path, **options: Any) -> dict[str, Any]:
    config = pool_config([url], tmp_path / "l")
    for rollout in config["rollouts"]:
        rollout.update(provider="openai", model="gpt-5.5", provider_options=dict(options))
    config["rollouts"][1]["task_id"] = "t2"
    config["rollouts"][1]["model"] = "gpt-5.5"
    config["rollouts"][1]["provider_options"] = {**options, "history_turns": 4}  # a second spec
    return config


def check(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in report["checks"] if c["name"] == name)
    return found


def test_openai_base_url_from_the_environment_is_used_and_reported(
        tmp_path: Path, env: tuple[str, str], wire: ResponsesWire, monkeypatch: pytest.MonkeyPatch) -> None:
    url = wire.url + "/v1"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    path = write(tmp_path, openai_config(env[0], tmp_path))
    code, out, err = run(["--config", str(path)])
    assert code == 0, out + err
    report = json.loads(out)
    credentials = check(report, "credentials")
    assert credentials["details"] == {"present": ["OPENAI_API_KEY"], "passed_on": ["OPENAI_BASE_URL"]}
    assert credentials["reason"] == "present: OPENAI_API_KEY; also passed to the rollouts: OPENAI_BASE_URL"
    catalog = check(report, "model_catalog.openai")
    assert catalog["passed"] is True
    assert catalog["reason"].count(f"available at {url} (from environment OPENAI_BASE_URL)") == 2
    assert len(wire.requests()) == 2  # the catalog really went there
    # ... and every rollout is handed the variable with its credentials.
    environ = {"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": url, "EXAMPLE_POOL_TOKEN": env[1]}
    loaded = load_config(path)
    admission = admit(loaded, PluginHost(environ=environ), environ,
                      effective_budgets(loaded.config.budgets, environ=environ), AdmissionOptions())
    assert admission.credential_names == {"r1": ["OPENAI_API_KEY", "OPENAI_BASE_URL"],
                                          "r2": ["OPENAI_API_KEY", "OPENAI_BASE_URL"]}


def test_without_openai_base_url_nothing_extra_is_passed_on(
        tmp_path: Path, env: tuple[str, str], wire: ResponsesWire, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, out, err = run(["--config", str(write(tmp_path, openai_config(env[0], tmp_path,
                                                                       base_url=wire.url + "/v1")))])
    assert code == 0, out + err
    report = json.loads(out)
    assert check(report, "credentials")["details"] == {"present": ["OPENAI_API_KEY"]}
    assert "(from provider_options.base_url)" in check(report, "model_catalog.openai")["reason"]


@pytest.mark.parametrize("where", ["config", "environment"])
def test_an_unreachable_base_url_fails_the_plan_naming_url_and_rollout(
        tmp_path: Path, env: tuple[str, str], monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    dead = closed_url()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    if where == "environment":
        monkeypatch.setenv("OPENAI_BASE_URL", dead)
        config = openai_config(env[0], tmp_path)
    else:
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        config = openai_config(env[0], tmp_path, base_url=dead)
    path = write(tmp_path, config)
    code, out, _ = run(["--config", str(path)])
    assert code == 1
    catalog = check(json.loads(out), "model_catalog.openai")
    assert catalog["passed"] is False
    origin = "provider_options.base_url" if where == "config" else "environment OPENAI_BASE_URL"
    assert f"gpt-5.5 ({path}: $.rollouts[0]): cannot connect to base URL {dead} (from {origin}): " \
        in catalog["reason"]
    assert f"gpt-5.5 ({path}: $.rollouts[1]): cannot connect" in catalog["reason"]
    assert [m["locations"] for m in catalog["details"]["models"]] == [[f"{path}: $.rollouts[0]"],
                                                                      [f"{path}: $.rollouts[1]"]]


def test_a_model_missing_from_the_price_table_is_a_plan_warning(tmp_path: Path, env: tuple[str, str]) -> None:
    code, out, err = run(["--config", str(write(tmp_path, pool_config([env[0]], tmp_path / "l")))])
    assert code == 0, err
    report = json.loads(out)
    rates = describe_rates(fallback_price(default_pricing()))
    assert str(fallback_price(default_pricing()).output) in rates
    pricing = check(report, "pricing")
    assert pricing["passed"] is True
    assert pricing["reason"] == f"1 model(s) priced by fallback at {rates}: scripted/replay"
    assert pricing["details"]["fallback_priced"] == ["scripted/replay"]
    (warning,) = report["warnings"]
    assert warning.startswith("scripted/replay is not in the price table (as of ")
    assert f"it will be billed at the fallback rate, the highest listed: {rates}" in warning


def test_listed_models_give_no_pricing_warning(tmp_path: Path, env: tuple[str, str]) -> None:
    price = {"input": 1, "cached_input": 0.1, "cache_write": 1, "output": 2}
    config = pool_config([env[0]], tmp_path / "l", pricing={"as_of": "2026-01-01", "models": {"replay": price}})
    code, out, err = run(["--config", str(write(tmp_path, config))])
    assert code == 0, err
    report = json.loads(out)
    assert report["warnings"] == []
    assert check(report, "pricing")["reason"] == "every model is listed in the pinned $.pricing (as of 2026-01-01)"
