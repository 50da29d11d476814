"""The cluster ID a run trusts, from one look and without planning the cluster.

Every etcd module call of a run carries it (etcd_common's `etcd_common_connection`), so a
member of another cluster (a fork, or a cluster re-created under the same names) is never
asked, snapshotted or changed. A run that plans (etcd_common `observe`) records the same ID in
its plan; a run that does not (etcd_common `look`, the backup Job's) needs it all the same,
and computing a whole EtcdCluster plan only for it would tie the backup to every rule of the
cluster runbook.
"""

from __future__ import annotations

from typing import Any

from etcd_runbook.rules.cluster.observed import agreement, recorded_cluster_id


def trusted_cluster_id(obj: Any, claims: Any, info: Any) -> str:
    """The ID recorded for this EtcdCluster (its status, else its claims'), else the one a
    quorum of voting members agrees on; empty when neither is known (then no call is held to
    an ID). The plan's `cluster_id` is this same ID (tests/unit/test_etcd_cluster_id.py)."""
    obj = obj if isinstance(obj, dict) else {}
    claims = [c for c in claims if isinstance(c, dict)] if isinstance(claims, list) else []
    info = info if isinstance(info, dict) else {}
    recorded = recorded_cluster_id(obj, claims)
    if recorded:
        return recorded
    return str(info.get("cluster_id") or "") if agreement(info, recorded)["ok"] else ""
