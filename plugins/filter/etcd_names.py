"""The project's label and annotation names for task files.

`{{ 'fenced' | etcd_name }}` is `etcd.runbook.io/fenced`, and `{{ name | etcd_cluster_labels }}`
the labels of a cluster's objects: a task that writes or selects on a mark spells it through
etcd_runbook/names.py, where every name is defined once."""

from __future__ import annotations

from typing import Any

from etcd_runbook.names import cluster_labels, cluster_selector, name, recovery_selector


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "etcd_name": name,
            "etcd_cluster_labels": cluster_labels,
            "etcd_cluster_selector": cluster_selector,
            "etcd_recovery_selector": recovery_selector,
        }
