"""``autocad-bench-models``: live catalog checks for a config, explicit pairs or pinned models.

The real fireworks, mantle and bedrock providers (installed entry points) talk to local wire
fakes through their real SDKs; the command must only read (GET) and print one JSON report.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from autocad_bench.cli.models import models_command
from autocad_bench.plugins import PluginHost, PluginRegistry
from tests.core.batch_configs import pool_config, write
from tests.providers.bedrock.wire_converse import ConverseWire
from tests.providers.fireworks.helpers import aws_environment
from tests.providers.fireworks.wire_chat import ChatCompletionsWire
from tests.providers.mantle.wires import ACCESS_KEY, SECRET_KEY, MantleChatWire

FIREWORKS_MODEL = "accounts/fireworks/routers/kimi-k2p6-fast"
MANTLE_MODEL = "moonshotai.kimi-k2.5"
BEDROCK_MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
FW_KEY = "fw-cli-test-key-3a9e77c1d0"


def only(*names: str) -> Any:
    """An entry-point source limited to ``names`` (other teams' providers stay out of these tests)."""

    def source(group: str) -> Iterable[EntryPoint]:
        return [ep for ep in entry_points(group=group) if ep.name in names]

    return source


@pytest.fixture
def wires(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[ChatCompletionsWire, MantleChatWire,
                                                                         ConverseWire]]:
    aws_environment(monkeypatch, tmp_path / "aws", ACCESS_KEY, SECRET_KEY)
    (tmp_path / "aws").mkdir()
    foundation = [{"modelId": BEDROCK_MODEL, "inputModalities": ["TEXT", "IMAGE"]}]
    with ChatCompletionsWire(catalog=[{"id": FIREWORKS_MODEL, "supports_image_input": True}]) as fireworks, \
            MantleChatWire(catalog=[{"id": MANTLE_MODEL, "input_modalities": ["text", "image"]}]) as mantle, \
            ConverseWire(foundation=foundation) as bedrock:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_MANTLE", mantle.url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK", bedrock.url)
        yield fireworks, mantle, bedrock


def invoke(args: list[str], environ: dict[str, str], *names: str) -> tuple[int, dict[str, Any] | None, str]:
    host = PluginHost(registry=PluginRegistry(), environ={},
                      entry_point_source=only(*(names or ("fireworks", "mantle", "bedrock"))))
    result = CliRunner().invoke(models_command, args, obj={"host": host, "environ": environ})
    try:
        report = json.loads(result.stdout)
    except ValueError:
        report = None
    return result.exit_code, report, result.stderr if result.stderr_bytes is not None else result.output


def config_file(tmp: Path, fireworks_url: str, models: list[tuple[str, str, dict[str, Any]]]) -> Path:
    rollouts = [{"rollout_id": f"r{i}", "task_id": f"t{i}", "provider": p, "model": m, "provider_options": o}
                for i, (p, m, o) in enumerate(models)]
    config = pool_config(["http://127.0.0.1:9"], tmp / "leases", expected_rollouts=len(rollouts), rollouts=rollouts)
    return write(tmp, config)


def statuses(report: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(c["provider"], c["model"]): c["status"] for c in report["checks"]}


def test_config_models_are_all_checked(wires: Any, tmp_path: Path) -> None:
    fireworks, mantle, bedrock = wires
    path = config_file(tmp_path, fireworks.url, [
        ("fireworks", FIREWORKS_MODEL, {"base_url": fireworks.url + "/inference/v1"}),
        ("mantle", MANTLE_MODEL, {}),
        ("bedrock", BEDROCK_MODEL, {}),
    ])
    code, report, _ = invoke(["--config", str(path), "--region", "us-east-1"], {"FIREWORKS_API_KEY": FW_KEY})
    assert code == 0 and report is not None and report["passed"] is True
    assert statuses(report) == {("fireworks", FIREWORKS_MODEL): "available", ("mantle", MANTLE_MODEL): "available",
                                ("bedrock", BEDROCK_MODEL): "available"}
    mantle_check = next(c for c in report["checks"] if c["provider"] == "mantle")
    assert mantle_check["image_input"] is True and mantle_check["reason"].startswith("us-east-1:")
    assert "AWS standard credential chain" in mantle_check["reason"]
    every = fireworks.requests() + mantle.requests() + bedrock.requests()
    assert every and {r.method for r in every} == {"GET"}, "the check is read-only"
    assert FW_KEY not in json.dumps(report)


def test_explicit_pairs_skip_direct_providers_without_keys(wires: Any) -> None:
    code, report, _ = invoke(["--provider", "fireworks", "--model", FIREWORKS_MODEL, "--provider", "mantle",
                              "--model", MANTLE_MODEL, "--provider", "bedrock", "--model", BEDROCK_MODEL,
                              "--region", "us-east-1"], {})
    assert code == 1 and report is not None and report["passed"] is False
    assert statuses(report) == {("fireworks", FIREWORKS_MODEL): "skipped", ("mantle", MANTLE_MODEL): "available",
                                ("bedrock", BEDROCK_MODEL): "available"}
    skipped = next(c for c in report["checks"] if c["provider"] == "fireworks")
    assert skipped["reason"] == "not checked: credentials missing (FIREWORKS_API_KEY)"


def test_unavailable_models_exit_1(wires: Any) -> None:
    code, report, _ = invoke(["--provider", "mantle", "--model", "moonshotai.kimi-k2", "--provider", "bedrock",
                              "--model", "amazon.titan-text-premier-v1:0", "--region", "us-east-1"], {})
    assert code == 1 and report is not None
    assert set(statuses(report).values()) == {"unavailable"}


def test_pinned_models_when_nothing_is_named(wires: Any) -> None:
    code, report, _ = invoke(["--region", "us-east-1"], {})
    assert code == 0 and report is not None and report["mode"] == "pinned"
    assert statuses(report) == {("fireworks", FIREWORKS_MODEL): "skipped", ("mantle", MANTLE_MODEL): "available"}


def test_region_reaches_the_aws_providers(wires: Any) -> None:
    _, mantle, bedrock = wires
    invoke(["--provider", "mantle", "--model", MANTLE_MODEL, "--provider", "bedrock", "--model", BEDROCK_MODEL,
            "--region", "eu-west-3"], {})
    assert "/eu-west-3/bedrock-mantle/" in mantle.requests()[0].headers["authorization"]
    assert "/eu-west-3/bedrock/" in bedrock.requests()[0].headers["authorization"]


@pytest.mark.parametrize(("args", "message"), [
    (["--provider", "mantle"], "--provider and --model are given in pairs"),
    (["--provider", "nope", "--model", "x"], "provider 'nope' is not installed"),
    (["--provider", "mantle", "--model", MANTLE_MODEL, "--region", "Mars"], "provider_options.region"),
    (["--config", "/no/such/file.json"], "no such file"),
])
def test_usage_and_configuration_errors_exit_2(wires: Any, args: list[str], message: str) -> None:
    code, report, err = invoke(args, {})
    assert code == 2 and report is None
    assert message in err


def test_invalid_config_options_exit_2(wires: Any, tmp_path: Path) -> None:
    fireworks, _, _ = wires
    path = config_file(tmp_path, fireworks.url, [("fireworks", FIREWORKS_MODEL, {"service_tier": "priority"})])
    code, report, err = invoke(["--config", str(path)], {"FIREWORKS_API_KEY": FW_KEY})
    assert code == 2 and report is None
    assert "$.rollouts[0].provider_options.service_tier: not supported" in err
    assert fireworks.requests() == []
