"""The plan asks an open-weight server whether it answers and serves the model."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

from autocad_bench.providers.models import Credentials, ModelSpec
from autocad_bench_openweight.provider import OpenWeightProvider
from tests.examples.native_oracle import FakeServer, chat_route, serving


def spec(url: str, model: str) -> ModelSpec:
    return ModelSpec(provider="openweight", model=model, tool_mode="native",
                     options={"base_url": url + "/v1", "grammar": "uitars"})


def test_a_served_model_is_available_and_one_request_asks_the_server() -> None:
    with serving(FakeServer(replies=[], route=chat_route, model="ui-tars-1.5-7b")) as fake:
        entries = OpenWeightProvider().check_model_catalog(
            [spec(fake.url, "ui-tars-1.5-7b"), spec(fake.url, "qwen2.5-vl-7b")], Credentials({}))
    available, missing = entries
    assert available.available and available.reason == f"served by {fake.url}/v1"
    assert not missing.available
    assert missing.reason == f"{fake.url}/v1 does not serve it (it serves: ui-tars-1.5-7b)"
    assert fake.requests == [("GET", "/v1/models")], "one model list per server"


def test_a_server_that_does_not_answer_makes_the_model_unavailable() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    (entry,) = OpenWeightProvider().check_model_catalog([spec(f"http://127.0.0.1:{port}", "m")], Credentials({}))
    assert not entry.available and "did not answer (APIConnectionError)" in entry.reason


def test_the_plan_bills_a_priced_server_at_its_declared_rates(tmp_path: Path) -> None:
    """A per-token price in the options reaches the plan's pricing check and warnings."""
    from tests.examples.test_native_oracle import example_config

    config = example_config("vllm-uitars.json")
    model = config["rollouts"][0]["model"]
    with serving(FakeServer(replies=[], route=chat_route, model=model)) as fake:
        for rollout in config["rollouts"]:
            rollout["provider_options"].update(base_url=fake.url + "/v1", usd_per_million_input_tokens=0.2,
                                               usd_per_million_output_tokens=0.8)
        path = tmp_path / "batch.json"
        path.write_text(json.dumps(config))
        result = subprocess.run(["autocad-bench-batch", "--config", str(path)], capture_output=True, text=True,
                                timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    pricing = next(c for c in report["checks"] if c["name"] == "pricing")
    assert pricing["passed"] and pricing["details"]["fallback_priced"] == []
    assert report["warnings"] == [
        f"openweight/{model} is billed at the rates its provider_options declare: input $0.2, cached input $0.2, "
        "cache write $0.2, output $0.8 per million tokens"]
    catalog = [c for c in report["checks"] if "catalog" in c["name"]]
    assert catalog and all(c["passed"] for c in catalog), catalog
