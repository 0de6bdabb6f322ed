"""Every Mantle test signs with static test credentials from the standard AWS chain."""

from __future__ import annotations

import pytest

from tests.providers.fireworks.helpers import aws_environment
from tests.providers.mantle.wires import ACCESS_KEY, SECRET_KEY


@pytest.fixture(autouse=True)
def _aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    aws_environment(monkeypatch, tmp_path_factory.mktemp("aws"), ACCESS_KEY, SECRET_KEY)
