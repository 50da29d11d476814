"""The members: heal (a live claim gets its Pod back), fence (a member a trusted quorum
contradicts, over TLS), record (what each claim records of its member), and membership, only
on a trusted quorum's word: stale, replace, lost, scale (a scale-down removes learners first,
then unhealthy members, then the highest index; the leader last) and promote."""

from __future__ import annotations

from typing import Any

from etcd_runbook.names import (
    ANN_CLUSTER_ID,
    ANN_FENCED,
    ANN_INITIAL_STATE,
    ANN_MEMBER_ID,
    ANN_REMOVING,
    ANN_VERSION,
    LABEL_VERSION,
    LABEL_VOTER,
)
from etcd_runbook.rules.cluster.common import (
    MAX_INDEX,
    PEER_PORT,
    _deleting,
    _refusal,
    annotations_of,
    labels_of,
    member_index,
    member_url,
    quorum_of,
    url_key,
)
from etcd_runbook.rules.cluster.nodes import node_loss_due
from etcd_runbook.rules.cluster.observed import (
    Decided,
    _Observed,
    _phase,
    data_fault,
    data_lost,
    pod_ready,
)
from etcd_runbook.rules.cluster.roll import never_healthy, pod_created
from etcd_runbook.rules.cluster.spec import cluster_domain
from etcd_runbook.rules.etcd_pods import container_trouble, seconds_between, unschedulable

# How long a learner whose etcd runs may take to catch up with the leader and be promoted. A
# learner receives the leader's snapshot and then the log since; on this test bed that takes
# seconds, and a database of several GiB over a slow link minutes. One still a learner after
# this is replaced by a fresh one: the same member would only keep failing the same way.
LEARNER_CATCH_UP = 600


def learner_age(o: _Observed, name: str) -> float | None:
    """Seconds since a learner's claim was made (it is made just before `member add`)."""
    claim = o.live_claims.get(name) or {}
    return seconds_between(
        str((claim.get("metadata") or {}).get("creationTimestamp") or ""), o.observed_at
    )


def _learners_behind(o: _Observed, d: Decided) -> list[dict[str, str]]:
    """Learners still not voting LEARNER_CATCH_UP s after they were added, though their etcd
    runs: not one whose Pod cannot run (the spec or a node is at fault, said apart)."""
    out = []
    for m in o.members:
        n = m["name"]
        pod = o.pods.get(n)
        if not m.get("is_learner") or not n or pod is None or _deleting(pod):
            continue
        if n in d["stuck"] or unschedulable(pod) or container_trouble(pod):
            continue
        age = learner_age(o, n)
        if age is not None and age >= LEARNER_CATCH_UP:
            out.append(
                {
                    "name": n,
                    "reason": f"a learner for {int(age)} s that has not caught up with the "
                    f"leader (bound {LEARNER_CATCH_UP} s)",
                }
            )
    return out


def _free_names(cluster: str, used: set[str]) -> list[str]:
    return [f"{cluster}-{i}" for i in range(MAX_INDEX + 1) if f"{cluster}-{i}" not in used]


def scale_down_order(members: list[dict[str, Any]], leader_id: str) -> list[str]:
    """Learners first, then unhealthy members, then the highest index; the leader last."""

    def rank(m: dict[str, Any]) -> tuple[int, int, int, int]:
        return (
            0 if m.get("is_learner") else 1,
            1 if m.get("healthy") else 0,
            1 if m["id"] == leader_id else 0,
            -member_index(m["name"]),
        )

    return [m["name"] for m in sorted(members, key=rank)]


def _contradicted(o: _Observed) -> list[dict[str, str]]:
    """Members whose own answer contradicts what the members agree on: it answers for another
    cluster, as a member etcd does not list where its claim records another, or as the leader
    of a cluster of its own. Each with the reason and, when it is not fenced for it, why not
    (`unfenced`): only a trusted quorum's agreement (the views of a quorum of voting members
    agreeing on cluster ID and member list, under the recorded cluster ID, no foreign member)
    can contradict a member, and only an answer over TLS, checked against the cluster's CA,
    comes from one of its members: over plain HTTP anything that answers on a member's
    address (a reused Pod IP, a Pod of someone else's) could have said it."""
    cluster_id = str(o.info.get("cluster_id") or "")
    listed = {m["id"] for m in o.members}
    voters = {m["id"] for m in o.voters}
    found: dict[str, str] = {}
    verified: dict[str, bool] = {}
    for view in o.info.get("views") or []:
        endpoint = str(view.get("endpoint") or "")
        name = o.member_at(endpoint)
        if not name or name not in o.claims or not view.get("cluster_id"):
            continue
        recorded_member = annotations_of(o.claims.get(name)).get(ANN_MEMBER_ID)
        expected = o.recorded_id or cluster_id
        if expected and view["cluster_id"] != expected:
            found[name] = f"it answers for cluster {view['cluster_id']}, not {expected}"
        elif (
            recorded_member
            and view.get("member_id")
            and view["member_id"] != recorded_member
            # Another member of ours answering on this address is a mix-up of addresses,
            # not this member's doing.
            and view["member_id"] not in listed
        ):
            found[name] = (
                f"it answers as member {view['member_id']}, its claim records {recorded_member}"
            )
        elif (
            o.agreed["ok"]
            and view.get("linearizable")
            and len(set(view.get("member_ids") or []) & voters) < quorum_of(len(voters))
        ):
            # A linearizable answer goes through a leader: one whose list does not even hold a
            # quorum of the voters a quorum agrees on comes from a leader of its own, a fork
            # (same cluster ID when a seed re-bootstraps with its old flags). A view read while
            # a member was being added or removed differs by one member, never by that much.
            found[name] = (
                f"it leads a cluster of its own: it lists {len(view.get('member_ids') or [])} "
                f"members where a quorum lists {len(o.members)}"
            )
        else:
            continue
        verified[name] = url_key(endpoint).startswith("https://")
    out = []
    for name, why in sorted(found.items()):
        unfenced = ""
        if not o.trusted:
            unfenced = (
                "no trusted quorum contradicts it (a quorum agreeing on the member list, no "
                "foreign member), so nothing is fenced on its word"
            )
        elif not verified[name]:
            unfenced = (
                "its answer came over plain HTTP (spec.tls.enabled is false), which does not "
                "show who answered: check what answers at its address, and fence it by hand "
                f"(annotate its claim {ANN_FENCED}) if it is a fork"
            )
        out.append({"name": name, "reason": why, "unfenced": unfenced})
    return out


def _fence(o: _Observed) -> list[dict[str, str]]:
    """Members a trusted quorum contradicts, on an answer over TLS: fenced (docs/design-
    decisions.md, "Fencing needs a trusted quorum and an answer over TLS")."""
    return [
        {"name": c["name"], "reason": c["reason"]} for c in _contradicted(o) if not c["unfenced"]
    ]


def _suspects(o: _Observed) -> list[dict[str, str]]:
    """Members whose answers contradict the others, not fenced for it: said, never acted on."""
    return [c for c in _contradicted(o) if c["unfenced"]]


def _foreign_refusal(o: _Observed) -> dict[str, str] | None:
    """Members etcd lists whose peer URL is none of this EtcdCluster's: taken for none of ours,
    and nothing is changed or cleaned up while they are there."""
    if not o.foreign:
        return None
    domain = cluster_domain(o.options)
    ours = member_url(o.name, o.namespace, domain, o.spec["tls"], f"{o.name}-N", PEER_PORT)
    listed = ", ".join(
        f"member {m['id']} at {', '.join(m.get('peer_urls') or []) or 'no peer URL'}"
        for m in o.foreign
    )
    return _refusal(
        "ForeignMember",
        "",
        f"etcd lists {listed}: no member of EtcdCluster {o.namespace}/{o.name}, whose members' "
        f"peer URLs are {ours}. It may be a member of another namespace's cluster of the same "
        f"name, or the operator's cluster domain ({domain}) may not be the one the members "
        "were made with. Membership changes and cleanups wait; if it does not belong here, "
        "remove it by hand (etcdctl member remove <id>)",
    )


def _record(o: _Observed, fenced: set[str]) -> list[dict[str, str]]:
    """Healthy members whose claim does not yet record who they are (and so arm the guard)."""
    out = []
    for m in o.members:
        claim = o.live_claims.get(m["name"])
        if claim is None or not m.get("healthy") or m["name"] in fenced:
            continue
        voter = "false" if m.get("is_learner") else "true"
        version = labels_of(o.pods.get(m["name"])).get(LABEL_VERSION, "")
        ann = annotations_of(claim)
        if (
            ann.get(ANN_MEMBER_ID) != m["id"]
            or ann.get(ANN_CLUSTER_ID) != o.info["cluster_id"]
            or ann.get(ANN_INITIAL_STATE) != "existing"
            or labels_of(claim).get(LABEL_VOTER) != voter
            or (version and ann.get(ANN_VERSION) != version)
        ):
            out.append(
                {
                    "name": m["name"],
                    "member_id": m["id"],
                    "cluster_id": o.info["cluster_id"],
                    "voter": voter,
                    "version": version or ann.get(ANN_VERSION, ""),
                    "initial_cluster": f"{m['name']}={(m.get('peer_urls') or [''])[0]}",
                }
            )
    return out


# --- the steps of a plan: heal, fence, record, then membership (only on a trusted quorum) ---


def plan_lost_data(o: _Observed, d: Decided) -> Decided:
    """Members whose guard tripped: never healed (their Pod stays to say why), replaced."""
    return {
        "lost_data": sorted(
            n
            for n, p in o.pods.items()
            if not _deleting(p) and data_lost(p, o.live_claims.get(n)) and not o.healthy(n)
        )
    }


def _newest(o: _Observed, name: str) -> bool:
    """Whether member `name`'s Pod was made after every other member Pod."""
    made = pod_created(o.pods[name])
    return all(pod_created(p) < made for n, p in o.pods.items() if n != name)


def plan_ended(o: _Observed, d: Decided) -> Decided:
    """Pods that ended, and outdated Pods that cannot run (a roll to a Pod that cannot run,
    whose spec was then set back): re-making either costs no availability, and a roll would
    wait for them forever. Not while a roll is halted: the member would come back on the
    spec that cannot run. A member down on an outdated Pod that still runs is left to its
    kubelet: re-made now, it would be rolled without the roll's care; unless it is the
    newest Pod and never healthy within the roll's bound (a roll halted on a spec etcd
    starts under but cannot serve with, then set back)."""
    return {
        "ended": sorted(
            n
            for n in d["standing"]
            if _phase(o.pods[n]) in ("Failed", "Succeeded")
            or (
                n in d["outdated"]
                and not d["halted"]
                and not pod_ready(o.pods[n])
                and not o.healthy(n)
                and bool(
                    unschedulable(o.pods[n])
                    or container_trouble(o.pods[n])
                    or (_newest(o, n) and never_healthy(o, n, False))
                )
            )
        )
    }


def plan_heal(o: _Observed, d: Decided) -> Decided:
    """A live claim without a Pod gets its Pod back; never a member whose guard tripped nor a
    fenced or removed one (their claims are not live). A member lost with its node is healed
    only when moved, or (spec.nodeLossTimeout 0) to wait on its own volume for its node."""
    timeout = o.spec["node_loss_timeout"]
    return {
        "heal": sorted(
            n
            for n in o.live_claims
            if (n not in o.pods or n in d["ended"] or n in d["moved"])
            and n not in d["lost_data"]
            and n not in o.restoring
            and (n not in d["node_lost"] or n in d["moved"] or (timeout == 0 and n not in o.pods))
        )
    }


def plan_fence(o: _Observed, d: Decided) -> Decided:
    return {"fence": _fence(o), "suspects": _suspects(o)}


def plan_record(o: _Observed, d: Decided) -> Decided:
    """The cluster ID is recorded from the first look in which a quorum agrees on it, never
    from one member's word; once recorded, only members of that cluster are looked at."""
    if not (o.known and (o.recorded_id or o.agreed["ok"])):
        return {"record": []}
    untrusted = {f["name"] for f in d["fence"]} | {s["name"] for s in d["suspects"]}
    return {"record": _record(o, untrusted)}


def plan_foreign(o: _Observed, d: Decided) -> Decided:
    foreign = _foreign_refusal(o)
    return {"refusals": [foreign] if foreign else []}


def plan_relabel(o: _Observed, d: Decided) -> Decided:
    """Member Pods whose voting label is not what etcd says they are."""
    return {
        "relabel": [
            {"name": m["name"], "voter": "false" if m.get("is_learner") else "true"}
            for m in o.members
            if m["name"] in o.pods
            and not _deleting(o.pods[m["name"]])
            and labels_of(o.pods[m["name"]]).get(LABEL_VOTER)
            != ("false" if m.get("is_learner") else "true")
        ]
    }


def plan_withheld(o: _Observed, d: Decided) -> Decided:
    """Why membership changes and cleanups wait: only an agreeing quorum's word moves them."""
    if not o.known or o.trusted:
        return {"withheld": ""}
    quorum = o.quorum
    return {
        "withheld": "membership changes and cleanups wait: "
        + (
            f"the cluster has no quorum ({quorum.get('healthy_voters')} of "
            f"{quorum.get('voters')} voting members healthy, {quorum.get('needed')} needed)"
            if not quorum.get("ok")
            else o.agreed["why"]
            if not o.agreed["ok"]
            else f"etcd lists {len(o.foreign)} member(s) that are none of this cluster's"
        )
    }


def plan_stale(o: _Observed, d: Decided) -> Decided:
    """Pods and claims of members etcd no longer lists (cleaned up)."""
    if not o.trusted:
        return {"stale": []}
    return {
        "stale": sorted(
            n
            for n in set(o.pods) | set(o.claims)
            if n not in o.by_name
            and ANN_FENCED not in annotations_of(o.claims.get(n))
            and n not in o.restoring
        )
    }


def plan_replace(o: _Observed, d: Decided) -> Decided:
    """Members removed and made afresh on a new claim: their data is lost, they are fenced, or
    (one at a time, only when nothing else is replaced) their node is lost past
    spec.nodeLossTimeout and their volume can go nowhere else. Removing it first keeps quorum
    (it was not counted healthy)."""
    if not o.trusted:
        return {"replace": []}
    replace = [
        {
            "name": n,
            "reason": f"member {annotations_of(o.live_claims[n]).get(ANN_MEMBER_ID)} cannot "
            f"start on its data; etcd says: {data_fault(o.pods[n])}",
        }
        for n in d["lost_data"]
        if n in o.by_name
    ] + [
        {"name": f["name"], "reason": f"fenced: {f['reason']}"}
        for f in d["fence"]
        if f["name"] in o.by_name
    ]
    # One at a time, and only when nothing else is replaced: a learner left behind, or a
    # member lost with its node past its timeout.
    behind = _learners_behind(o, d)
    due = node_loss_due(o, d["node_lost"])
    if (behind or due) and not replace:
        replace.append((behind or due)[0])
    return {"replace": replace}


def plan_lost(o: _Observed, d: Decided) -> Decided:
    """Members etcd lists that have no live claim: removed from etcd."""
    if not o.trusted:
        return {"lost": []}
    replaced = {r["name"] for r in d["replace"]}
    return {
        "lost": sorted(
            m["name"] or m["id"]
            for m in o.members
            if m["name"] not in replaced
            and m["name"] not in o.live_claims
            and (m["name"] not in o.pods or ANN_REMOVING in annotations_of(o.claims.get(m["name"])))
        )
    }


def current_members(o: _Observed, d: Decided) -> list[dict[str, Any]]:
    """etcd's members that stay: neither replaced nor lost."""
    gone = {r["name"] for r in d["replace"]} | set(d["lost"])
    return [m for m in o.members if m["name"] not in gone]


def plan_scale(o: _Observed, d: Decided) -> Decided:
    """Members to add (free names, lowest first) or remove (`scale_down_order`), one change at
    a time by the runbook; nothing is added while anything but a version change is refused."""
    if not o.trusted:
        return {"add": [], "remove": []}
    current = current_members(o, d)
    size = o.spec["size"]
    blocking = [r for r in d["refusals"] if r["reason"] != "UnsafeVersionChange"]
    if size > len(current) and not blocking:
        used = set(o.by_name) | set(o.pods) | set(o.claims)
        return {"add": _free_names(o.name, used)[: size - len(current)], "remove": []}
    if size >= len(current):
        return {"add": [], "remove": []}
    if size == 1 and len([m for m in current if not m.get("is_learner")]) >= 2:
        refusal = _refusal(
            "UnsafeScaleDown",
            "spec.size",
            f"Refusing spec.size 1: going from {len(current)} members to 1 means "
            "removing a member from a two-member cluster, where one failure during "
            "the change loses quorum (etcd's rule); scale to 3 first, or use the "
            "member-replace playbook",
        )
        return {"add": [], "remove": [], "refusals": [refusal]}
    return {"add": [], "remove": scale_down_order(current, o.leader_id)[: len(current) - size]}


def plan_promote(o: _Observed, d: Decided) -> Decided:
    """Learners that run, are not being removed and were scheduled: made voters."""
    if not o.trusted:
        return {"promote": []}
    return {
        "promote": sorted(
            m["name"]
            for m in current_members(o, d)
            if m.get("is_learner")
            and m["name"] in o.pods
            and m["name"] not in d["remove"]
            and m["name"] not in d["stuck"]
        )
    }
