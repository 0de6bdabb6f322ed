"""The kit as an author uses it: inherited in a test file of their own, run by a plain pytest
with none of this repository's configuration, against the example and a broken variant."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ElementTree
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

AUTHOR_TESTS = textwrap.dedent('''
    import pytest
    from autocad_bench.infrastructure import InfrastructureSpec
    from autocad_bench.testing import BackendConformance
    from autocad_bench.testing.backend_conformance import ConformanceOptions
    from example_autocad_backend import ExamplePoolPlugin
    from tests.harness.brokers import fake_brokers
    from tests.testing.backends.broken_pool import BrokenPool


    @pytest.fixture
    def broker():
        with fake_brokers(1) as brokers:
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

        @pytest.fixture
        def conformance_options(self):
            return ConformanceOptions(check_timeout_s=60.0, cancel_grace_s=25.0)


    class TestExitCodeSwallowed(TestExamplePool):
        @pytest.fixture
        def backend(self):
            return BrokenPool("exit-zero")


    class TestCrashSkipped(TestExamplePool):
        @pytest.fixture
        def conformance_options(self):
            return ConformanceOptions(skip={"crash": "no way to crash a controller in this lab"})
''')


def test_an_author_suite_passes_the_example_and_fails_the_flaw_naming_the_rule(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the author's own (empty) configuration
    (tmp_path / "test_my_backend.py").write_text(AUTHOR_TESTS)
    report = tmp_path / "report.xml"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", f"--junitxml={report}",
         "-k", "lifecycle or shared or cancel or crash", "test_my_backend.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert report.exists(), result.stdout + result.stderr
    outcomes: dict[str, tuple[str, str]] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        failed = case.find("failure")
        skipped = case.find("skipped")
        if failed is not None:
            outcomes[name] = ("failed", failed.get("message", "") + (failed.text or ""))
        elif skipped is not None:
            outcomes[name] = ("skipped", skipped.get("message", ""))
        else:
            outcomes[name] = ("passed", "")
    example = {name: outcome for name, outcome in outcomes.items() if name.startswith("TestExamplePool::")}
    assert len(example) == 5 and {state for state, _ in example.values()} == {"passed"}, result.stdout
    state, message = outcomes["TestExitCodeSwallowed::test_lifecycle_runs_the_exact_child_once_and_releases"]
    assert state == "failed" and "[exit-code-propagated]" in message, message
    state, message = outcomes["TestCrashSkipped::test_reap_after_a_crash_removes_exactly_its_leftovers"]
    assert state == "skipped" and "'crash'" in message and "no way to crash a controller" in message, message
    assert outcomes["TestCrashSkipped::test_cancel_stops_within_grace_and_still_cleans_up"][0] == "passed"
