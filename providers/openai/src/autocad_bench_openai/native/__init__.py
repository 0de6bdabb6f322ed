"""Native tool mode for OpenAI models: their own computer-use tool instead of ``computer_action``.

:mod:`autocad_bench_openai.native.actions` turns one action of a ``computer_call`` into the
harness's wire actions and builds the ``tools[]`` entry of either tool variant (GA
``computer`` or ``computer_use_preview``). :mod:`autocad_bench_openai.native.session` holds
:class:`NativeOpenAISession`, the provider session of ``tool_mode: "native"`` (import it
from there; it is not re-exported so importing this package stays light).
"""

from autocad_bench_openai.native.actions import (
    NativeActionError,
    NativeStep,
    map_computer_action,
    tool_definition,
)

__all__ = ["NativeActionError", "NativeStep", "map_computer_action", "tool_definition"]
