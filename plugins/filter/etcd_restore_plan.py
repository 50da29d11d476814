"""The restore runbook's filters.

Names only: the functions, and the reasons for each decision, are in
etcd_runbook/rules/etcd_restore_plan.py."""

from __future__ import annotations

from typing import Any

from etcd_runbook.rules.etcd_restore_plan import (
    plan,
)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "etcd_restore_plan": plan,
        }
