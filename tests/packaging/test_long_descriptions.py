"""Each wheel's long description (its README, shown on PyPI) stands on its own.

On PyPI a README is read without the repository around it: relative links lead nowhere and
"see the repository README" names nothing. Every distribution must say how to install it
through the core extra and be more than a one-line stub.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

EXEMPT = {"autocad-bench-example-backend"}
"""An example for plugin authors, never published; its README may point into the repository."""

MIN_CHARS = 800
RELATIVE_LINK = re.compile(r"\]\((?!https?://|#)")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run(["uv", "build", "--all-packages", "--wheel", "-o", str(out), "-q"], cwd=REPO, check=True,
                   timeout=600)
    return out


def read_metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(archive.read(name).decode("utf-8"))


@pytest.fixture(scope="module")
def descriptions(wheels: Path) -> dict[str, Message]:
    found = {}
    for wheel in sorted(wheels.glob("*.whl")):
        metadata = read_metadata(wheel)
        found[str(metadata["Name"])] = metadata
    return {name: metadata for name, metadata in found.items() if name not in EXEMPT}


def problems_of(metadata: Message) -> list[str]:
    """What is wrong with one distribution's long description (empty when nothing)."""
    problems = []
    if metadata.get("Description-Content-Type", "").split(";")[0].strip() != "text/markdown":
        problems.append(f"Description-Content-Type is {metadata.get('Description-Content-Type')!r}, "
                        "not text/markdown")
    body = metadata.get_payload()
    assert isinstance(body, str)
    if len(body) < MIN_CHARS:
        problems.append(f"the description has {len(body)} characters, fewer than {MIN_CHARS}")
    if 'pip install "autocad-bench' not in body:
        problems.append('no install command (pip install "autocad-bench[...]")')
    for match in RELATIVE_LINK.finditer(body):
        line = body.count("\n", 0, match.start()) + 1
        problems.append(f"relative link at line {line}: {body[match.start():match.start() + 60].splitlines()[0]}")
    if "repository readme" in body.lower():
        problems.append("refers to the repository README, which PyPI readers cannot see")
    return problems


@pytest.mark.integration
def test_every_published_distribution_is_checked(descriptions: dict[str, Message]) -> None:
    extras = tomllib.loads((REPO / "core" / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    published = {"autocad-bench"} | {re.split(r"[\[=<>]", requirement)[0] for requirement in extras["all"]}
    assert published <= set(descriptions), sorted(published - set(descriptions))


@pytest.mark.integration
def test_long_descriptions_stand_on_their_own(descriptions: dict[str, Message]) -> None:
    failures = {name: found for name, metadata in sorted(descriptions.items()) if (found := problems_of(metadata))}
    assert not failures, "\n".join(f"{name}: {problem}" for name, found in failures.items() for problem in found)


def test_the_checks_catch_a_stub_and_a_relative_link() -> None:
    stub = Parser().parsestr("Metadata-Version: 2.4\nName: x\nDescription-Content-Type: text/markdown\n\n"
                             "# x\n\nSee the repository README and [docs](docs/aws.md).\n")
    found = problems_of(stub)
    assert any("fewer than" in p for p in found)
    assert any("install command" in p for p in found)
    assert any("relative link at line 3" in p for p in found)
    assert any("repository README" in p for p in found)
    good = Parser().parsestr("Metadata-Version: 2.4\nName: x\nDescription-Content-Type: text/markdown\n\n"
                             'pip install "autocad-bench[x]"\n[a](https://example.org) [b](#section)\n'
                             + "text " * 200)
    assert problems_of(good) == []
