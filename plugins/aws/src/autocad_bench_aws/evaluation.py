"""Evaluation transfer through request-scoped presigned S3 URLs, then trusted scoring here.

After the pilot exits and before the worker is terminated, the wrapper asks the worker's
trusted exporter (an image script run through SSM, outside the model's desktop session) to
open the checkpointed drawing in the licensed AutoCAD and upload three objects through
presigned ``PUT`` URLs that are valid for this one request only: the candidate drawing, its
metadata export and its render. The wrapper downloads them, checks that the candidate is
byte-for-byte the drawing the pilot retrieved and that the metadata is bound to those bytes,
and scores locally against the pinned gold cache. Nothing from the gold cache is ever sent to
the worker: the exporter receives only the candidate's checksum and the upload URLs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocad_bench.errors import missing_extra_message
from autocad_bench.harness.layout import RolloutPaths
from autocad_bench.infrastructure import EvaluationArguments
from autocad_bench.storage import atomic_write_bytes, atomic_write_json
from autocad_bench_aws.bounds import EVALUATION_DOWNLOAD_S, EVALUATION_EXPORT_S, PRESIGNED_URL_S, scaled
from autocad_bench_aws.calls import AwsCallError, AwsSession, call
from autocad_bench_aws.readiness import EXPORT_SCRIPT, CommandFailed, run_command

EXIT_EVALUATION_FAILED = 1


class EvaluationUnavailable(Exception):
    """Evaluation is enabled but cannot run (no bucket, no gold cache, evaluator not installed)."""


@dataclass(frozen=True)
class EvaluationPlan:
    """Everything the evaluation transfer and scoring need, checked before any launch
    (built only by :func:`plan_evaluation`).
    """

    arguments: EvaluationArguments
    bucket: str
    prefix: str
    gold_cache: Path
    evaluator_version: str


def plan_evaluation(arguments: EvaluationArguments, prefix: str) -> EvaluationPlan | None:
    """None when evaluation is disabled; raises :class:`EvaluationUnavailable` before any launch."""
    if not arguments.enabled:
        return None
    missing = [name for name, value in (("evaluation.bucket", arguments.bucket),
                                        ("evaluation.gold_cache", arguments.gold_cache),
                                        ("evaluation.evaluator_version", arguments.evaluator_version)) if not value]
    if missing:
        raise EvaluationUnavailable(
            f"AWS evaluation needs {', '.join(missing)} (set \"evaluation\": {{\"enabled\": false}} only for a "
            "deliberately unevaluated run)")
    try:
        import autocad_bench_evaluator.evaluate  # noqa: F401
    except ImportError:
        raise EvaluationUnavailable(missing_extra_message("the evaluator", "evaluator")) from None
    assert arguments.bucket and arguments.gold_cache and arguments.evaluator_version
    return EvaluationPlan(arguments, arguments.bucket, prefix.strip("/"), Path(arguments.gold_cache),
                          arguments.evaluator_version)


@dataclass
class Transfer:
    """What came back from the worker: local paths of the verified objects."""

    candidate: Path | None
    metadata: Path | None
    render: Path | None
    error: str | None = None


def candidate_of(paths: RolloutPaths) -> Path | None:
    """The pilot's checkpointed drawing, if it saved one."""
    for suffix in (".dwg", ".dxf"):
        path = paths.drawing(suffix)
        if path.is_file():
            return path
    return None


async def transfer(plan: EvaluationPlan, session: AwsSession, instance_id: str, batch_id: str, rollout_id: str,
                   paths: RolloutPaths, log: Callable[[str], None]) -> Transfer:
    """Run the worker's exporter with fresh presigned URLs and download what it uploaded."""
    candidate = candidate_of(paths)
    if candidate is None:
        return Transfer(None, None, None)
    data = candidate.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    request_id = secrets.token_hex(8)
    base = f"{plan.prefix}/{batch_id}/{rollout_id}/{request_id}"
    keys = {"candidate": f"{base}/candidate{candidate.suffix}", "metadata": f"{base}/metadata.json",
            "render": f"{base}/render.png"}
    s3 = session.s3
    urls = {name: s3.generate_presigned_url("put_object", Params={"Bucket": plan.bucket, "Key": key},
                                            ExpiresIn=PRESIGNED_URL_S) for name, key in keys.items()}
    command = (f"& '{EXPORT_SCRIPT}' -RequestId '{request_id}' -DrawingSha256 '{sha}' "
               f"-DrawingName 'attempt{candidate.suffix}' -CandidateUrl '{urls['candidate']}' "
               f"-MetadataUrl '{urls['metadata']}' -RenderUrl '{urls['render']}'")
    try:
        await run_command(session, instance_id, [command], scaled(EVALUATION_EXPORT_S),
                          "autocad-bench evaluation export")
    except CommandFailed as error:
        return Transfer(candidate, None, None, f"the worker's evaluation export failed: {error}")
    got: dict[str, bytes] = {}
    for name, key in keys.items():
        try:
            body = await asyncio.wait_for(asyncio.to_thread(_download, s3, plan.bucket, key),
                                          timeout=scaled(EVALUATION_DOWNLOAD_S))
        except (AwsCallError, TimeoutError) as error:
            return Transfer(candidate, None, None, f"s3://{plan.bucket}/{key} could not be downloaded: {error}")
        got[name] = body
    if hashlib.sha256(got["candidate"]).hexdigest() != sha:
        return Transfer(candidate, None, None, "the worker exported other drawing bytes than the pilot retrieved")
    try:
        export = json.loads(got["metadata"])
    except ValueError:
        return Transfer(candidate, None, None, "the metadata export is not JSON")
    if not isinstance(export, dict) or export.get("dwg_sha256") != sha:
        return Transfer(candidate, None, None, "the metadata export is not bound to the candidate's bytes")
    from autocad_bench_evaluator.metadata import adapter_metadata_path

    metadata_path = adapter_metadata_path(candidate)
    atomic_write_bytes(metadata_path, got["metadata"])
    render_path = paths.evaluation / "host-render.png"
    render_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(render_path, got["render"])
    log(f"evaluation transfer {request_id}: candidate, metadata and render retrieved from s3://{plan.bucket}/{base}/")
    return Transfer(candidate, metadata_path, render_path)


def _download(s3: Any, bucket: str, key: str) -> bytes:
    response = call("GetObject", lambda: s3.get_object(Bucket=bucket, Key=key))
    return bytes(response["Body"].read())


def score(plan: EvaluationPlan, moved: Transfer, paths: RolloutPaths, task_prompt: str | None,
          environ: Mapping[str, str], log: Callable[[str], None]) -> int:
    """Score locally against the gold cache (after the worker is gone); returns the exit code."""
    from autocad_bench_evaluator.evaluate import evaluate
    from autocad_bench_evaluator.metadata import AdapterMetadataReader

    out = paths.evaluation
    out.mkdir(parents=True, exist_ok=True)
    if moved.error is not None:
        atomic_write_json(out / "status.json", {"state": "failed", "task_id": plan.arguments.task_id,
                                                "evaluator_version": plan.evaluator_version, "error": moved.error,
                                                "exit_code": EXIT_EVALUATION_FAILED})
        log(f"evaluation failed: {moved.error}")
        return EXIT_EVALUATION_FAILED
    judge = None
    if plan.arguments.judge_model:
        from autocad_bench_evaluator.judge import JudgeSettings, VisionJudge

        key_name = plan.arguments.environment_names[0] if plan.arguments.environment_names else "OPENAI_API_KEY"
        judge = VisionJudge(JudgeSettings(model=plan.arguments.judge_model), environ.get(key_name, ""))
    outcome = evaluate(moved.candidate, plan.arguments.task_id, plan.gold_cache, plan.evaluator_version, out,
                       judge=judge, dwg_reader=AdapterMetadataReader(), task_prompt=task_prompt)
    log(f"evaluation {outcome.state.value} (exit {outcome.exit_code})")
    return int(outcome.exit_code)
