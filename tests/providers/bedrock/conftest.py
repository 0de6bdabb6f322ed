"""Every Bedrock test signs with static test credentials from the standard AWS chain."""

from __future__ import annotations

import pytest

from tests.providers.fireworks.helpers import aws_environment

ACCESS_KEY = "AKIABEDROCKTESTKEY01"
SECRET_KEY = "bedrock/test/secret+key/0a1b2c3d4e5f6a7b8c"


@pytest.fixture(autouse=True)
def _aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    aws_environment(monkeypatch, tmp_path_factory.mktemp("aws"), ACCESS_KEY, SECRET_KEY)
