"""``benchmarks/_floor_probe.py`` does the work its floor claims: every rollout leases, resets,
runs its turns against a real fake broker and leaves the frames, the journal, the drawing and
the result behind, in both layouts, and its CPU figure counts that work."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from _common import broker_process
    finally:
        sys.path.remove(str(BENCHMARKS))
    tmp = tmp_path_factory.mktemp("brokers")
    with broker_process(3, 1920, 1080, tmp) as _:
        yield tmp / "brokers-3.json"


@pytest.mark.parametrize("layout", ["loop", "threads"])
def test_every_floor_rollout_does_the_protocols_work(brokers: Path, tmp_path: Path, layout: str) -> None:
    out, result = tmp_path / "out", tmp_path / "floor.json"
    out.mkdir()
    turns = 3
    subprocess.run([sys.executable, str(BENCHMARKS / "_floor_probe.py"), str(brokers), str(out), str(turns),
                    "0.01", layout, str(result)], check=True, timeout=120)
    measured = json.loads(result.read_text())
    assert measured["done"] == 3 and measured["failures"] == []
    assert measured["cpu_s"] > 0 and measured["wall_s"] >= turns * 0.01
    rollouts = sorted(out.iterdir())
    assert len(rollouts) == 3
    for rollout in rollouts:
        frames = sorted((rollout / "frames").glob("*.png"))
        assert len(frames) == turns + 1  # frame 0 and one per batch
        assert all(frame.read_bytes().startswith(b"\x89PNG") for frame in frames)
        journal = (rollout / "journal.jsonl").read_text().splitlines()
        assert [json.loads(line)["turn"] for line in journal] == list(range(turns))
        assert json.loads((rollout / "result.json").read_text()) == {"status": "completed", "turns": turns}
        assert (rollout / "events.json").exists() and (rollout / "frame_events.json").exists()
        assert len(list(rollout.glob("*.dxf")) + list(rollout.glob("*.dwg"))) == 1
