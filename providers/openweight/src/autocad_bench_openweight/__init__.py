"""Action grammars for open-weight models that answer in text rather than tool calls.

Each grammar (UI-TARS, Qwen-VL ``computer_use``, pyautogui code, plain ``computer_action``
JSON) is registered under the ``autocad_bench.grammars`` entry-point group and loaded with
:func:`autocad_bench.providers.grammar.load_grammar`.
"""
