"""The arithmetic of ``benchmarks/shared_mode_scale.py``: what its tables say must follow from what it ran."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def scale() -> ModuleType:
    # The benchmark imports its sibling ``_common`` as a top-level module, as when run as a script.
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("shared_mode_scale", BENCHMARKS / "shared_mode_scale.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


@given(fixed=st.floats(0.1, 5), idle=st.floats(0, 0.1), per_rollout=st.floats(0.001, 0.1),
       per_turn=st.floats(0.0005, 0.02), rollouts=st.integers(2, 2000), turns_a=st.integers(1, 5),
       extra=st.integers(1, 20), wall=st.floats(1, 100), slower=st.floats(1, 100))
def test_the_cpu_split_recovers_the_parts_a_batch_was_made_of(
        scale: ModuleType, fixed: float, idle: float, per_rollout: float, per_turn: float, rollouts: int,
        turns_a: int, extra: int, wall: float, slower: float) -> None:
    turns_b = turns_a + extra

    def run(n: int, turns: int, wall_s: float) -> dict[str, float]:
        return {"cpu_s": fixed + idle * wall_s + n * per_rollout + n * turns * per_turn, "wall_s": wall_s}

    got = scale.split_cpu(run(1, turns_a, wall), run(1, turns_a, wall + slower), run(rollouts, turns_a, 2 * wall),
                          run(rollouts, turns_b, 3 * wall), rollouts, turns_a, turns_b)
    for value, expected in zip(got, (fixed, idle, per_rollout, per_turn), strict=True):
        assert math.isclose(value, expected, rel_tol=1e-6, abs_tol=1e-9)


@pytest.mark.parametrize(("rollouts", "expected"), [
    (10, (10, 1)), (100, (10, 10)), (1000, (10, 100)), (200, (10, 20)),
    # not a multiple of ten, or more than 100 trials a model: a model per rollout, as before
    (41, (41, 1)), (1, (1, 1)), (2000, (2000, 1)),
])
def test_rollouts_are_spread_over_ten_models_when_the_trials_fit(
        scale: ModuleType, rollouts: int, expected: tuple[int, int]) -> None:
    models, trials = scale.models_and_trials(rollouts)
    assert (models, trials) == expected
    assert models * trials == rollouts and trials <= 100
