"""Edges of the concurrency caps and the price override file that the main tests pass by.

Caps past 256 (where Python stops sharing integer objects), the active count an admission
reports, a lease another process rewrote, a zombie holding a lease, and an override file
holding JSON null.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autocad_bench.costs import ActiveRolloutRegistry, ConcurrencyLimiter
from autocad_bench.costs.pricing import PricingError, load_pricing
from tests.core.test_concurrency import _write_lease


def test_the_limiter_counts_what_is_available() -> None:
    limiter = ConcurrencyLimiter(3)
    assert limiter.available == 3
    assert limiter.acquire()
    assert (limiter.active, limiter.available) == (1, 2)


def test_a_cap_past_256_holds_exactly() -> None:
    limiter = ConcurrencyLimiter(300)
    assert all(limiter.acquire() for _ in range(300))
    refused = limiter.acquire()
    assert not refused and refused.reason == "300 of 300 rollout slots in use"


def test_an_admission_reports_the_rollouts_active_with_it(tmp_path: Path) -> None:
    registry = ActiveRolloutRegistry(tmp_path, max_active=3)
    assert registry.try_acquire("r1").active == 1
    assert registry.try_acquire("r2").active == 2


def test_a_lease_another_process_rewrote_is_left_alone(tmp_path: Path) -> None:
    registry = ActiveRolloutRegistry(tmp_path, max_active=2)
    assert registry.try_acquire("r1")
    path = tmp_path / "r1.lease"
    theirs = {**json.loads(path.read_text()), "nonce": "someone-else"}
    path.write_text(json.dumps(theirs))
    assert registry.release("r1") is False
    assert json.loads(path.read_text())["nonce"] == "someone-else"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc process states")
def test_a_zombie_holds_no_lease(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child never became a zombie"
            time.sleep(0.01)
        stale = _write_lease(tmp_path, "zombie", pid=child.pid)
        registry = ActiveRolloutRegistry(tmp_path, max_active=1)
        assert registry.active_count() == 0
        assert not stale.exists()
    finally:
        child.wait()


def test_an_override_file_of_null_names_its_type(tmp_path: Path) -> None:
    override = tmp_path / "prices.json"
    override.write_text("null")
    with pytest.raises(PricingError) as raised:
        load_pricing({"AUTOCAD_BENCH_PRICING_JSON": str(override)})
    assert "the pricing override must be a JSON object, not null" in str(raised.value)


def _price(**change: object) -> dict[str, object]:
    return {"input": 1, "cached_input": 0.1, "cache_write": 1.25, "output": 2, **change}


@pytest.mark.parametrize("change", [
    {"input": -0.5}, {"input": "Infinity"}, {"output": "NaN"}, {"server_hour": -0.5}, {"server_hour": "Infinity"},
    {"long_context_threshold_tokens": 0, "long_context_input_multiplier": 2},
    {"long_context_threshold_tokens": 1000, "long_context_input_multiplier": 0.5},
    {"long_context_threshold_tokens": 1000, "long_context_output_multiplier": "Infinity"},
    {"long_context_output_multiplier": 2},  # a premium without a threshold would never apply
])
def test_a_price_that_cannot_be_meant_is_refused(change: dict[str, object]) -> None:
    from pydantic import ValidationError

    from autocad_bench.costs.pricing import ModelPrice

    with pytest.raises(ValidationError):
        ModelPrice.model_validate(_price(**change))


def test_a_price_keeps_its_defaults_and_its_numbers_as_written() -> None:
    from autocad_bench.costs.pricing import ModelPrice

    price = ModelPrice.model_validate(_price(long_context_threshold_tokens=1))
    assert price.server_hour == 0 and price.long_context_threshold_tokens == 1
    assert json.loads(price.model_dump_json())["cached_input"] == 0.1


@pytest.mark.parametrize("rate", [-0.5, float("inf")])
def test_an_hourly_infrastructure_rate_must_be_finite_and_not_negative(rate: float) -> None:
    from pydantic import ValidationError

    from autocad_bench.costs.pricing import PricingContract

    with pytest.raises(ValidationError):
        PricingContract.model_validate({"as_of": "2026-01-01", "infrastructure_hourly_usd": {"m6i.large": rate}})


@pytest.mark.parametrize(("name", "write"), [
    ("not-json", lambda p: p.write_text("{not json")),
    ("missing-field", lambda p: p.write_text("{}")),
    ("wrong-type", lambda p: p.write_text(json.dumps({"rollout_id": "x", "pid": None}))),
    ("a-directory", lambda p: p.mkdir()),
])
def test_an_unreadable_lease_counts_and_does_not_hide_the_next(tmp_path: Path, name: str, write: object) -> None:
    write(tmp_path / f"a-{name}.lease")  # type: ignore[operator]
    _write_lease(tmp_path, "b-live")
    registry = ActiveRolloutRegistry(tmp_path, max_active=5)
    assert [lease.rollout_id for lease in registry.active_leases()] == [f"a-{name}", "b-live"]


def test_a_stale_lease_does_not_hide_the_next(tmp_path: Path) -> None:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _write_lease(tmp_path, "a-dead", pid=int(finished.stdout))
    _write_lease(tmp_path, "b-live")
    assert [lease.rollout_id for lease in ActiveRolloutRegistry(tmp_path, max_active=5).active_leases()] == ["b-live"]


@pytest.mark.parametrize("host", ["aaa-elsewhere", "zzz-elsewhere"])
def test_a_lease_of_another_host_counts_whatever_its_name(tmp_path: Path, host: str) -> None:
    _write_lease(tmp_path, "remote", pid=999_999_999, host=host)
    assert ActiveRolloutRegistry(tmp_path, max_active=5).active_count() == 1


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc start times")
def test_a_lease_names_its_process_start_and_a_later_start_is_another_process(tmp_path: Path) -> None:
    import os

    registry = ActiveRolloutRegistry(tmp_path, max_active=5)
    lease = registry.try_acquire("mine").lease
    start = Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[-1].split()[19]
    assert lease is not None and lease.pid_start == start
    _write_lease(tmp_path, "recycled", pid=os.getpid(), pid_start="9" * 30)  # any other start: not us
    _write_lease(tmp_path, "still-me", pid=os.getpid(), pid_start=start)
    assert [x.rollout_id for x in registry.active_leases()] == ["mine", "still-me"]


def test_a_registry_checks_its_cap_makes_its_directory_and_knows_other_ids(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_active must be >= 1, got 0"):
        ActiveRolloutRegistry(tmp_path, max_active=0)
    registry = ActiveRolloutRegistry(tmp_path / "a" / "b", max_active=5)
    assert registry.try_acquire("r2")
    assert registry.try_acquire("r1")  # another id, sorting before a live one, is not "already active"


def test_a_smaller_cap_than_another_controllers_refuses(tmp_path: Path) -> None:
    big = ActiveRolloutRegistry(tmp_path, max_active=3)
    assert all(big.try_acquire(f"r{k}") for k in range(3))
    refused = ActiveRolloutRegistry(tmp_path, max_active=2).try_acquire("r9")
    assert not refused and refused.reason == "3 of 2 rollout slots in use across controllers"


def test_the_limiter_after_one_of_four() -> None:
    limiter = ConcurrencyLimiter(4)
    assert limiter.acquire()
    assert limiter.available == 3


def test_a_lower_nonce_in_a_rewritten_lease_is_still_someone_elses(tmp_path: Path) -> None:
    registry = ActiveRolloutRegistry(tmp_path, max_active=2)
    assert registry.try_acquire("r1")
    path = tmp_path / "r1.lease"
    path.write_text(json.dumps({**json.loads(path.read_text()), "nonce": "0"}))
    assert registry.release("r1") is False and path.exists()


def test_admissions_and_leases_cannot_be_changed_afterwards(tmp_path: Path) -> None:
    import dataclasses

    admission = ConcurrencyLimiter(1).acquire()
    lease = ActiveRolloutRegistry(tmp_path, max_active=1).try_acquire("r1").lease
    assert lease is not None
    for frozen, field in ((admission, "admitted"), (lease, "pid")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(frozen, field, 0)


def test_an_unreadable_lease_is_listed_without_a_process(tmp_path: Path) -> None:
    (tmp_path / "odd.lease").write_text("{not json")
    (lease,) = ActiveRolloutRegistry(tmp_path, max_active=2).active_leases()
    assert (lease.rollout_id, lease.pid, lease.host) == ("odd", 0, "unknown")


@pytest.mark.skipif(not Path("/proc/1/stat").exists(), reason="needs /proc")
def test_a_lease_of_process_1_is_alive(tmp_path: Path) -> None:
    _write_lease(tmp_path, "init", pid=1)
    assert ActiveRolloutRegistry(tmp_path, max_active=2).active_count() == 1


def test_declared_prices_join_the_table_and_none_leave_it_as_it_is() -> None:
    from decimal import Decimal

    from autocad_bench.costs.pricing import ModelPrice, default_pricing, price_for, with_declared_prices

    table = default_pricing()
    assert with_declared_prices(table, {}) is table
    own = ModelPrice(input=Decimal(0), cached_input=Decimal(0), cache_write=Decimal(0), output=Decimal(0))
    resolved = price_for("my-own-model", with_declared_prices(table, {"my-own-model": own}))
    assert (resolved.price, resolved.priced_by_fallback) == (own, False)


def test_a_listed_hourly_rate_is_not_the_fallback() -> None:
    from autocad_bench.costs.pricing import PricingContract, hourly_rate

    prices = PricingContract.model_validate({"as_of": "2026-01-01", "infrastructure_hourly_usd": {"box": 0.25}})
    rate = hourly_rate("box", prices)
    assert (str(rate.hourly_usd), rate.priced_by_fallback) == ("0.25", False)
    assert hourly_rate("other", prices).priced_by_fallback is True


def test_a_missing_override_file_says_why_in_words(tmp_path: Path) -> None:
    with pytest.raises(PricingError) as raised:
        load_pricing({"AUTOCAD_BENCH_PRICING_JSON": str(tmp_path / "none.json")})
    assert str(raised.value).endswith("cannot read pricing override (AUTOCAD_BENCH_PRICING_JSON): "
                                      "No such file or directory")


def test_an_override_of_the_wrong_shape_is_a_pricing_error(tmp_path: Path) -> None:
    override = tmp_path / "prices.json"
    override.write_text(json.dumps({"models": {"gpt-5.1": [1, 2]}}))
    with pytest.raises(PricingError):
        load_pricing({"AUTOCAD_BENCH_PRICING_JSON": str(override)})
