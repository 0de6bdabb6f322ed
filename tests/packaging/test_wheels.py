"""Operators install from built wheels: extras bring their plugins, core stays light."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run(["uv", "build", "--all-packages", "--wheel", "-o", str(out), "-q"], cwd=REPO, check=True,
                   timeout=600)
    return out


def venv_with(tmp: Path, wheels: Path, *requirements: str) -> Path:
    venv = tmp / "venv"
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": str(venv)}
    env.pop("UV_PROJECT_ENVIRONMENT", None)
    subprocess.run(["uv", "venv", "-q", "--python", shutil.which("python3") or "python3", str(venv)], check=True,
                   env=env, timeout=120)
    subprocess.run(["uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                    "--find-links", str(wheels), *requirements], check=True, env=env, timeout=600)
    return venv


@pytest.mark.integration
def test_extras_from_wheels_expose_their_plugins(tmp_path: Path, wheels: Path) -> None:
    venv = venv_with(tmp_path, wheels, "autocad-bench[aws,hyperv,openai,anthropic,evaluator]")
    listing = subprocess.run([str(venv / "bin" / "autocad-bench"), "plugins"], capture_output=True, text=True,
                             check=True, timeout=120)
    plugins = json.loads(listing.stdout)
    assert {"aws", "local-hyperv"} <= set(plugins["infrastructure"])
    assert {"openai", "anthropic", "scripted"} <= set(plugins["providers"])
    assert "local-xvfb" not in plugins["infrastructure"], "only the requested extras are installed"
    load = ("from autocad_bench.plugins import PluginHost; h = PluginHost(); "
            "print([h.infrastructure(n).name for n in ('aws', 'local-hyperv')], "
            "[h.provider(n).name for n in ('openai', 'anthropic')])")
    loaded = subprocess.run([str(venv / "bin" / "python"), "-c", load], capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "['aws', 'local-hyperv'] ['openai', 'anthropic']"


@pytest.mark.integration
def test_core_alone_has_no_cloud_or_provider_sdk(tmp_path: Path, wheels: Path) -> None:
    venv = venv_with(tmp_path, wheels, "autocad-bench")
    probe = ("import importlib.util as u; print([m for m in ('boto3', 'botocore', 'openai', 'anthropic', "
             "'pyautogui', 'mss') if u.find_spec(m)])")
    result = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr
    missing = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "from autocad_bench.plugins import PluginHost; PluginHost().infrastructure('aws')"],
                             capture_output=True, text=True, timeout=60)
    assert "backend 'aws' is not installed: pip install \"autocad-bench[aws]\"" in missing.stderr


AUTHOR_SUITE = '''
import pytest
from autocad_bench.infrastructure import InfrastructureSpec
from autocad_bench.testing import BackendConformance, serve_fake_brokers
from example_autocad_backend import ExamplePoolPlugin


@pytest.fixture
def broker():
    with serve_fake_brokers(1) as brokers:
        yield brokers[0]


class TestExamplePool(BackendConformance):
    @pytest.fixture
    def backend(self):
        return ExamplePoolPlugin()

    @pytest.fixture
    def valid_spec(self, tmp_path, broker, monkeypatch):
        monkeypatch.setenv("EXAMPLE_POOL_TOKEN", broker.token)
        return InfrastructureSpec(backend="example-pool", broker_version="windows-autocad-2019-v11",
                                  settings={"workers": [broker.url], "token_env": "EXAMPLE_POOL_TOKEN",
                                            "lease_dir": str(tmp_path / "leases")})


class ExitAlwaysZero(ExamplePoolPlugin):
    """An author's slip: the command runs the rollout through a shell that always exits 0."""

    def build_rollout_command(self, request):
        command = super().build_rollout_command(request)
        argv = ("/bin/sh", "-c", '"$@"; exit 0', "sh", *command.argv)
        return command.model_copy(update={"argv": argv})


class TestExitAlwaysZero(TestExamplePool):
    @pytest.fixture
    def backend(self):
        return ExitAlwaysZero()
'''


@pytest.mark.integration
def test_an_author_runs_the_kit_from_installed_wheels_without_a_checkout(tmp_path: Path, wheels: Path) -> None:
    venv = venv_with(tmp_path, wheels, "autocad-bench", "autocad-bench-example-backend", "pytest")
    project = tmp_path / "my-backend"  # nothing of this repository on the path or in the folder
    project.mkdir()
    (project / "test_my_backend.py").write_text(AUTHOR_SUITE)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
         "-k", "TestExamplePool or (TestExitAlwaysZero and lifecycle)", "test_my_backend.py"],
        cwd=project, env=env, capture_output=True, text=True, timeout=900)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out  # the broken backend, and only it, fails
    assert "FAILED test_my_backend.py::TestExitAlwaysZero::test_lifecycle_runs_the_exact_child_once_and_releases" \
        in out, out
    assert "[exit-code-propagated]" in out, out
    # The shell's "exit 0" also swallows the failed evaluation of an evaluated batch.
    assert "FAILED test_my_backend.py::TestExitAlwaysZero::test_lifecycle_evaluates_when_the_batch_enables_" \
        "evaluation" in out, out
    assert "[failed-evaluation-fails-rollout]" in out, out
    assert out.count("FAILED ") == 2, out
    assert "PASSED test_my_backend.py::TestExamplePool::test_cancel_stops_within_grace_and_still_cleans_up" in out


@pytest.mark.integration
def test_every_internal_dependency_is_pinned_in_the_built_metadata(wheels: Path) -> None:
    """pip must never pair core 0.2 with a plugin built for 0.1: extras pin the release, and
    every distribution names a compatible range of the ones it imports."""
    import zipfile

    from packaging.requirements import Requirement

    built = sorted(wheels.glob("autocad_bench*.whl"))
    assert len(built) >= 14, built
    unpinned: list[str] = []
    for wheel in built:
        with zipfile.ZipFile(wheel) as archive:
            metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            lines = archive.read(metadata).decode().splitlines()
        version = next(line.split(": ", 1)[1] for line in lines if line.startswith("Version: "))
        for line in lines:
            if not line.startswith("Requires-Dist: "):
                continue
            requirement = Requirement(line.removeprefix("Requires-Dist: "))
            if not requirement.name.startswith("autocad-bench"):
                continue
            specifier = requirement.specifier
            if not specifier or not specifier.contains(version):
                unpinned.append(f"{wheel.name}: {line}")
            elif (wheel.name.startswith("autocad_bench-") and requirement.marker is not None
                  and str(specifier) != f"=={version}"):  # core's extras name exactly its own release
                unpinned.append(f"{wheel.name}: {line} (an extra must pin =={version})")
    assert unpinned == []


@pytest.mark.integration
def test_every_wheel_carries_the_license_it_declares(wheels: Path) -> None:
    import zipfile

    for wheel in sorted(wheels.glob("autocad_bench*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
            licenses = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
            assert licenses, f"{wheel.name} ships no LICENSE"
            assert "Apache License" in archive.read(licenses[0]).decode()
        assert "License-Expression: Apache-2.0" in metadata, wheel.name


@pytest.mark.integration
def test_a_deterministic_evaluation_install_has_no_judge_sdk(tmp_path: Path, wheels: Path) -> None:
    venv = venv_with(tmp_path, wheels, "autocad-bench[xvfb,evaluator]")
    python = str(venv / "bin" / "python")
    probe = "import importlib.util as u; print(u.find_spec('openai') is None, u.find_spec('ezdxf') is not None)"
    assert subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60).stdout.split() == [
        "True", "True"]
    judge = ("from autocad_bench_evaluator.judge import JudgeError, _openai\n"
             "try:\n    _openai()\nexcept JudgeError as error:\n    print(error)")
    said = subprocess.run([python, "-c", judge], capture_output=True, text=True, timeout=60)
    assert said.stdout.strip() == ("the vision judge's SDK (openai) is not installed: "
                                   'pip install "autocad-bench[judge]"'), said.stdout + said.stderr


@pytest.mark.integration
def test_the_two_documented_commands_score_a_run_in_an_empty_directory(tmp_path: Path, wheels: Path) -> None:
    """README: install ``autocad-bench[xvfb,evaluator]``, ``autocad-bench init ex``, then the batch
    command it prints; run outside the checkout with only the installed wheels."""
    venv = venv_with(tmp_path, wheels, "autocad-bench[xvfb,evaluator]")
    check = subprocess.run(["uv", "pip", "check", "--python", str(venv / "bin" / "python")], capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    work = tmp_path / "empty"
    work.mkdir()
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "CI": "1"}
    env.pop("VIRTUAL_ENV", None)
    init = subprocess.run(["autocad-bench", "init", "ex"], cwd=work, capture_output=True, text=True, env=env,
                          timeout=120)
    assert init.returncode == 0, init.stderr
    printed = next(line for line in init.stdout.splitlines() if line.startswith("run it:"))
    command = printed.removeprefix("run it:").split()
    assert command[0] == "autocad-bench-batch" and "--execute" in command
    run = subprocess.run(command, cwd=work, capture_output=True, text=True, env=env, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = work / command[command.index("--output-dir") + 1]
    summary = json.loads((out / "summary.json").read_text())
    assert [(r["task_id"], r["score"]) for r in summary["rollouts"]] == [
        ("prim-rectangle", 1.0), ("prim-circle-concentric", 1.0), ("part-plate-four-holes", 1.0)]
    assert "site-packages" not in (work / "ex" / "batch.json").read_text()
