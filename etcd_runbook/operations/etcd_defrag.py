"""Defragmentation plan and run: one member at a time, followers first, leader last.

Defragmenting blocks the member (reads and writes included) while bbolt rewrites its file,
so the leader goes last, and hands leadership away first (its block would stall the whole
cluster's writes), and the cluster must be healthy again before the next member is touched.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from etcd_runbook.clients.etcd_client import EtcdClient
from etcd_runbook.clients.etcd_common import Member, describe
from etcd_runbook.clients.etcd_errors import EtcdRefusedError
from etcd_runbook.operations.etcd_health import ClusterHealth, cluster_health
from etcd_runbook.operations.etcd_leadership import transfer_leadership
from etcd_runbook.operations.etcd_maintenance_ops import (
    member_endpoint,
    require_healthy,
    wait_healthy,
)


@dataclass
class DefragStep:
    member: Member
    db_size_before: int
    db_size_in_use_before: int
    db_size_after: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    leader_moved_to: str | None = None

    @property
    def reclaimable(self) -> bool:
        return self.db_size_before > self.db_size_in_use_before

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.member.name,
            "id": self.member.id,
            "db_size_before": self.db_size_before,
            "db_size_in_use_before": self.db_size_in_use_before,
            "db_size_after": self.db_size_after,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "leader_moved_to": self.leader_moved_to,
        }


@dataclass
class DefragPlan:
    steps: list[DefragStep] = field(default_factory=list)

    @property
    def order(self) -> list[str]:
        return [step.member.name for step in self.steps]


def plan_defrag(health: ClusterHealth, only: Member | None, corrupt: bool) -> DefragPlan:
    """Refuse unless the cluster is healthy; order followers (by name) then the leader."""
    if corrupt:
        raise EtcdRefusedError(
            "refusing to defragment: a CORRUPT alarm is raised; find the corrupt member and "
            "replace it before any maintenance",
            reason="CorruptAlarm",
        )
    require_healthy(health, "defragment")
    leader_id = health.leader_id
    chosen = [only] if only is not None else health.members
    ordered = sorted((m for m in chosen if m.id != leader_id), key=lambda m: m.name)
    ordered += [m for m in chosen if m.id == leader_id]
    plan = DefragPlan()
    for member in ordered:
        status = health.member_status[member.id]
        plan.steps.append(
            DefragStep(
                member=member,
                db_size_before=status.db_size or 0,
                db_size_in_use_before=status.db_size_in_use or 0,
            )
        )
    return plan


def run_defrag(
    client: EtcdClient,
    health: ClusterHealth,
    plan: DefragPlan,
    *,
    defrag_timeout: float,
    wait_timeout: float,
    leader_away: bool = True,
) -> None:
    """Defragment each step's member in order, waiting for a healthy cluster after each; with
    `leader_away`, the leader hands leadership to another voter first."""
    done: list[Member] = []
    for step in plan.steps:
        if leader_away and step.member.id == health.leader_id:
            target = transferee(health, step.member, done)
            if target is not None:
                transfer_leadership(client, health, target, wait_timeout)
                step.leader_moved_to = target.name
                health = cluster_health(client)
        endpoint = member_endpoint(client, health, step.member)
        step.started_at = time.time()
        endpoint.defragment(timeout=defrag_timeout)
        step.finished_at = time.time()
        health = wait_healthy(
            client, f"go on defragmenting after {describe(step.member)}", wait_timeout
        )
        step.db_size_after = health.member_status[step.member.id].db_size
        done.append(step.member)


def transferee(health: ClusterHealth, leader: Member, done: list[Member]) -> Member | None:
    """Who takes leadership from `leader` before its defragmentation: a healthy voter already
    defragmented in this call (its own pause is over), else the first healthy voter by name;
    None when it is the only voter."""
    voters = [
        m
        for m in health.members
        if m.id != leader.id and not m.is_learner and health.is_healthy(m.id)
    ]
    defragmented = {m.id for m in done}
    ranked = sorted(voters, key=lambda m: (m.id not in defragmented, m.name))
    return ranked[0] if ranked else None
