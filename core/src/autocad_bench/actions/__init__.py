"""Desktop actions: typed models, whole-batch validation, the strict tool schema, request ids.

The harness validates every ``computer_action`` call with :func:`validate_batch` before any
input reaches the desktop, sends the resulting :class:`ValidatedBatch` to the broker under
the idempotency id from :func:`action_request_id`, and gives every provider the same
:func:`computer_action_schema`.
"""

from autocad_bench.actions.ids import action_request_id
from autocad_bench.actions.keys import KEY_NAMES
from autocad_bench.actions.models import (
    ACTION_ADAPTER,
    ACTION_TYPES,
    ALL_ACTION_TYPES,
    MAX_CLICK_COUNT,
    MAX_WAIT_SECONDS,
    NATIVE_ONLY_ACTION_TYPES,
    Action,
    ClickAction,
    DoneAction,
    DragAction,
    HoldKeyAction,
    KeyAction,
    MouseButton,
    MouseDownAction,
    MouseUpAction,
    MoveAction,
    ScrollAction,
    TypeAction,
    WaitAction,
    action_to_wire,
)
from autocad_bench.actions.schema import (
    COMPUTER_ACTION_DESCRIPTION,
    COMPUTER_ACTION_TOOL_NAME,
    computer_action_schema,
)
from autocad_bench.actions.validation import BatchRejection, ValidatedBatch, validate_batch

__all__ = [
    "ACTION_ADAPTER",
    "ACTION_TYPES",
    "ALL_ACTION_TYPES",
    "COMPUTER_ACTION_DESCRIPTION",
    "COMPUTER_ACTION_TOOL_NAME",
    "KEY_NAMES",
    "MAX_CLICK_COUNT",
    "MAX_WAIT_SECONDS",
    "NATIVE_ONLY_ACTION_TYPES",
    "Action",
    "BatchRejection",
    "ClickAction",
    "DoneAction",
    "DragAction",
    "HoldKeyAction",
    "KeyAction",
    "MouseButton",
    "MouseDownAction",
    "MouseUpAction",
    "MoveAction",
    "ScrollAction",
    "TypeAction",
    "ValidatedBatch",
    "WaitAction",
    "action_request_id",
    "action_to_wire",
    "computer_action_schema",
    "validate_batch",
]
