"""The plan asks an open-weight server whether it answers and serves the model."""

from __future__ import annotations

import socket

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
