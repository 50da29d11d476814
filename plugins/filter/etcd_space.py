"""The space runbook's filters (defragmentation, NOSPACE recovery).

Names only: the functions, and the reasons for each decision, are in
etcd_runbook/rules/cluster/space.py."""

from __future__ import annotations

from typing import Any

from etcd_runbook.rules.cluster.space import (
    defrag_events,
    defrag_records,
    nospace_verdict,
    space_by_hand,
)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "etcd_defrag_records": defrag_records,
            "etcd_defrag_events": defrag_events,
            "etcd_nospace_verdict": nospace_verdict,
            "etcd_space_by_hand": space_by_hand,
        }
