"""``autocad-bench tasks``: list, show, validate and render the task suite."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import click

from autocad_bench_evaluator.version import EVALUATOR_VERSION, SHIPPED_GOLD_CACHE


@click.group(name="tasks")
def tasks_group() -> None:
    """The task suite: every task's prompt, template, gold drawing and scoring spec."""


@tasks_group.command(name="list")
@click.option("--suite", default=None, help="Only the tasks of this named suite, in its order.")
@click.option("--app", default=None, help="Only tasks that support this application (librecad, autocad).")
@click.option("--tier", default=None, help="Only tasks of this tier (an original tier, or a skill).")
@click.option("--skill", default=None, help="Only tasks of this skill (draft, edit, reproduce, annotate, solid).")
@click.option("--family", "family_id", default=None, help="Only instances of this family.")
@click.option("--split", default=None, type=click.Choice(["dev", "test"]), help="Only this split.")
@click.option("--difficulty", default=None, type=click.Choice(["easy", "medium", "hard"]), help="Only this tier.")
def list_command(
    suite: str | None,
    app: str | None,
    tier: str | None,
    skill: str | None,
    family_id: str | None,
    split: str | None,
    difficulty: str | None,
) -> None:
    """Print the default suite's instances as JSON lines (id, family, skill, difficulty, split,
    apps, title)."""
    from autocad_bench_evaluator.suite import registry

    try:
        ids = registry.resolve_suite(suite) if suite else registry.list_tasks(app=app, tier=tier)
    except registry.SuiteError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)
    for task_id in ids:
        found = registry.definition(task_id)
        wanted = (
            (app is None or app in found.apps)
            and (tier is None or tier in (found.tier, found.skill))
            and (skill is None or found.skill == skill)
            and (family_id is None or found.family == family_id)
            and (split is None or found.split == split)
            and (difficulty is None or found.difficulty == difficulty)
        )
        if wanted:
            click.echo(
                json.dumps(
                    {
                        "task_id": task_id,
                        "family": found.family,
                        "skill": found.skill,
                        "difficulty": found.difficulty,
                        "split": found.split,
                        "tier": found.tier,
                        "apps": list(found.apps),
                        "title": found.title,
                    }
                )
            )


@tasks_group.command(name="families")
def families_command() -> None:
    """Print every task family as JSON lines (id, skill, version, fixed and default instances)."""
    from autocad_bench_evaluator.suite.families import families

    for fam in families():
        click.echo(
            json.dumps(
                {
                    "family": fam.family_id,
                    "skill": fam.skill,
                    "version": fam.version,
                    "generative": fam.generative,
                    "fixed": [task.task_id for task in fam.fixed],
                    "default_count": fam.default_count,
                    "apps": list(fam.apps),
                    "summary": fam.summary,
                }
            )
        )


@tasks_group.command(name="generate")
@click.option("--seed", type=click.IntRange(min=0), required=True, help="Generation seed (record it to reproduce).")
@click.option("--families", "family_ids", default=None, help="Comma-separated family ids (default: all generative).")
@click.option("--count", type=click.IntRange(min=1, max=1000), default=None, help="Instances per family.")
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Directory to create (must be new)."
)
def generate_command(seed: int, family_ids: str | None, count: int | None, out: Path) -> None:
    """Write a fresh instance set: task folders, suite file, gold cache and an example batch.

    The set is reproducible from the seed and the family versions (recorded in
    ``generation.json`` and in every task.json), yet unseen before it is generated. Run the
    printed batch command to score the reference solutions on local LibreCAD desktops.
    """
    from autocad_bench_evaluator.suite.generate import GenerationError, write_instance_set

    chosen = [f.strip() for f in family_ids.split(",") if f.strip()] if family_ids else None
    try:
        summary = write_instance_set(out, seed, chosen, count)
    except GenerationError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)
    click.echo(json.dumps(summary))
    click.echo(f"run it: autocad-bench-batch --config {out / 'batch.json'} --execute", err=True)


@tasks_group.command(name="show")
@click.argument("task_id")
def show_command(task_id: str) -> None:
    """Print one task: its spec, scoring spec and files."""
    from autocad_bench_evaluator.suite import registry

    if task_id not in registry.list_tasks():
        click.echo(f"error: unknown task {task_id!r} (see: autocad-bench tasks list)", err=True)
        sys.exit(2)
    task = registry.load(task_id)
    click.echo(
        json.dumps(
            {
                "task": task.spec.model_dump(mode="json"),
                "scoring": task.scoring.model_dump(mode="json"),
                "directory": str(registry.TASKS_DIR / task_id),
                "files": sorted(p.name for p in (registry.TASKS_DIR / task_id).iterdir()),
            },
            indent=2,
        )
    )


@tasks_group.command(name="validate")
@click.option(
    "--gold-cache",
    type=click.Path(file_okay=False, path_type=Path),
    default=SHIPPED_GOLD_CACHE,
    show_default=True,
    help="Gold cache to verify against the committed generators.",
)
@click.option(
    "--task",
    "task_ids",
    multiple=True,
    help="Check only the gold entries of these tasks (repeatable; the files are always all checked).",
)
def validate_command(gold_cache: Path, task_ids: tuple[str, ...]) -> None:
    """Check every task: files, reference images, gold manifests, and that regenerating the
    gold from committed code gives exactly the shipped entries. Exit 0 when all hold."""
    from autocad_bench_evaluator.gold_cache import GoldCacheError, load_entry
    from autocad_bench_evaluator.suite import registry
    from autocad_bench_evaluator.suite.build import all_files, differences

    unknown = [task_id for task_id in task_ids if task_id not in registry.list_tasks()]
    if unknown:
        click.echo(f"error: unknown task {unknown[0]!r} (see: autocad-bench tasks list)", err=True)
        sys.exit(2)
    chosen = list(task_ids) or registry.list_tasks()
    problems = differences(all_files())
    with tempfile.TemporaryDirectory(prefix="autocad-bench-validate-") as tmp:
        fresh = Path(tmp)
        registry.build_gold_cache(fresh, EVALUATOR_VERSION, chosen)
        for task_id in chosen:
            try:
                shipped = load_entry(gold_cache, EVALUATOR_VERSION, task_id)
                rebuilt = load_entry(fresh, EVALUATOR_VERSION, task_id)
            except GoldCacheError as error:
                problems.append(str(error))
                continue
            if shipped.manifest != rebuilt.manifest:
                problems.append(f"{task_id}: the shipped gold entry differs from the regenerated one")
    for problem in problems:
        click.echo(f"error: {problem}", err=True)
    click.echo(json.dumps({"tasks": len(chosen), "problems": len(problems)}))
    sys.exit(1 if problems else 0)


@tasks_group.command(name="render")
@click.argument("task_id")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="PNG to write.")
def render_command(task_id: str, out: Path) -> None:
    """Render the task's gold drawing to a PNG."""
    from autocad_bench_evaluator.suite import registry

    if task_id not in registry.list_tasks():
        click.echo(f"error: unknown task {task_id!r} (see: autocad-bench tasks list)", err=True)
        sys.exit(2)
    gold = SHIPPED_GOLD_CACHE / EVALUATOR_VERSION / task_id / "render.png"
    if gold.is_file():
        out.write_bytes(gold.read_bytes())
    else:
        out.write_bytes((registry.TASKS_DIR / task_id / "reference.png").read_bytes())
    click.echo(str(out))


def rebuild_shipped_gold_cache() -> None:
    """``python -m autocad_bench_evaluator.tasks_cli``: regenerate the shipped gold cache."""
    from autocad_bench_evaluator.suite import registry

    registry.build_gold_cache(SHIPPED_GOLD_CACHE, EVALUATOR_VERSION)


if __name__ == "__main__":
    rebuild_shipped_gold_cache()
