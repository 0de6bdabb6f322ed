"""Retry events on the operator's terminal: a sentence on stderr, never stamina's bare
``stamina.retry_scheduled`` line (checked in a fresh process, as the controller CLIs run)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import stamina.instrumentation as instrumentation

from autocad_bench.retry.reporting import install_retry_reporting, log_retry

SCRIPT = textwrap.dedent("""
    import stamina
    {setup}
    calls = []

    @stamina.retry(on=ConnectionError, attempts=3, wait_initial=0.01, wait_max=0.01, wait_jitter=0)
    def flaky():
        calls.append(1)
        if len(calls) < 2:
            raise ConnectionError("broker 127.0.0.1:9 refused the connection")
        return "ok"

    print(flaky())
""")


def _run(setup: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT.format(setup=setup)], capture_output=True, text=True,
                          timeout=60)


def test_without_it_stamina_prints_a_bare_line() -> None:
    """The problem this solves: the default hook's message says nothing about what failed."""
    result = _run("")
    assert result.stdout.strip() == "ok"
    assert "stamina.retry_scheduled" in result.stderr and "refused" not in result.stderr


def test_retries_are_one_explained_line_on_stderr() -> None:
    result = _run("from autocad_bench.retry.reporting import install_retry_reporting\n"
                  "install_retry_reporting()\ninstall_retry_reporting()")
    assert result.stdout.strip() == "ok"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr  # installed twice, reported once
    assert "stamina.retry_scheduled" not in result.stderr
    assert "WARNING autocad_bench.retry: retrying" in lines[0]
    assert "(attempt 2) in 0.0s after ConnectionError: broker 127.0.0.1:9 refused the connection" in lines[0]


def test_other_hooks_an_operator_installed_are_kept() -> None:
    def mine(details: instrumentation.RetryDetails) -> None:
        return None

    before = instrumentation.get_on_retry_hooks()
    try:
        instrumentation.set_on_retry_hooks([mine])
        install_retry_reporting()
        assert instrumentation.get_on_retry_hooks() == (mine, log_retry)
    finally:
        instrumentation.set_on_retry_hooks(list(before))
