"""The backup runbook's filters for its Jobs and status.

Names only: the functions, and the reasons for each decision, are in
etcd_runbook/rules/etcd_backup_jobs.py."""

from __future__ import annotations

from typing import Any

from etcd_runbook.rules.etcd_backup_jobs import (
    check_plan,
    owned,
    pull_secrets,
    refusals,
    report,
    stale_binding,
    tls_secret_names,
    workload_or_refusal,
)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "etcd_backup_workload": workload_or_refusal,
            "etcd_backup_report": report,
            "etcd_backup_check_plan": check_plan,
            "etcd_backup_refusals": refusals,
            "etcd_backup_tls_secrets": tls_secret_names,
            "etcd_backup_pull_secrets": pull_secrets,
            "etcd_backup_stale_binding": stale_binding,
            "etcd_backup_owned": owned,
        }
