"""etcd_common's filter for the cluster ID a run trusts without planning the cluster.

Names only: the function, and the reasons for it, are in etcd_runbook/rules/etcd_cluster_id.py."""

from __future__ import annotations

from typing import Any

from etcd_runbook.rules.etcd_cluster_id import trusted_cluster_id


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "etcd_trusted_cluster_id": trusted_cluster_id,
        }
