"""The three conditions every resource of this project reports (Available, Progressing,
Degraded), each decided by its runbook as (status, reason, message)."""

from __future__ import annotations

from typing import Any

# A condition as (status, reason, message).
Condition = tuple[str, str, str]


def conditions(
    available: Condition, progressing: Condition, degraded: Condition
) -> dict[str, dict[str, Any]]:
    """The conditions as status writes them, by type."""
    return {
        kind: {"status": value[0], "reason": value[1], "message": value[2]}
        for kind, value in (
            ("Available", available),
            ("Progressing", progressing),
            ("Degraded", degraded),
        )
    }
