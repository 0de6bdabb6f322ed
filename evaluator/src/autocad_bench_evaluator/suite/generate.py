"""Write a fresh, seeded instance set that a batch can name (``autocad-bench tasks generate``).

:func:`write_instance_set` creates a new directory holding

* ``tasks/<task_id>/``: the same files as a folder of the shipped suite (task.json with the
  family, family version and seed; template; reference image; scoring spec; solutions);
* ``suite.json``: the core ``task_suite`` file listing every instance;
* ``gold-cache/<evaluator_version>/<task_id>/``: checksummed gold entries;
* ``batch.json``: a ready configuration that replays each LibreCAD instance's reference
  solution with the scripted provider on ``local-xvfb`` desktops (every score should be 1.0);
* ``generation.json``: the seed, the evaluator version and every family's version.

The directory is written under a temporary name and renamed into place, so an interrupted
run leaves nothing that looks complete. An existing ``out`` is refused.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autocad_bench_evaluator.suite.definitions import TaskDefinition


class GenerationError(ValueError):
    """A request that cannot be generated (unknown family, fixed-only family, existing output)."""


def _instances(seed: int, family_ids: Sequence[str] | None, count: int | None) -> list[TaskDefinition]:
    from autocad_bench_evaluator.suite.families import generate

    try:
        return generate(seed, family_ids, count)
    except (KeyError, ValueError) as error:
        raise GenerationError(str(error).strip("'\"")) from None


def write_instance_set(
    out: Path,
    seed: int,
    family_ids: Sequence[str] | None = None,
    count: int | None = None,
) -> dict[str, Any]:
    """Generate and write the set (see the module docstring); returns a summary.

    Raises :class:`GenerationError` for an unknown or fixed-only family or an existing ``out``.
    """
    from autocad_bench_evaluator.gold_cache import build_entry
    from autocad_bench_evaluator.suite.build import json_text, task_files
    from autocad_bench_evaluator.suite.registry import generate_gold
    from autocad_bench_evaluator.version import EVALUATOR_VERSION

    out = Path(out)
    if out.exists():
        raise GenerationError(f"{out}: already exists; choose a new directory")
    instances = _instances(seed, family_ids, count)
    if not instances:
        raise GenerationError("nothing to generate")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for task in instances:
            folder = staging / "tasks" / task.task_id
            folder.mkdir(parents=True)
            for name, data in task_files(task).items():
                (folder / name).write_bytes(data)
            with tempfile.TemporaryDirectory(prefix="autocad-bench-gold-") as tmp:
                build_entry(
                    staging / "gold-cache", EVALUATOR_VERSION, generate_gold(task, Path(tmp)), task.scoring_spec()
                )
        name = f"generated-s{seed}"
        ids = [task.task_id for task in instances]
        (staging / "suite.json").write_text(json_text({"name": name, "tasks": ids}))
        families = sorted({(t.family, t.family_version) for t in instances})
        generation = {
            "seed": seed,
            "evaluator_version": EVALUATOR_VERSION,
            "families": {family: version for family, version in families},
            "instances": len(ids),
        }
        (staging / "generation.json").write_text(json_text(generation))
        (staging / "batch.json").write_text(json_text(_batch(name, instances, EVALUATOR_VERSION)))
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {"out": str(out), **generation}


def _batch(name: str, instances: Sequence[TaskDefinition], evaluator_version: str) -> dict[str, Any]:
    """A local-xvfb batch replaying the reference solution of every LibreCAD instance."""
    runnable = [t for t in instances if "librecad" in t.apps]
    return {
        "name": name,
        "expected_rollouts": len(runnable),
        "max_concurrency": 2,
        "execution_mode": "shared",
        "task_suite": "suite.json",
        "tasks_dir": "tasks",
        "infrastructure": {"backend": "local-xvfb", "broker_version": "windows-autocad-2019-v11", "settings": {}},
        "evaluation": {"enabled": True, "evaluator_version": evaluator_version, "gold_cache": "gold-cache"},
        "rollouts": [
            {
                "rollout_id": f"oracle-{t.task_id}",
                "task_id": t.task_id,
                "provider": "scripted",
                "model": "reference-solution",
                "provider_options": {"script": f"tasks/{t.task_id}/solution.librecad.jsonl"},
            }
            for t in runnable
        ],
    }
