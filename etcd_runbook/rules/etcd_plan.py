"""Decisions of the etcd_cluster runbook: pure functions from observed facts to a plan.

The role observes (the EtcdCluster, its member Pods and claims, TLS Secrets, what etcd says),
calls `etcd_cluster_plan` once, acts on the plan in YAML, and reports with
`etcd_cluster_report`. Nothing here talks to Kubernetes or etcd, so every decision has
table-driven unit tests (tests/unit/test_etcd_plan.py), including the ones that keep data safe:

* a member's durable record is its claim: the flags it first started with and, once it has
  joined, its member ID and cluster ID. A joined member restarts with flags under which etcd
  refuses to start on an empty data dir, so a wiped disk never comes back under its old
  identity; such a member is replaced (removed, then a fresh member on a fresh claim);
* nothing is removed or deleted on one endpoint's word: membership changes and cleanups need
  a quorum of voting members that agree on the member list, under the recorded cluster ID;
  a member that answers for another cluster, or as another member than its claim records,
  is fenced;
* learners first, one membership change at a time, the leader last;
* a member on a lost node is waited for, then made again on its own volume where another node
  can mount it, else replaced: removed from etcd before its Pod is deleted, so it never comes
  back as a member when its node does.

`facts` holds: `object` (the EtcdCluster), `pods`, `claims`, `info` (etcd_cluster_info's
result, {} when no member answered), `info_error`, `endpoints` (member name -> the URL this
run reaches it at), `tls` (what the TLS Secrets look like, never their data), `nodes` (each
member Pod's node, and the nodes their volumes admit: found, Ready, how long its kubelet has
been silent; None when Nodes cannot be read), `volumes` (where the volume of a member that no
usable node runs can be mounted, by claim name; None when PersistentVolumes cannot be read),
`observed_at` (when the look was taken, on the operator's clock) and `options` (the role's
settings).

The decisions live in etcd_runbook/rules/cluster/, one module a concern (roles/etcd_cluster/
README.md has the table of which rule is where); this module is the plan's table of steps and
the names the filters, the look and other runbooks import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from etcd_runbook.rules.cluster import (
    bootstrap,
    members,
    nodes,
    recover,
    recover_steps,
    recovery,
    result,
    roll,
    space,
    upgrade,
)
from etcd_runbook.rules.cluster.observed import Decided, _Observed
from etcd_runbook.rules.cluster.report import report_of
from etcd_runbook.rules.cluster.spec import normalize_spec, not_allowed, run_refusal
from etcd_runbook.rules.cluster.tls import tls_client, tls_material, tls_seen

__all__ = [
    "STEPS",
    "normalize_spec",
    "not_allowed",
    "plan",
    "report",
    "run_refusal",
    "tls_client",
    "tls_material",
    "tls_seen",
]

# One reconcile run's decisions, in order: each step reads the observation and what the steps
# before it decided, and returns its part (its refusals are added to theirs, in this order).
STEPS: tuple[Callable[[_Observed, Decided], Decided], ...] = (
    upgrade.plan_versions,  # the spec's, TLS Secrets' and version's refusals; the gate
    members.plan_lost_data,  # a member whose guard tripped: never healed, replaced
    recovery.plan_majority_lost,  # no quorum, and a majority's data gone: said, not acted on
    recover.plan_recover_request,  # a person's recovery request: checked, recorded, said
    nodes.plan_node_loss,  # members no node runs; those moved on their own volume
    roll.plan_standing,  # member Pods on the spec (renewed) and not yet (outdated)
    roll.plan_rolled,  # the members on their new Pod: halted, failing, settling
    members.plan_ended,  # Pods that ended, or cannot run on an outdated spec
    nodes.plan_unschedulable,  # Pods no node takes; Pods going on lost nodes
    roll.plan_roll_troubles,  # a halted roll, a Pod of the spec that cannot run
    members.plan_heal,  # a live claim without its Pod gets it back
    members.plan_fence,  # a member a trusted quorum contradicts, over TLS
    members.plan_record,  # what each claim records of its member
    members.plan_foreign,  # a member etcd lists that is none of ours
    members.plan_relabel,  # voting labels as etcd says
    members.plan_withheld,  # why membership waits (no trusted quorum)
    members.plan_stale,  # what is left of members etcd no longer lists
    members.plan_replace,  # data lost, fenced, or node lost past its timeout
    members.plan_lost,  # members etcd lists that have no claim
    members.plan_scale,  # add, or remove in scale_down_order
    members.plan_promote,  # learners made voters
    roll.plan_roll,  # one member a run, the leader last
    upgrade.plan_upgrade_gate,  # a minor upgrade waits for its snapshot
    roll.plan_transferee,  # who leadership moves to
    recover_steps.plan_recover_steps,  # a quorum recovery carried out, alone while it acts
    space.plan_space,  # defragmentation on the policy, NOSPACE recovered; CORRUPT said
    result.plan_hands_off,  # paused, read-only, not allowed: nothing acted on
    space.plan_corrupt_hold,  # a CORRUPT alarm: every runbook halted
    result.plan_tls_hold,  # no Pod made that mounts a TLS Secret not fit to mount
    bootstrap.plan_bootstrap,  # a new cluster's members at once, with nothing to lose
)


def plan(facts: dict[str, Any]) -> dict[str, Any]:
    """Everything one reconcile run does, decided from one observation."""
    o = _Observed(facts)
    decided: Decided = {"refusals": []}
    for step in STEPS:
        part = step(o, decided)
        decided = {**decided, **part, "refusals": decided["refusals"] + part.get("refusals", [])}
    return result.plan_result(o, decided)


def report(
    facts: dict[str, Any], extra_refusals: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """Status, conditions and Events from the last observation of the run; `extra_refusals`
    are what the run refused or failed at on the way (a step that was withheld)."""
    return report_of(_Observed(facts), plan(facts), extra_refusals)
