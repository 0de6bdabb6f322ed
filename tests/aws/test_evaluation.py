"""Evaluation transfer through presigned S3 URLs, scored here against a local gold cache."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from autocad_bench_evaluator.gold_cache import build_entry
from autocad_bench_evaluator.metadata import read_drawing
from autocad_bench_evaluator.spec import ScoringSpec
from ezdxf.filemanagement import new

from autocad_bench.testing.fake_broker import FakeBroker
from tests.aws.batches import aws_config, result, run_batch, state
from tests.aws.conftest import AwsEnv

EVALUATOR_VERSION = "aws-test-v1"


def drawing(path: Path) -> bytes:
    doc = new("R2010", setup=True)
    msp = doc.modelspace()
    msp.add_line((0, 0), (100, 0))
    msp.add_circle((50, 50), 25)
    doc.saveas(path)
    return path.read_bytes()


def test_the_worker_exports_through_presigned_urls_and_the_gold_never_leaves(
        aws: AwsEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gold = tmp_path / "gold.dxf"
    data = drawing(gold)
    cache = tmp_path / "gold-cache"
    build_entry(cache, EVALUATOR_VERSION, gold, ScoringSpec(task_id="line-and-circle"))
    # The desktop's drawing is a copy of the gold (a perfect attempt); the fake AutoCAD exporter
    # reads it like the real one would.
    monkeypatch.setattr(FakeBroker, "_drawing", lambda self, session: data)

    def export(candidate: bytes) -> dict[str, Any]:
        path = tmp_path / "exported.dxf"
        path.write_bytes(candidate)
        return read_drawing(path).model_dump(mode="json")  # type: ignore[union-attr]

    aws.fake.export_metadata = export
    aws.client("s3").create_bucket(Bucket="eval-bucket")
    config = aws_config(aws, rollouts=1)
    config["evaluation"] = {"enabled": True, "bucket": "eval-bucket", "gold_cache": str(cache),
                            "evaluator_version": EVALUATOR_VERSION}
    proc, out = run_batch(aws, config, name="evaluated")
    assert proc.returncode == 0, proc.stdout + proc.stderr + (out / "logs" / "r0.log").read_text()
    batch = state(out)
    assert aws.live(batch["batch_id"]) == []
    rollout = out / "rollouts" / "r0"
    status = json.loads((rollout / "evaluation" / "status.json").read_text())
    assert status["state"] == "done" and status["score"] == 1.0, status
    assert (rollout / "attempt.dxf.metadata.json").exists() and (rollout / "evaluation" / "host-render.png").exists()
    assert result(out, "r0")["status"] == "completed"
    keys = [o["Key"] for o in aws.client("s3").list_objects_v2(Bucket="eval-bucket").get("Contents", [])]
    prefix = f"autocad-bench/evaluation/{batch['batch_id']}/r0/"
    assert len(keys) == 3 and all(k.startswith(prefix) for k in keys)
    # What the worker was sent: the candidate's checksum and upload URLs, nothing of the gold.
    exports = [c["text"] for c in aws.fake.commands if "export-evaluation" in c["text"]]
    assert len(exports) == 1
    gold_files = list((cache / EVALUATOR_VERSION / "line-and-circle").iterdir())
    for path in gold_files:
        assert hashlib.sha256(path.read_bytes()).hexdigest() not in exports[0] or path.name == "gold.dxf"
    assert str(cache) not in exports[0] and "gold" not in exports[0].lower()
    assert "X-Amz-Expires=900" in exports[0]


def test_evaluation_without_a_bucket_fails_before_any_launch(aws: AwsEnv, tmp_path: Path) -> None:
    gold = tmp_path / "gold.dxf"
    drawing(gold)
    build_entry(tmp_path / "cache", EVALUATOR_VERSION, gold, ScoringSpec(task_id="line-and-circle"))
    config = aws_config(aws, rollouts=1)
    config["evaluation"] = {"enabled": True, "gold_cache": str(tmp_path / "cache"),
                            "evaluator_version": EVALUATOR_VERSION}
    proc, out = run_batch(aws, config, name="nobucket")
    # Preflight refuses it: nothing is created and nothing is launched.
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert aws.fake.count("RunInstances") == 0
    assert not out.exists()
    report = json.loads(proc.stdout)
    check = next(c for c in report["checks"] if c["name"] == "preflight.evaluation_bucket")
    assert check["passed"] is False and "evaluation.bucket" in check["reason"]
