"""docs/hyperv.md carries the backend's bounds table exactly as the code defines it."""

from __future__ import annotations

from autocad_bench_hyperv.bounds import bounds_table
from tests.hyperv.conftest import REPO


def test_the_docs_print_the_bounds_table_of_the_code() -> None:
    assert bounds_table() in (REPO / "docs" / "hyperv.md").read_text()


def test_the_image_script_ships_with_the_package() -> None:
    from importlib.resources import files

    script = files("autocad_bench_hyperv").joinpath("image/start-broker.ps1").read_text()
    assert "arm.json" in script and "ready.json" in script and "AUTOCAD_BENCH_BROKER_TOKEN" in script
