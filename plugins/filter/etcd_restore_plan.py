"""The restore runbook's filters.

Names only: the functions, and the reasons for each decision, are in
etcd_runbook/rules/etcd_restore_plan.py."""

from __future__ import annotations

from typing import Any

from etcd_runbook.rules.etcd_restore_plan import plan, status_of


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "etcd_restore_plan": plan,
            "etcd_restore_status": status_of,
        }
