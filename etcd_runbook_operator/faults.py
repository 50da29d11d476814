"""Fault points: named places in the runbooks where a test has the operator killed, as etcd's
gofail failpoints do for etcd. Not sleeps: a point fires at one task boundary of one run, so a
test reaches exactly the state it means (a learner added and no Pod made for it yet, a Pod
deleted by a roll and its successor not made, ...) every time.

A point is armed on one object, with the annotation `<group>/fault-points: <name>[,<name>]`,
and only when the operator was started with ETCD_RUNBOOK_FAULT_POINTS=enabled (the test
deployment's overlay; never the manifests users apply). The run's ansible-playbook exits at the
point (ansible_callbacks/ero_task_boundary.py), and the watcher then kills every process it
started and starts afresh (reconcile.py), writing nothing: what a SIGKILL between those two
tasks and a restart would leave. Each point fires once for an object (its uid), recorded in
the operator's artifacts directory, which outlives a restart of the container; the restarted
operator finds the cluster as the kill left it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .ansible_callbacks.ero_task_boundary import FAULT_RC

__all__ = ["FAULT_RC", "POINTS", "FaultPoint", "Ledger", "armed", "enabled", "run_env"]

ENABLE_ENV = "ETCD_RUNBOOK_FAULT_POINTS"


@dataclass(frozen=True)
class FaultPoint:
    name: str
    # "after": once the task ends ok (a task that was skipped does not count); "before": as
    # the task starts.
    when: str
    # The start of the task's name (its templated member name follows).
    task: str
    what: str


POINTS = {
    p.name: p
    for p in (
        FaultPoint(
            "after-member-add",
            "after",
            "Add | Add to etcd as a learner the member",
            "a learner is in etcd's member list; no claim and no Pod exist for it",
        ),
        FaultPoint(
            "before-promote",
            "after",
            "Add | Announce ",
            "the new member's Pod runs and etcd counts it healthy; it is still a learner",
        ),
        FaultPoint(
            "after-member-remove",
            "after",
            "Remove | Take out of etcd the member",
            "the member is out of etcd; its Pod and claim are still there",
        ),
        FaultPoint(
            "after-roll-pod-delete",
            "before",
            "Roll | Start on its new Pod the member",
            "a roll deleted the member's Pod; its new Pod is not made yet",
        ),
        FaultPoint(
            "bootstrap-before-pods",
            "after",
            "Heal | Record on the EtcdCluster that its members are being started",
            "a new cluster's claims are written and its start recorded; no Pod exists",
        ),
        FaultPoint(
            "bootstrap-after-pods",
            "after",
            "Heal | Start every member of the new cluster",
            "every Pod of a new cluster is made; none is recorded as a member yet",
        ),
        FaultPoint(
            "recovery-after-fence",
            "after",
            "Fence | Mark the claims of the fenced members",
            "a quorum recovery fenced every claim; the member Pods are not stopped yet",
        ),
        FaultPoint(
            "recovery-after-create",
            "after",
            "Recover | Create the first member's claim and the Job",
            "a quorum recovery made its first member's claim and the Job that writes it",
        ),
        FaultPoint(
            "restore-after-create",
            "after",
            "Act | Create the cluster, the first member's claim and the restore Job",
            "a restore made its cluster, the first member's claim and its Job",
        ),
    )
}


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "") == "enabled"


def armed(obj: dict[str, Any], group: str, fired: set[str]) -> list[FaultPoint]:
    """The points the object's annotation arms that have not fired for it yet. Names that are
    no point are ignored: the annotation is data from the API server, never trusted further."""
    words = str(
        ((obj.get("metadata") or {}).get("annotations") or {}).get(f"{group}/fault-points") or ""
    )
    names = [w.strip() for w in words.split(",") if w.strip()]
    return [POINTS[n] for n in names if n in POINTS and n not in fired]


def run_env(points: list[FaultPoint], fired_file: Path) -> dict[str, str]:
    """What ero_task_boundary.py reads: the armed points, and where to say which one fired."""
    if not points:
        return {}
    return {
        "ERO_FAULT_POINTS": json.dumps(
            [{"name": p.name, "when": p.when, "task": p.task} for p in points]
        ),
        "ERO_FAULT_FIRED": str(fired_file),
    }


class Ledger:
    """Which points fired for which object uid: a file each under `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def fired(self, uid: str) -> set[str]:
        if not self.directory.is_dir():
            return set()
        prefix = f"{uid}."
        return {
            p.name[len(prefix) :] for p in self.directory.iterdir() if p.name.startswith(prefix)
        }

    def record(self, uid: str, name: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / f"{uid}.{name}").touch()
