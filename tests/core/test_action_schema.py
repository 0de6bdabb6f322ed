"""The forced ``computer_action`` tool schema is strict, deterministic and matches the models."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings

from autocad_bench.actions import (
    ACTION_TYPES,
    COMPUTER_ACTION_DESCRIPTION,
    COMPUTER_ACTION_TOOL_NAME,
    computer_action_schema,
)
from autocad_bench.actions.models import ACTION_MODELS
from tests.core.test_actions import valid_batches

# Keywords that OpenAI strict mode, Anthropic strict tools or both refuse, or that a tuple
# form would need. Bounds live in validate_batch instead.
UNSUPPORTED = {
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "default",
    "patternProperties",
    "$ref",
    "$defs",
}


def walk(schema: Any, path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every sub-schema with its location."""
    if isinstance(schema, dict):
        yield path, schema
        for key, value in schema.items():
            if key == "properties":
                for name, sub in value.items():
                    yield from walk(sub, f"{path}.properties.{name}")
            elif key == "items":
                yield from walk(value, f"{path}.items")
            elif key == "anyOf":
                for index, sub in enumerate(value):
                    yield from walk(sub, f"{path}.anyOf[{index}]")


def conforms(instance: Any, schema: dict[str, Any]) -> bool:
    """A small validator for exactly the keywords the schema uses."""
    if "anyOf" in schema:
        return any(conforms(instance, branch) for branch in schema["anyOf"])
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(instance, dict) or set(instance) - set(schema["properties"]):
            return False
        if not set(schema["required"]) <= set(instance):
            return False
        return all(conforms(instance[k], schema["properties"][k]) for k in instance)
    if kind == "array":
        return isinstance(instance, list) and all(conforms(item, schema["items"]) for item in instance)
    if kind == "integer":
        ok = isinstance(instance, int) and not isinstance(instance, bool)
    elif kind == "number":
        ok = isinstance(instance, int | float) and not isinstance(instance, bool)
    elif kind == "string":
        ok = isinstance(instance, str)
    else:
        raise AssertionError(f"unexpected schema type {kind!r}")
    return ok and ("enum" not in schema or instance in schema["enum"])


def test_schema_is_deterministic_and_a_fresh_copy() -> None:
    first = computer_action_schema()
    second = computer_action_schema()
    assert first == second
    assert json.dumps(first, sort_keys=False) == json.dumps(second, sort_keys=False)
    first["properties"]["actions"]["items"]["anyOf"].clear()
    assert computer_action_schema() == second


def test_every_object_is_closed_and_requires_all_properties() -> None:
    objects = [(p, s) for p, s in walk(computer_action_schema()) if s.get("type") == "object"]
    assert len(objects) == 1 + len(ACTION_TYPES)
    for path, schema in objects:
        assert schema["additionalProperties"] is False, path
        assert schema["required"] == list(schema["properties"]), path


def test_no_keyword_outside_the_strict_subset() -> None:
    allowed = {"type", "properties", "required", "additionalProperties", "items", "anyOf", "enum", "description"}
    for path, schema in walk(computer_action_schema()):
        assert not set(schema) & UNSUPPORTED, path
        assert set(schema) <= allowed, (path, set(schema) - allowed)
        assert "anyOf" in schema or "type" in schema, path


def test_one_branch_per_action_type_selected_by_a_single_value_enum() -> None:
    branches = computer_action_schema()["properties"]["actions"]["items"]["anyOf"]
    assert [b["properties"]["type"] for b in branches] == [{"type": "string", "enum": [t]} for t in ACTION_TYPES]
    for branch in branches:
        kind = branch["properties"]["type"]["enum"][0]
        assert set(branch["properties"]) == set(ACTION_MODELS[kind].model_fields), kind
        assert branch["description"]


def test_tool_name_and_description() -> None:
    assert COMPUTER_ACTION_TOOL_NAME == "computer_action"
    assert "printable ASCII" in COMPUTER_ACTION_DESCRIPTION
    assert "last action" in COMPUTER_ACTION_DESCRIPTION
    json.dumps(computer_action_schema())


def test_the_schema_rejects_what_strict_decoding_must_prevent() -> None:
    schema = computer_action_schema()
    assert not conforms({"actions": [{"type": "move", "x": 1}]}, schema)
    assert not conforms({"actions": [{"type": "move", "x": 1, "y": 2, "z": 3}]}, schema)
    assert not conforms({"actions": [{"type": "teleport", "x": 1, "y": 2}]}, schema)
    assert not conforms({"actions": [], "note": "x"}, schema)
    assert not conforms({"actions": [{"type": "click", "x": 1, "y": 2, "button": "left", "count": 1.5}]}, schema)


@settings(max_examples=300)
@given(batch=valid_batches())
def test_every_valid_batch_conforms_to_the_schema(batch: dict[str, Any]) -> None:
    assert conforms(batch, computer_action_schema())
