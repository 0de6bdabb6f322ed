"""Every Python example in docs/plugins.md runs, in order, in one namespace (as a reader pastes them)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autocad_bench.infrastructure import InfrastructurePlugin, InfrastructureSpec
from autocad_bench.testing import BackendConformance
from autocad_bench.testing.backend_conformance import ConformanceOptions

DOC = Path(__file__).resolve().parents[3] / "docs" / "plugins.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def _fixture(cls: type, name: str) -> Callable[..., Any]:
    function: Callable[..., Any] = getattr(cls, name).__wrapped__
    return function


def test_the_python_examples_run_and_define_a_working_test_class(tmp_path: Path) -> None:
    blocks = _blocks()
    assert len(blocks) >= 3, "the writing, testing and tuning examples"
    namespace: dict[str, Any] = {"__name__": "plugins_doc_examples"}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)

    pool = namespace["WindowsPool"]
    assert issubclass(pool, InfrastructurePlugin) and pool.name == "my-windows-pool"
    suite = namespace["TestWindowsPool"]
    assert issubclass(suite, BackendConformance)
    instance = suite()
    assert isinstance(_fixture(suite, "backend")(instance), pool)
    spec = _fixture(suite, "valid_spec")(instance, tmp_path)
    assert isinstance(spec, InfrastructureSpec) and spec.backend == "my-windows-pool"
    assert pool().validate_spec(spec, "$") == []
    snapshot = _fixture(suite, "external_state")(instance, tmp_path)
    before = snapshot()
    (tmp_path / "0.lease").write_text("held")
    assert snapshot() != before, "the example snapshot sees a lease file"

    tuned = namespace["TestWindowsPoolTuned"]
    options = _fixture(tuned, "conformance_options")(tuned())
    assert isinstance(options, ConformanceOptions)
    assert options.skip == {"crash": "the lab cannot kill a controller mid-rollout"}
    assert options.cancel_grace_s == 10.0
