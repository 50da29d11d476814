"""What a plan says: the holds that override the steps (hands off, TLS Secrets not fit to
mount) and the result the role acts on, assembled from what the steps decided."""

from __future__ import annotations

from typing import Any

from etcd_runbook.names import ANN_FENCED
from etcd_runbook.rules.cluster.common import (
    MAX_INDEX,
    _meta,
    annotations_of,
    parse_quantity,
    quorum_of,
)
from etcd_runbook.rules.cluster.observed import Decided, _Observed
from etcd_runbook.rules.cluster.spec import cluster_domain, pod_hash
from etcd_runbook.rules.cluster.upgrade import member_version

# The plan's lists that repair.yml carries out before any membership change: what must not be
# trusted, who each member is, what is left of members etcd no longer has, what is lost.
REPAIR_STEPS = ("fence", "record", "relabel", "stale", "replace", "lost", "promote")
# The plan's lists that act.yml carries out (the budget is compared apart, as it is written).
ACT_STEPS = (
    *REPAIR_STEPS,
    "add",
    "remove",
    "settle_marks",
    "roll",
    "grow",
    "upgrade_backup",
)


def plan_hands_off(o: _Observed, d: Decided) -> Decided:
    """Paused, read-only or outside the allow-lists: the plan is said, nothing is acted on."""
    if not o.hands_off:
        return {}
    held = ("heal", "ended", "moved", "fence", "record", "relabel", "settle_marks")
    membership = ("stale", "replace", "lost", "promote", "add", "remove", "roll")
    return {**{k: [] for k in (*held, *membership)}, "recover": {}}


def plan_tls_hold(o: _Observed, d: Decided) -> Decided:
    """No member Pod is made that would mount a TLS Secret not fit to mount (tls_plan): one
    missing, or a user's not labelled for the cluster. Healing, re-creating, adding,
    replacing and rolling each make one; the Pods that run keep running."""
    if not o.tls_plan["unmountable"]:
        return {}
    return {k: [] for k in ("heal", "ended", "replace", "add", "roll")}


def _identity(o: _Observed, d: Decided) -> dict[str, Any]:
    """Who the cluster is, how far it is trusted, and what each member's Pod is made from."""
    names = [f"{o.name}-{i}" for i in range(MAX_INDEX + 1)]
    return {
        "name": o.name,
        "namespace": o.namespace,
        "uid": str(_meta(o.obj).get("uid") or ""),
        "domain": cluster_domain(o.options),
        "auto_compaction_retention": str(o.options.get("auto_compaction_retention") or "1h"),
        "spec": o.spec,
        "paused": o.paused,
        "hands_off": o.hands_off,
        "known": o.known,
        "trusted": o.trusted,
        "agreement": o.agreed,
        "withheld": d["withheld"],
        "cluster_id": o.recorded_id or (o.info.get("cluster_id", "") if o.agreed["ok"] else ""),
        "leader": o.leader,
        "quorum": o.quorum,
        # The members etcd counts healthy, each known by its peer URL.
        "healthy": sorted(n for n, m in o.by_name.items() if m.get("healthy")),
        "member_names": sorted(o.by_name),
        "versions": {n: member_version(o, d, n) for n in names},
        "pod_hashes": {n: pod_hash(o.spec, member_version(o, d, n)) for n in names},
    }


def _members(o: _Observed, d: Decided) -> dict[str, Any]:
    """What happens to the members and their Pods, in the order the role acts."""
    return {
        "bootstrap": d["bootstrap"],
        "bootstrap_record": d["bootstrap_record"],
        "heal": d["heal"],
        "ended": d["ended"],
        "moved": d["moved"],
        # Members an agreeing quorum no longer lists: their Pods may go at once (grace period
        # 0), as no kubelet may be there to confirm a graceful end and the process, if its
        # node comes back, is no member any more.
        "unlisted": sorted(n for n in set(o.pods) | set(o.claims) if n not in o.by_name)
        if o.trusted
        else [],
        **{
            k: d[k]
            for k in ("leaving", "fence", "suspects", "record", "relabel", "replace", "stale")
        },
        **{k: d[k] for k in ("lost", "promote", "add", "remove", "roll")},
        # The whole roll still to go, in order (its first is `roll`, when it may go now).
        "roll_pending": d["roll_pending"],
        # Whether `roll` is the first member of this roll (none on the new Pod yet).
        "roll_first": bool(d["roll"]) and not d["renewed"],
        **{k: d[k] for k in ("outdated", "halted", "settling", "settle_marks", "transferee")},
        "lost_data": d["lost_data"],
        "majority_lost": d["majority_lost"],
        "recovery": d["recovery"],
        # A quorum recovery's step this run (recover_steps.py): Pods to stop, the first
        # member's claim and Job to create, that claim to release.
        "recover": d["recover"],
        "unschedulable": dict(sorted(d["stuck"].items())),
        "node_lost": d["node_lost"],
    }


def _volumes_and_secrets(o: _Observed, d: Decided) -> dict[str, Any]:
    """The upgrade's snapshot, the TLS Secrets this run writes (tls_plan), the claims to grow,
    the disruption budget, and what is refused or warned of."""
    spec = o.spec
    return {
        "upgrade_backup": d["upgrade_backup"],
        "upgrade_waiting": d["upgrade_waiting"],
        "upgrade_snapshot": d["upgrade_snapshot"],
        "fenced": sorted(n for n, c in o.claims.items() if ANN_FENCED in annotations_of(c)),
        "tls_missing": o.tls_plan["write"],
        "tls_issue": o.tls_plan["issue"],
        "tls_new_ca": o.tls_plan["new_ca"],
        "tls_ca_from": o.tls_plan["ca_from"],
        "tls_announce": o.tls_plan["announce"],
        "tls_unmountable": o.tls_plan["unmountable"],
        "grow": sorted(
            _meta(c)["name"]
            for c in o.live_claims.values()
            if d["spec_ok"]
            and parse_quantity(
                ((c.get("spec") or {}).get("resources") or {})
                .get("requests", {})
                .get("storage", "0")
            )
            < spec["volume_bytes"]
        ),
        # A drain may take members only while a quorum of the larger of the voting membership
        # and the size asked for stays: during a scale-down it follows the real voters, during
        # a scale-up it already protects the size being built.
        "pdb_min_available": quorum_of(max(len(o.voters), spec["size"])),
        "refusals": d["refusals"],
        "warnings": spec["warnings"],
        # Defragmentation or a NOSPACE recovery this run (space.py), and why none.
        "space": d["space"],
        "space_sizes": d["space_sizes"],
        "space_blocked": d["space_blocked"],
        "corrupt": d["corrupt"],
    }


def plan_result(o: _Observed, d: Decided) -> dict[str, Any]:
    """The plan the role acts on, from what every step decided."""
    result = {**_identity(o, d), **_members(o, d), **_volumes_and_secrets(o, d)}
    # Whether act.yml has a membership, record, roll or volume step to take (a run with none
    # skips its steps altogether).
    result["steps"] = any(result[step] for step in ACT_STEPS)
    # Whether act.yml has a repair to make first (most changes have none: one skipped task).
    result["repair"] = any(result[step] for step in REPAIR_STEPS)
    # Whether the run has anything to change that the plan alone can tell (the Services and
    # the budget are compared with what was seen by the role): a run with nothing skips its
    # change steps in one task.
    result["busy"] = bool(
        result["heal"] or result["ended"] or result["leaving"] or result["bootstrap"]
    ) or (
        not o.hands_off
        and bool(
            result["steps"] or result["tls_missing"] or result["recover"] or d["space"]["action"]
        )
    )
    return result
