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


def venv_with(tmp: Path, wheels: Path, requirement: str) -> Path:
    venv = tmp / "venv"
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": str(venv)}
    env.pop("UV_PROJECT_ENVIRONMENT", None)
    subprocess.run(["uv", "venv", "-q", "--python", shutil.which("python3") or "python3", str(venv)], check=True,
                   env=env, timeout=120)
    subprocess.run(["uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                    "--find-links", str(wheels), requirement], check=True, env=env, timeout=600)
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
