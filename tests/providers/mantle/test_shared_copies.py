"""Fireworks and Mantle ship the same Chat Completions state machine; the copies must not drift.

Each distribution carries its own copy (neither depends on the other); edit one, copy it over.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FIREWORKS = REPO / "providers" / "fireworks" / "src" / "autocad_bench_fireworks"
MANTLE = REPO / "providers" / "mantle" / "src" / "autocad_bench_mantle"


@pytest.mark.parametrize("name", ["history.py", "chat_wire.py", "chat_session.py"])
def test_shared_modules_are_identical(name: str) -> None:
    assert (FIREWORKS / name).read_bytes() == (MANTLE / name).read_bytes(), (
        f"providers/*/{name} differ: apply the change to both distributions")
