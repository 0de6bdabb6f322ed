"""Providers signing with the AWS chain hand its variables to subprocess-mode rollouts."""

from __future__ import annotations

import pytest

from autocad_bench.admission.admit import optional_environment
from autocad_bench.controller.children import child_environment
from autocad_bench.plugins import PluginHost


@pytest.mark.parametrize("provider", ["bedrock", "mantle"])
def test_the_set_chain_variables_reach_a_subprocess_rollout(provider: str) -> None:
    environ = {"AWS_PROFILE": "bench", "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t-value",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "ignored-by-botocore", "UNRELATED": "x",
               "PATH": "/usr/bin"}
    handle = PluginHost(environ=environ).provider(provider)
    names = optional_environment(handle, environ)
    assert set(names) == {"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"}
    child = child_environment(tuple(names), environ, {})
    assert child["AWS_PROFILE"] == "bench" and child["AWS_SECRET_ACCESS_KEY"] == "s3cr3t-value"
    assert "UNRELATED" not in child and "AWS_REGION" not in child
