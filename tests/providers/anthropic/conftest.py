"""Fixtures of the anthropic provider tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.providers.anthropic.messages_wire import MessagesWire
from tests.providers.anthropic.support import FABLE_MODEL, SERVER_MODEL, Rollout


@pytest.fixture
def wire() -> Iterator[MessagesWire]:
    with MessagesWire(catalog=[SERVER_MODEL, FABLE_MODEL]) as server:
        yield server


@pytest.fixture
def rollout(tmp_path: Path) -> Rollout:
    root = tmp_path / "rollout"
    root.mkdir()
    return Rollout(root)
