"""The etcd_cluster runbook's filters.

Names only: the functions, and the reasons for each decision, are in
etcd_runbook/rules/etcd_plan.py."""

from __future__ import annotations

from typing import Any

from etcd_runbook.rules.etcd_plan import (
    normalize_spec,
    plan,
    report,
    run_refusal,
    tls_client,
    tls_material,
    tls_seen,
)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "etcd_cluster_plan": plan,
            "etcd_cluster_spec": normalize_spec,
            "etcd_cluster_report": report,
            "etcd_run_refusal": run_refusal,
            "etcd_tls_seen": tls_seen,
            "etcd_tls_material": tls_material,
            "etcd_tls_client": tls_client,
        }
