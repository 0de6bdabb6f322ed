"""The arithmetic of ``benchmarks/shared_mode_scale.py``: what its tables say must follow from what it ran."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import math
import sys
import threading
import time
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


@pytest.fixture(scope="module")
def phases() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_phases", BENCHMARKS / "_phases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_phase_counts_its_own_threads_cpu_across_awaits_and_not_the_time_it_waits(phases: ModuleType) -> None:
    clock = phases.PhaseClock()
    other_burned = threading.Event()

    async def phase() -> str:
        _burn(0.05)
        # While this coroutine waits, another thread burns CPU: not this phase's.
        worker = threading.Thread(target=lambda: (_burn(0.2), other_burned.set()))
        worker.start()
        await asyncio.sleep(0.3)
        worker.join()
        _burn(0.05)
        return "answer"

    timed = clock.wrap("pilot: phase", phase)
    assert asyncio.run(timed()) == "answer"
    assert other_burned.is_set()
    seconds, calls = clock.totals()["pilot: phase"]
    assert calls == 1
    assert 0.09 <= seconds < 0.2, seconds


def test_a_plain_phase_is_timed_per_call_summed_over_threads_and_still_raises(phases: ModuleType) -> None:
    clock = phases.PhaseClock()

    def step(fail: bool) -> None:
        _burn(0.01)
        if fail:
            raise ValueError("planted")

    timed = clock.wrap("controller: step", step)
    threads = [threading.Thread(target=timed, args=(False,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with pytest.raises(ValueError, match="planted"):
        timed(True)
    seconds, calls = clock.totals()["controller: step"]
    assert calls == 4
    assert 0.035 <= seconds < 0.2, seconds


def test_every_phase_names_a_method_the_code_still_has(phases: ModuleType) -> None:
    for label, module_name, class_name, method in phases.PHASES:
        owner = getattr(importlib.import_module(module_name), class_name)
        assert callable(getattr(owner, method, None)), f"{label}: {module_name}.{class_name}.{method} is gone"


def test_phase_times_refuse_shared_pilot_loops(phases: ModuleType) -> None:
    with pytest.raises(RuntimeError, match="AUTOCAD_BENCH_PILOT_LOOPS"):
        phases.install(phases.PhaseClock(), {"AUTOCAD_BENCH_PILOT_LOOPS": "2"}, phases=())
