"""The same batch runs on every backend by changing the infrastructure block only."""

from __future__ import annotations

import json
from pathlib import Path

from autocad_bench.config import load_config
from autocad_bench.plugins import PluginHost

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def body(name: str) -> dict[str, object]:
    data = json.loads((EXAMPLES / name).read_text())
    data.pop("infrastructure")
    data.pop("name")
    evaluation = dict(data.pop("evaluation"))  # type: ignore[call-overload]
    evaluation.pop("bucket", None)  # AWS moves drawings through the operator's bucket
    data["evaluation"] = evaluation
    return data


def test_backends_differ_only_in_infrastructure() -> None:
    assert body("local-librecad.json") == body("hyperv-pool.json") == body("aws-fleet.json")


def test_every_example_passes_its_backends_offline_validation() -> None:
    host = PluginHost(environ={})
    names = sorted(p.name for p in EXAMPLES.glob("*.json"))
    assert {"local-librecad.json", "hyperv-pool.json", "aws-fleet.json", "example-pool.json",
            "native-anthropic.json", "native-openai.json", "vllm-uitars.json"} <= set(names)
    for name in names:
        loaded = load_config(EXAMPLES / name)
        backend = host.infrastructure(loaded.config.infrastructure.backend)
        problems = backend.call("validate_spec", spec=loaded.config.infrastructure,
                                location=f"{name}: $.infrastructure")
        assert problems == [], (name, problems)
