"""A fixed sample of mutants runs in the default test run, so the mutation configuration
(mutation/modules.toml, scripts/mutation) cannot rot (issue 23).

Each ``[[sample]]`` mutant is found by its stable id, applied to a copy of its package in a
temporary directory (never to the working tree), and its ``tests`` must fail against it;
the same tests must pass against the unmutated copy. Runs go through the warm pytest server
of ``mutation/warm.py`` (one import of the third-party stack, one fork per run).
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_mutation_{name}", REPO / "mutation" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


run = _load("run")
warm = _load("warm")
MODULES, SAMPLE = run.load_config()
BY_NAME = {m.name: m for m in MODULES}


def test_the_configuration_names_files_tests_and_definitions_that_exist() -> None:
    assert len(MODULES) >= 10 and len(SAMPLE) >= 5
    assert len({s["module"] for s in SAMPLE}) >= 2
    for module in MODULES:
        files = module.paths(REPO)
        assert files, module.name
        for test in module.tests:
            assert (REPO / test.split("::")[0]).exists(), f"{module.name}: {test} does not exist"
        source = "\n".join((REPO / f).read_text() for f in files)
        for name in (*module.definitions, *module.exclude):
            assert f"def {name}(" in source or f"class {name}" in source, f"{module.name}: no definition {name}"
    for entry in run.load_equivalent().values():
        assert entry.strip(), "every equivalent mutant needs its reason"


def test_stable_ids_do_not_depend_on_line_numbers(tmp_path: Path) -> None:
    source = "def f(x):\n    return x + 1\n"
    (tmp_path / "a.py").write_text(source)
    (tmp_path / "b.py").write_text("# moved\n\n" + source)
    a = {(m.operator, m.source_line): m.id for m in run.enumerate_mutants(tmp_path, "a.py")}
    b = {(m.operator, m.source_line): m.id for m in run.enumerate_mutants(tmp_path, "b.py")}
    assert a and a.keys() == b.keys()
    moved = {(m.operator, m.source_line): m.id for m in run.enumerate_mutants(tmp_path, "a.py")}
    assert moved == a  # the same file enumerates the same ids
    (tmp_path / "a.py").write_text("# moved\n\n" + source)
    assert {(m.operator, m.source_line): m.id for m in run.enumerate_mutants(tmp_path, "a.py")} == a


def test_annotation_spans_cover_the_annotations_and_nothing_else() -> None:
    """Mutants inside these spans are not run (``_skip_annotations``): postponed annotations
    are never evaluated, so no mutation there can change behaviour."""
    body = (
        "def f(x: int | None, *, y: list[int | str] = []) -> dict[str, int | float]:\n"
        "    z: int | None = x | 1\n"
        "    return {'a': z | 2}\n"
    )
    source = "from __future__ import annotations\n\n" + body
    lines = source.splitlines()
    spans = run.annotation_spans(source)
    assert sorted(lines[a[0] - 1][a[1]:b[1]] for a, b in spans) == sorted(
        ["int | None", "list[int | str]", "dict[str, int | float]", "int | None"])
    # the code's own `x | 1` is outside every span
    value = (4, lines[3].index("x | 1"))
    assert not any(a <= value <= b for a, b in spans)
    assert run.annotation_spans(body) == []  # annotations evaluated at definition: not skipped


def test_the_generated_docs_table_lists_every_module() -> None:
    docs = (REPO / "docs" / "testing.md").read_text()
    assert run.DOCS_START in docs and run.DOCS_END in docs
    table = docs.split(run.DOCS_START, 1)[1].split(run.DOCS_END, 1)[0]
    for module in MODULES:
        assert f"| {module.name} |" in table, "docs/testing.md: run scripts/mutation --docs-only --update-docs"


def _mutant(sample: dict[str, Any]) -> Any:
    assert sample["file"] in BY_NAME[sample["module"]].paths(REPO)
    for mutant in run.enumerate_mutants(REPO, sample["file"]):
        if mutant.id == sample["id"]:
            return mutant
    raise AssertionError(f"sample mutant {sample['id']} of {sample['module']} no longer exists: the code changed; "
                         "pick another (scripts/mutation prints every mutant's id) and update mutation/modules.toml")


def _package_copy(root: Path, path: str, mutated: str | None) -> Path:
    """Copy the top-level package holding ``path`` under ``root/src``; write ``mutated`` into it."""
    parts = Path(path).parts
    src = parts.index("src")
    package = REPO.joinpath(*parts[: src + 2])
    dest = root / "src" / parts[src + 1]
    shutil.copytree(package, dest, ignore=shutil.ignore_patterns("__pycache__"))
    if mutated is not None:
        dest.joinpath(*parts[src + 2 :]).write_text(mutated)
    return root / "src"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    sock = str(tmp_path_factory.mktemp("warm") / "s.sock")
    tests = sorted({t.split("::")[0] for s in SAMPLE for t in s["tests"]})
    proc = subprocess.Popen([sys.executable, str(REPO / "mutation" / "warm.py"), "serve", sock, "--", "-q", *tests],
                            cwd=REPO, start_new_session=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    try:
        deadline = time.monotonic() + 90
        while not Path(sock + ".ready").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the warm pytest server did not start"
            time.sleep(0.1)
        yield sock
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _pytest(server: str, src: Path, tests: list[str]) -> int:
    args = ["-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-p", "no:randomly", *tests]
    return int(warm.client(server, 120, args, sys_path=[str(src)], fallback=False))


def test_the_sample_tests_pass_on_unmutated_copies(server: str, tmp_path: Path) -> None:
    by_package: dict[str, set[str]] = {}
    for s in SAMPLE:
        parts = Path(s["file"]).parts
        by_package.setdefault(parts[parts.index("src") + 1], set()).update(s["tests"])
    runs = sorted((package, sorted(tests)) for package, tests in by_package.items())
    srcs = [_package_copy(tmp_path / package, next(s["file"] for s in SAMPLE if f"/{package}/" in s["file"]), None)
            for package, _ in runs]
    with concurrent.futures.ThreadPoolExecutor(len(runs)) as pool:
        codes = list(pool.map(lambda r: _pytest(server, r[0], r[1][1]), zip(srcs, runs, strict=True)))
    assert codes == [0] * len(runs), f"{runs} fail without a mutant: {codes}"


@pytest.mark.parametrize("sample", SAMPLE, ids=[f"{s['module']}-{s['id']}" for s in SAMPLE])
def test_sample_mutant_is_killed(server: str, tmp_path: Path, sample: dict[str, Any]) -> None:
    mutant = _mutant(sample)
    mutated = run.mutate_source(REPO, mutant)
    assert mutated != (REPO / mutant.path).read_text()
    src = _package_copy(tmp_path, mutant.path, mutated)
    rc = _pytest(server, src, list(sample["tests"]))
    assert rc == 1, (f"mutant {mutant.id} ({mutant.path}:{mutant.line} {mutant.operator}: {mutant.source_line}) "
                     f"{'survived' if rc == 0 else f'made pytest exit {rc}'}")


def test_equivalents_are_read_from_the_list_and_the_per_module_files(tmp_path: Path) -> None:
    main = tmp_path / "equivalent.toml"
    main.write_text('[[equivalent]]\nid = "aaaaaaaaaaaa"\nreason = "one"\n')
    directory = tmp_path / "equivalent"
    directory.mkdir()
    (directory / "m.toml").write_text('[[equivalent]]\nid = "bbbbbbbbbbbb"\nreason = "two"\n')
    assert run.load_equivalent(main, directory) == {"aaaaaaaaaaaa": "one", "bbbbbbbbbbbb": "two"}
    (directory / "n.toml").write_text('[[equivalent]]\nid = "aaaaaaaaaaaa"\nreason = "another"\n')
    with pytest.raises(SystemExit, match="documented twice"):
        run.load_equivalent(main, directory)


def test_a_module_scope_includes_definitions_and_leaves_out_exclusions() -> None:
    base = dict(files=("x.py",), tests=("t.py",), timeout=1.0, pytest_args=())
    everything = run.Module("m", **base)
    only = run.Module("m", **base, definitions=("a", "b"))
    rest = run.Module("m", **base, exclude=("a",))
    assert everything.in_scope("a") and everything.in_scope("z")
    assert only.in_scope("a") and not only.in_scope("z")
    assert not rest.in_scope("a") and rest.in_scope("b") and rest.in_scope("z")
    # the split modules of one file measure every definition once
    items = [m for m in MODULES if m.name.startswith("evaluator.scoring-items")]
    assert len(items) == 2
    for name in ("_area_centroid", "primitive", "polyline"):
        assert sum(m.in_scope(name) for m in items) == 1, name


def test_a_failed_run_never_overwrites_a_measured_report(tmp_path: Path) -> None:
    good = run.Result("m", ["x.py"], ["t.py"], total=10, killed=9, survived=1, finished="then")
    run._write(good, tmp_path)
    broken = run.Result("m", ["x.py"], ["t.py"], error="baseline failed (exit 1): ...")
    run._write(broken, tmp_path, keep_measured=True)
    kept = json.loads((tmp_path / "m.json").read_text())
    assert kept["killed"] == 9 and not kept["error"]
    assert "baseline failed" in (tmp_path / "m.error.md").read_text()
    # a module never measured records the failure itself; a later success clears the error file
    run._write(run.Result("n", ["y.py"], ["t.py"], error="baseline failed"), tmp_path, keep_measured=True)
    assert json.loads((tmp_path / "n.json").read_text())["error"]
    run._write(good, tmp_path)
    assert not (tmp_path / "m.error.md").exists()


def test_a_module_without_a_report_keeps_its_documented_row_marked(tmp_path: Path) -> None:
    docs = tmp_path / "testing.md"
    docs.write_text(
        f"intro\n{run.DOCS_START}\n| module | mutants |\n|---|---|\n"
        "| a | 10 | 9 | 0 | 1 | 0 | 90.0% | 2026-01-01 00:00 UTC |\n"
        "| b | | | | | | not yet measured | |\n"
        "#### Survivors documented as equivalent\n\n**a**\n\n* `123` x.py:1 `y` (op): why\n\n"
        f"{run.DOCS_END}\nrest\n"
    )
    base = dict(files=("x.py",), tests=("t.py",), timeout=1.0, pytest_args=())
    modules = [run.Module("a", **base), run.Module("b", **base), run.Module("c", **base)]
    table = run.summary_markdown(modules, tmp_path / "reports", docs)
    assert "| a | 10 | 9 | 0 | 1 | 0 | 90.0% | 2026-01-01 00:00 UTC (report not kept) |" in table
    assert "| b | | | | | | not yet measured | |" in table and "| c | | | | | | not yet measured | |" in table
    assert table.count(run.UNKEPT) == 1
    assert "* `123` x.py:1 `y` (op): why" in run.equivalent_markdown(modules, tmp_path / "reports", docs)
    # a report, once there, replaces the carried row
    run._write(run.Result("a", ["x.py"], ["t.py"], total=4, killed=4, finished="now"), tmp_path / "reports")
    assert "| a | 4 | 4 | 0 | 0 | 0 | 100.0% | now |" in run.summary_markdown(modules, tmp_path / "reports", docs)


def test_a_stopped_exec_kills_its_process_group_and_says_why(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {marker}; wait"
    started = time.monotonic()
    assert run._exec(["bash", "-c", script], tmp_path, dict(os.environ), 1.0) == "--max-minutes"
    assert time.monotonic() - started < 30
    child = int(marker.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
    assert run._exec(["bash", "-c", "exit 3"], tmp_path, dict(os.environ), None) == "cosmic-ray exec exited 3"
    assert run._exec(["true"], tmp_path, dict(os.environ), None) == ""
    run._STOP.set()
    try:
        assert run._exec(["sleep", "60"], tmp_path, dict(os.environ), None) == "interrupted"
    finally:
        run._STOP.clear()


def _calc_project(tmp_path: Path) -> tuple[Path, Any]:
    """A tiny project to mutate: ``tests/calc.py`` (double, which its test checks, and half,
    which nothing checks), sharing this repository's ``.venv`` and warm pytest server."""
    copy = tmp_path / "copy"
    (copy / "mutation").mkdir(parents=True)
    shutil.copy2(REPO / "mutation" / "warm.py", copy / "mutation" / "warm.py")
    (copy / ".venv").symlink_to(REPO / ".venv")
    (copy / "tests").mkdir()
    (copy / "tests" / "__init__.py").write_text("")
    (copy / "tests" / "calc.py").write_text("def double(x):\n    return x * 2\n\n\ndef half(x):\n    return x / 2\n")
    (copy / "tests" / "test_calc.py").write_text(
        "from tests.calc import double\n\n\ndef test_double():\n    assert double(3) == 6\n")
    module = run.Module("calc", ("tests/calc.py",), ("tests/test_calc.py",), 30.0,
                        ("-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-p", "no:randomly"))
    return copy, module


def test_a_recheck_reruns_only_the_survivors_and_refuses_changed_files(tmp_path: Path) -> None:
    copy, module = _calc_project(tmp_path)
    mutants = {(m.operator.split("_")[-1], m.line): m for m in run.enumerate_mutants(copy, "tests/calc.py")}
    in_double, in_half = mutants[("Add", 2)], mutants[("Add", 6)]  # x * 2 -> x + 2 (equal at 2, not 3); x / 2 -> x + 2
    source = (copy / "tests" / "calc.py").read_bytes()
    reports = tmp_path / "reports"

    def entry(m: run.Mutant) -> dict[str, str]:
        return {"id": m.id, "location": f"{m.path}:{m.line}", "operator": m.operator, "line": m.source_line,
                "diff": ""}

    run._write(run.Result("calc", ["tests/calc.py"], list(module.tests), total=3, killed=1, survived=2,
                          survivors=[entry(in_double), entry(in_half)], finished="then",
                          sources={"tests/calc.py": run._sha256(source)}), reports)
    result = run.recheck_module(module, copy, reports, {})
    assert result is not None
    assert [s["id"] for s in result.survivors] == [in_half.id]  # nothing tests half(): it stays
    assert (result.killed, result.survived) == (2, 1) and len(result.rechecked) == 1
    assert (copy / "tests" / "calc.py").read_bytes() == source  # every mutant was undone
    stored = json.loads((reports / "calc.json").read_text())
    assert stored["killed"] == 2 and "1 of 2 survivors killed" in stored["rechecked"][0]
    # the measured file changed: a recheck would say nothing about the measured code
    (copy / "tests" / "calc.py").write_bytes(source + b"\n# edited\n")
    assert run.recheck_module(module, copy, reports, {}) is None
    assert json.loads((reports / "calc.json").read_text()) == stored


@pytest.mark.slow  # three real cosmic-ray runs: about a minute
def test_a_partial_run_continues_where_it_stopped(tmp_path: Path) -> None:
    copy, module = _calc_project(tmp_path)
    reports = tmp_path / "reports"
    full = run.run_module(module, copy, reports, {})
    assert not full.partial and full.killed and full.survived and len(full.outcomes) == full.total
    # as if stopped half way: half the outcomes recorded, the rest pending
    report = json.loads((reports / "calc.json").read_text())
    kept = dict(sorted(report["outcomes"].items())[: len(report["outcomes"]) // 2])
    report.update(outcomes=kept, partial="stopped (interrupted) before every mutant ran", finished="earlier")
    (reports / "calc.json").write_text(json.dumps(report))
    carried_survivor = next(k for k, v in kept.items() if v == "survived") if "survived" in kept.values() else None
    again = run.run_module(module, copy, reports, {})
    assert not again.partial and again.pending == 0
    assert again.continued and f"{len(kept)} outcomes carried over from earlier" in again.continued[0]
    assert again.outcomes == full.outcomes
    assert (again.total, again.killed, again.survived) == (full.total, full.killed, full.survived)
    if carried_survivor:
        diff = next(s["diff"] for s in again.survivors if s["id"] == carried_survivor)
        assert diff == next(s["diff"] for s in full.survivors if s["id"] == carried_survivor)
    # a report of other file contents is not continued
    (copy / "tests" / "calc.py").write_text((copy / "tests" / "calc.py").read_text() + "\n# edited\n")
    report.update(outcomes=kept)
    (reports / "calc.json").write_text(json.dumps(report))
    assert not run.run_module(module, copy, reports, {}).continued
