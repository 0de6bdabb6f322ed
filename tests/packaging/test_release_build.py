"""The release build: every published distribution as wheel and sdist, and no example."""

from __future__ import annotations

import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def members() -> dict[str, list[str]]:
    """Workspace member name -> its classifiers."""
    root = tomllib.loads((REPO / "pyproject.toml").read_text())
    out = {}
    for member in root["tool"]["uv"]["workspace"]["members"]:
        project = tomllib.loads((REPO / member / "pyproject.toml").read_text())["project"]
        out[project["name"]] = project.get("classifiers", [])
    return out


def test_only_the_example_backend_is_private() -> None:
    private = sorted(n for n, c in members().items() if "Private :: Do Not Upload" in c)
    assert private == ["autocad-bench-example-backend"]


@pytest.mark.integration
def test_the_release_build_has_every_distribution_and_no_example(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    subprocess.run([str(REPO / "scripts" / "build-release"), str(out)], check=True, timeout=900,
                   capture_output=True, text=True)
    built = sorted(p.name for p in out.iterdir() if p.name != ".gitignore")  # uv marks its output dir
    published = sorted(n.replace("-", "_") for n, c in members().items() if "Private :: Do Not Upload" not in c)
    for name in published:
        assert f"{name}-0.1.0-py3-none-any.whl" in built, name
        assert f"{name}-0.1.0.tar.gz" in built, name
    assert not [b for b in built if b.startswith("autocad_bench_example_backend")]
    assert len(built) == 2 * len(published)
    with zipfile.ZipFile(out / "autocad_bench_broker-0.1.0-py3-none-any.whl") as broker:
        assert {"autocad_bench_broker/windows/Install-AutocadBenchBroker.ps1",
                "autocad_bench_broker/windows/Start-AutocadBenchBroker.ps1"} <= set(broker.namelist()), \
            "docs/windows-image.md tells operators to copy the scripts out of the installed broker"
