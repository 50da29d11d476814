"""The backup runbook's filters for snapshots and retention.

Names only: the functions, and the reasons for each decision, are in
etcd_runbook/rules/etcd_backup_plan.py."""

from __future__ import annotations

from typing import Any

from etcd_runbook.rules.etcd_backup_plan import (
    backup_prefix,
    backup_record,
    backup_target,
    check_failed,
    check_key,
    check_record,
    newest_verified,
    or_refusal,
    parse_snapshot_key,
    prune_plan,
    retained_status,
    retention,
    snapshot_key,
    snapshot_source,
)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "etcd_backup_retention": retention,
            "etcd_backup_prune": prune_plan,
            "etcd_backup_key": snapshot_key,
            "etcd_backup_prefix": backup_prefix,
            "etcd_backup_parse_key": parse_snapshot_key,
            "etcd_backup_newest_verified": newest_verified,
            "etcd_backup_retained_status": retained_status,
            "etcd_backup_source": or_refusal(snapshot_source),
            "etcd_backup_target": or_refusal(backup_target),
            "etcd_backup_record": backup_record,
            "etcd_backup_check_key": check_key,
            "etcd_backup_check_record": check_record,
            "etcd_backup_check_failed": check_failed,
        }
