"""Native tool mode for Anthropic models: their own computer-use tool instead of ``computer_action``.

:mod:`autocad_bench_anthropic.native.actions` turns one ``tool_use`` input of the
``computer`` tool into the harness's wire actions and builds the tool's ``tools[]`` entry.
:mod:`autocad_bench_anthropic.native.session` holds :class:`NativeAnthropicSession`, the
provider session of ``tool_mode: "native"`` (import it from there; it is not re-exported so
that importing this package stays light). Importing this package imports only the SDK's
type modules, not a client.
"""

from autocad_bench_anthropic.native.actions import (
    BETA_HEADERS,
    NativeActionError,
    NativeStep,
    map_computer_action,
    tool_definition,
)

__all__ = ["BETA_HEADERS", "NativeActionError", "NativeStep", "map_computer_action", "tool_definition"]
