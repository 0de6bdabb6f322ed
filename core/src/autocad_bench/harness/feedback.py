"""The controller's text to the model after each batch (deterministic, compact)."""

from __future__ import annotations

from autocad_bench.broker.protocol import ActionsResponse


def executed_feedback(response: ActionsResponse, remaining_actions: int) -> str:
    """What happened to the last batch: indices, receipts, screen stability, budget left."""
    failed = [r for r in response.receipts if not r.ok]
    count = response.next_index - response.first_index
    parts = [
        f"Executed actions {response.first_index}..{response.next_index - 1} ({count} input"
        f"{'' if count == 1 else 's'} delivered to the desktop)."
        if count
        else "No action was executed."
    ]
    if failed:
        parts.append(
            "Input failed at action "
            + ", ".join(f"{r.index} ({r.type}: {r.error or 'not injected'})" for r in failed[:5])
            + "."
        )
    if not response.post_action_visual_stable:
        parts.append("The screen was still changing when this screenshot was taken.")
    parts.append("A receipt proves the input reached the desktop, not that the application accepted it: "
                 "check the screenshot.")
    parts.append(f"Actions left in this rollout: {remaining_actions}.")
    return " ".join(parts)


def rejected_feedback(problems: str, streak: int, limit: int, remaining_actions: int) -> str:
    """Why the last batch was refused before any input, and how many refusals remain."""
    return (
        "Your last computer_action batch was rejected before any input reached the desktop; "
        f"nothing was executed. Problems: {problems} "
        f"Invalid batches in a row: {streak} of {limit} allowed. "
        f"Actions left in this rollout: {remaining_actions}."
    )
