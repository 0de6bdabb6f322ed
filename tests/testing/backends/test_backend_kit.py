"""The backend conformance kit fails every planted contract break, naming the rule, and passes
the correct example backend.

Each broken backend is the example pool with one flaw (``broken_pool.FLAWS``); the kit's
executed checks run against it directly (``LifecycleProbe.run``), exactly as the inherited
``BackendConformance`` tests run them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path

import pytest

from autocad_bench.infrastructure import InfrastructureSpec
from autocad_bench.plugins import PluginHost, PluginRegistry
from autocad_bench.testing.fake_broker import FakeBroker
from autocad_bench.testing.lifecycle_checks import (
    EXECUTED_CHECKS,
    SECRETS,
    ConformanceOptions,
    ContractViolation,
    LifecycleProbe,
)
from example_autocad_backend import ExamplePoolPlugin
from tests.harness.brokers import fake_brokers

from .broken_pool import FLAWS, BrokenPool

FAST = ConformanceOptions(check_timeout_s=60.0, cancel_grace_s=2.0, settle_s=1.0)


@pytest.fixture
def brokers() -> Iterator[list[FakeBroker]]:
    with fake_brokers(2, token="example-pool-token-" + "3b6e") as started:
        yield started


@pytest.fixture
def pool(tmp_path: Path, brokers: list[FakeBroker], monkeypatch: pytest.MonkeyPatch
         ) -> tuple[InfrastructureSpec, Callable[[], Hashable]]:
    """A two-desktop pool on live fake brokers and its external state (the lease files).

    Two desktops, so that a resume which takes another free desktop than the crashed
    rollout's is caught.
    """
    assert len({broker.token for broker in brokers}) == 1
    monkeypatch.setenv("EXAMPLE_POOL_TOKEN", brokers[0].token)
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    leases = tmp_path / "leases"
    spec = InfrastructureSpec(backend="example-pool", broker_version="windows-autocad-2019-v11",
                              settings={"workers": [broker.url for broker in brokers],
                                        "token_env": "EXAMPLE_POOL_TOKEN", "lease_dir": str(leases)})

    def state() -> Hashable:
        return tuple((p.name, hashlib.sha256(p.read_bytes()).hexdigest()) for p in sorted(leases.glob("*")))

    return spec, state


def probe(backend: object, pool: tuple[InfrastructureSpec, Callable[[], Hashable]], workdir: Path,
          options: ConformanceOptions = FAST) -> LifecycleProbe:
    registry = PluginRegistry()
    registry.register("infrastructure", backend)
    host = PluginHost(registry=registry, environ={}, entry_point_source=lambda group: ())
    spec, state = pool
    return LifecycleProbe(host.infrastructure("example-pool"), spec, state, workdir, options)


@pytest.mark.parametrize("check", EXECUTED_CHECKS)
def test_the_correct_example_backend_passes(check: str, pool: tuple[InfrastructureSpec, Callable[[], Hashable]],
                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    kit = probe(ExamplePoolPlugin(), pool, tmp_path_factory.mktemp("kit"))
    kit.run(check)
    # The shipped example implements recovery: its crash check must really resume a rollout.
    assert kit.not_exercised == {}


def test_a_worker_that_is_not_reconnectable_skips_the_resume_saying_so(
        pool: tuple[InfrastructureSpec, Callable[[], Hashable]], tmp_path_factory: pytest.TempPathFactory) -> None:
    _, state = pool
    before = state()
    kit = probe(BrokenPool("not-reconnectable"), pool, tmp_path_factory.mktemp("kit"))
    kit.run("crash")
    assert "not reconnectable" in kit.not_exercised["resume"]
    assert state() == before  # the crashed rollout the kit did not resume was reaped


@pytest.mark.parametrize("flaw", sorted(FLAWS))
def test_a_planted_flaw_fails_its_check_naming_the_rule(
        flaw: str, pool: tuple[InfrastructureSpec, Callable[[], Hashable]],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    check, rule = FLAWS[flaw]
    options = FAST if flaw != "shared-hangs" else ConformanceOptions(check_timeout_s=3.0, cancel_grace_s=2.0)
    _, state = pool
    before = state()
    with pytest.raises(ContractViolation) as failure:
        probe(BrokenPool(flaw), pool, tmp_path_factory.mktemp("kit"), options).run(check)
    assert rule in failure.value.rules, str(failure.value)
    assert f"[{rule}]" in str(failure.value)
    assert failure.value.check == check
    # The kit cleans up after a broken backend: its processes are killed and its batch reaped.
    assert state() == before or flaw in {"no-release", "shared-no-release", "reap-misses-leftovers"}


def test_ignoring_sigterm_is_killed_after_the_grace_and_every_consequence_named(
        pool: tuple[InfrastructureSpec, Callable[[], Hashable]], tmp_path_factory: pytest.TempPathFactory) -> None:
    with pytest.raises(ContractViolation) as failure:
        probe(BrokenPool("ignores-sigterm"), pool, tmp_path_factory.mktemp("kit")).run("cancel")
    # SIGKILLed after the grace: its lease stays, the child it hid from the stop keeps running.
    assert {"cancel-within-grace", "cancel-reaches-child", "no-leftover-processes", "state-released",
            "capacity-restored"} <= set(failure.value.rules), str(failure.value)


def test_the_original_example_wrapper_leaves_its_lease_on_cancel(
        pool: tuple[InfrastructureSpec, Callable[[], Hashable]], tmp_path_factory: pytest.TempPathFactory) -> None:
    """Without SIGTERM handling the wrapper dies at once (a stop exit code), but its lease stays."""
    with pytest.raises(ContractViolation) as failure:
        probe(BrokenPool("original-wrapper-cancel"), pool, tmp_path_factory.mktemp("kit")).run("cancel")
    assert {"state-released", "capacity-restored"} <= set(failure.value.rules), str(failure.value)
    assert "cancel-exit-code" not in failure.value.rules


def test_options_refuse_an_unreasoned_skip_and_a_grace_beyond_the_contract() -> None:
    with pytest.raises(ValueError, match="needs a reason"):
        ConformanceOptions(skip={"crash": " "})
    with pytest.raises(ValueError, match="unknown executed checks"):
        ConformanceOptions(skip={"crahs": "typo"})
    with pytest.raises(ValueError, match="cancel_grace_s"):
        ConformanceOptions(cancel_grace_s=31.0)
