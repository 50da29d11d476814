"""The runbook's decisions (etcd_runbook/rules/etcd_plan.py), table-driven, no cluster needed.

Facts are built the way k8s_info and etcd_cluster_info return them; each case says what the
plan must (and must not) do with them, with the safety cases spelled out: quorum, learners,
the leader last, lost data, forks, one endpoint's word."""

from __future__ import annotations

import base64
import hashlib
from datetime import datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from etcd_runbook.clients.etcd_tls import cert_pem, create_ca
from etcd_runbook.names import (
    ANN_BOOTSTRAP_STARTED,
    ANN_CLUSTER_ID,
    ANN_HEALTHY_RUN,
    ANN_HEALTHY_SINCE,
    ANN_INITIAL_CLUSTER,
    ANN_INITIAL_STATE,
    ANN_MEMBER_ID,
    ANN_POD_HASH,
    ANN_REMOVING,
    ANN_RESTORE,
    ANN_RESTORE_PENDING,
    ANN_UPGRADE_WITHOUT_SNAPSHOT,
    ANN_VERSION,
    LABEL_BEFORE_UPGRADE,
    LABEL_MEMBER,
    LABEL_VERSION,
    LABEL_VOTER,
)
from etcd_runbook.rules import etcd_manifests as manifests
from etcd_runbook.rules import etcd_plan as ep
from etcd_runbook.rules.cluster.common import PlanError, parse_quantity
from etcd_runbook.rules.cluster.observed import (
    DATA_LOST_SIGNS,
    _Observed,
    agreement,
    recorded_cluster_id,
    run_state,
)
from etcd_runbook.rules.cluster.report import LAGGING_RECHECK, NODE_LOST_RECHECK
from etcd_runbook.rules.cluster.result import ACT_STEPS
from etcd_runbook.rules.cluster.roll import changed_fields
from etcd_runbook.rules.cluster.spec import (
    WAL_RESERVE,
    GiB,
    MiB,
    node_loss_seconds,
    normalize_spec,
    pod_hash,
    run_refusal,
    version_change_problem,
    version_problem,
)
from etcd_runbook.rules.cluster.tls import (
    TLS_KEYS,
    TLS_LEAVES,
    pem_fingerprints,
    tls_client,
    tls_material,
    tls_plan,
    tls_problems,
    tls_seen,
)
from etcd_runbook.rules.cluster.upgrade import before_upgrade_name
from etcd_runbook.rules.etcd_pods import healthy_run, unschedulable

CID = "c1d"
# When the kubelet says a member Pod's container started and turned Ready.
STARTED = "2026-11-25T09:00:00Z"
CREATED = "2026-11-25T08:59:58Z"
READY = "2026-11-25T09:00:02Z"
DOMAIN = "e.ns.svc.cluster.local"


def mid(n: int) -> str:
    return f"a{n}"


def obj(**spec: Any) -> dict[str, Any]:
    status = spec.pop("status", {"clusterID": CID})
    return {
        "metadata": {"name": "e", "namespace": "ns", "uid": "u-123456789"},
        "spec": {"size": 3, "version": "3.6.16", **spec},
        "status": status,
    }


def claim(n: int, joined: bool = True, version: str = "3.6.16", **ann: Any) -> dict[str, Any]:
    a = {
        ANN_INITIAL_CLUSTER: f"e-{n}=https://e-{n}.{DOMAIN}:2380",
        ANN_INITIAL_STATE: "existing" if joined else "new",
        ANN_VERSION: version,
        **ann,
    }
    if joined:
        a[ANN_MEMBER_ID] = mid(n)
        a[ANN_CLUSTER_ID] = CID
    return {
        "metadata": {
            "name": f"e-{n}-data",
            "labels": {LABEL_MEMBER: f"e-{n}", LABEL_VOTER: "true"},
            "annotations": a,
        },
        "spec": {"resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}},
    }


def pod(
    n: int,
    version: str = "3.6.16",
    phase: str = "Running",
    hash_: str | None = None,
    voter: str = "true",
    message: str = "",
    deleting: bool = False,
    ready: bool = True,
    restarts: int = 0,
) -> dict[str, Any]:
    spec = normalize_spec(obj(), {})
    meta: dict[str, Any] = {
        "name": f"e-{n}",
        "labels": {LABEL_MEMBER: f"e-{n}", LABEL_VERSION: version, LABEL_VOTER: voter},
        "annotations": {ANN_POD_HASH: hash_ or pod_hash(spec, version)},
        "creationTimestamp": CREATED,
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [
            {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": READY}
        ],
    }
    if phase == "Running":
        status["containerStatuses"] = [
            {"name": "etcd", "restartCount": restarts, "state": {"running": {"startedAt": STARTED}}}
        ]
    if message:
        status["containerStatuses"] = [
            {
                "name": "etcd",
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "message": message}},
            }
        ]
    return {"metadata": meta, "status": status}


def member(
    n: int, healthy: bool = True, learner: bool = False, started: bool = True
) -> dict[str, Any]:
    return {
        "id": mid(n),
        "name": f"e-{n}" if started else "",
        "peer_urls": [f"https://e-{n}.{DOMAIN}:2380"],
        "client_urls": [f"https://e-{n}.{DOMAIN}:2379"] if started else [],
        "is_learner": learner,
        "healthy": healthy,
    }


def view(n: int, ids: list[int], cluster: str = CID, linearizable: bool = True) -> dict[str, Any]:
    return {
        "endpoint": f"https://e-{n}.{DOMAIN}:2379",
        "member_id": mid(n),
        "cluster_id": cluster,
        "member_ids": sorted(mid(i) for i in ids),
        "linearizable": linearizable,
        "errors": [],
    }


def info(
    members: list[dict[str, Any]],
    leader: int | None = 0,
    views: list[dict[str, Any]] | None = None,
    alarms: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    voters = [m for m in members if not m["is_learner"]]
    healthy = [m for m in voters if m["healthy"]]
    ids = [int(m["id"][1:]) for m in members]
    return {
        "cluster_id": CID,
        "members": members,
        "leader": {"id": mid(leader)} if leader is not None else None,
        "quorum": {
            "voters": len(voters),
            "healthy_voters": len(healthy),
            "needed": len(voters) // 2 + 1,
            "ok": len(healthy) >= len(voters) // 2 + 1,
        },
        "status": [
            {"member_id": m["id"], "healthy": m["healthy"], "version": "3.6.16"}
            for m in members
            if m["healthy"]
        ],
        "views": views
        if views is not None
        else [view(i, ids) for i, m in zip(ids, members, strict=True) if m["healthy"]],
        "alarms": alarms or [],
    }


def healthy3(**spec: Any) -> dict[str, Any]:
    return {
        "object": obj(**spec),
        "pods": [pod(i) for i in range(3)],
        "claims": [claim(i) for i in range(3)],
        "info": info([member(i) for i in range(3)]),
    }


def actions(p: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "heal",
        "ended",
        "moved",
        "fence",
        "record",
        "replace",
        "stale",
        "lost",
        "promote",
        "add",
        "remove",
        "roll",
    )
    return {k: p[k] for k in keys if p[k]}


# --- quantities and the spec ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1Gi", 1024**3),
        ("512Mi", 512 * 1024**2),
        ("1.5Gi", int(1.5 * 1024**3)),
        ("2G", 2 * 10**9),
        ("100", 100),
        (7, 7),
    ],
)
def test_parse_quantity(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "1Gb", "-1", "Gi", True])
def test_parse_quantity_refuses(text):
    with pytest.raises(PlanError):
        parse_quantity(text)


@pytest.mark.parametrize(
    "volume, quota",
    [
        ("512Mi", 64 * MiB),  # the smallest volume allowed
        ("1Gi", 320 * MiB),
        ("4Gi", (4096 - 384) // 2 * MiB),
        ("100Gi", 8 * GiB),  # etcd's suggested maximum
    ],
)
def test_quota_follows_the_volume_with_room_for_wal_and_a_copy(volume, quota):
    spec = normalize_spec(obj(storage={"size": volume}), {})
    assert spec["quota_bytes"] == quota and not spec["problems"]
    # The database and a second copy of it plus the WAL reserve fit on the volume.
    assert 2 * quota + WAL_RESERVE <= parse_quantity(volume)


@pytest.mark.parametrize(
    "storage, field, words",
    [
        ({"size": "256Mi"}, "spec.storage.size", "below 512Mi"),
        (
            {"size": "1Gi", "quotaBackendBytes": "2Gi"},
            "spec.storage.quotaBackendBytes",
            "at most 320Mi",
        ),
        (
            {"size": "1Gi", "quotaBackendBytes": "1Mi"},
            "spec.storage.quotaBackendBytes",
            "at least 64Mi",
        ),
        (
            {"size": "1Gi", "quotaBackendBytes": "lots"},
            "spec.storage.quotaBackendBytes",
            "not a quantity",
        ),
    ],
)
def test_storage_problems_name_the_field(storage, field, words):
    (problem,) = normalize_spec(obj(storage=storage), {})["problems"]
    assert problem["field"] == field and words in problem["message"]


def test_a_quota_within_the_volume_is_taken():
    spec = normalize_spec(obj(storage={"size": "4Gi", "quotaBackendBytes": "1Gi"}), {})
    assert spec["quota_bytes"] == GiB and not spec["problems"]


@pytest.mark.parametrize(
    "version, words",
    [
        ("3.5.0", "data inconsistency"),
        ("3.5.2", "3.5.3 or newer"),
        ("3.7.0", "not 3.4.x"),
        ("3.5.3", ""),
    ],
)
def test_versions_that_may_never_run(version, words):
    problem = version_problem(version)
    assert (words in problem) if words else problem == ""


@pytest.mark.parametrize(
    "name, namespace, seen, kw, words",
    [
        ("e", "ns", "object", {}, ""),
        ("E", "ns", "object", {}, "lowercase letters"),
        ("e-", "ns", "object", {}, "lowercase letters"),
        ("x" * 51, "ns", "object", {}, "at most 50"),
        ("x" * 50, "ns", "object", {}, ""),
        ("e", "", "object", {}, "namespace its namespace"),
        ("e,x=y", "ns", "object", {}, "lowercase letters"),  # never reaches a label selector
        ("e", "ns", "missing", {}, "EtcdCluster ns/e does not exist"),
        ("e", "ns", "missing", {"allow_missing": True}, ""),  # the finalizer's run
        ("e", "ns", "paused", {}, ""),  # the operator's run: hands off, looks and reports
        ("e", "ns", "paused", {"by_hand": True}, "ignore_pause=true"),
        ("e", "ns", "paused", {"by_hand": True, "ignore_pause": True}, ""),
        ("e", "ns", "paused", {"by_hand": True, "read_only": True}, ""),
        ("e", "ns", "object", {"by_hand": True}, ""),
    ],
)
def test_run_refusal(name, namespace, seen, kw, words):
    found = {"object": obj(), "missing": {}, "paused": obj(paused=True)}[seen]
    refusal = run_refusal(found, name, namespace, **kw)
    assert (words in refusal) if words else refusal == ""


@pytest.mark.parametrize(
    "current, target, words",
    [
        ("3.5.35", "3.5.35", ""),
        ("3.5.20", "3.5.35", ""),
        ("3.5.35", "3.5.20", ""),  # patch downgrade within a minor
        ("3.4.31", "3.5.35", ""),
        ("3.5.35", "3.6.16", ""),
        ("3.5.25", "3.6.16", "3.5.26 or newer"),
        ("3.4.31", "3.6.16", "skips a minor"),
        ("3.6.16", "3.5.35", "downgrade across a minor"),
    ],
)
def test_version_changes(current, target, words):
    problem = version_change_problem(current, target, "3.5.26")
    assert (words in problem) if words else problem == ""


@pytest.mark.parametrize(
    "size, reason",
    [
        (1, None),
        (2, "TwoMemberCluster"),
        (3, None),
        (4, "EvenClusterSize"),
        (5, None),
        (9, "LargeClusterSize"),
    ],
)
def test_size_warnings(size, reason):
    warnings = normalize_spec(obj(size=size), {})["warnings"]
    assert [w["reason"] for w in warnings] == ([reason] if reason else [])


# --- healthy, heal, create -----------------------------------------------------------------


def test_a_healthy_cluster_has_nothing_to_do():
    p = ep.plan(healthy3())
    assert actions(p) == {} and p["refusals"] == [] and p["trusted"]
    assert p["pdb_min_available"] == 2 and p["cluster_id"] == CID
    assert p["steps"] is False  # act.yml is not even entered
    assert p["repair"] is False


@pytest.mark.parametrize("size", [4, 5])
def test_a_step_to_take_is_flagged_for_act(size):
    p = ep.plan(healthy3(size=size))
    assert p["steps"] is True and (p["add"] or p["remove"])
    assert set(ACT_STEPS) <= set(p)
    # A plain scale has nothing to repair first: repair.yml is skipped in one task.
    assert p["repair"] is False


def test_a_new_cluster_before_its_first_member():
    p = ep.plan({"object": obj(status={}), "pods": [], "claims": [], "info": {}})
    assert actions(p) == {} and not p["known"] and p["pdb_min_available"] == 2


@pytest.mark.parametrize(
    "pods, heal, ended",
    [
        ([pod(0), pod(1)], ["e-2"], []),
        ([pod(0), pod(1), pod(2, phase="Failed")], ["e-2"], ["e-2"]),
        ([pod(0), pod(1), pod(2, deleting=True)], [], []),  # waits for it to go first
        ([], ["e-0", "e-1", "e-2"], []),  # no member answers: every claim gets its Pod back
    ],
)
def test_heal_brings_back_members_from_their_claims(pods, heal, ended):
    facts = healthy3()
    facts["pods"] = pods
    if not pods:
        facts["info"] = {}
    p = ep.plan(facts)
    assert p["heal"] == heal and p["ended"] == ended


def test_a_member_down_on_an_outdated_pod_is_remade_at_once():
    """A roll to a Pod that cannot run (unschedulable, say), then the spec fixed: the member is
    down anyway, so its Pod is re-made now instead of waiting for a roll that waits for it."""
    facts = healthy3()
    facts["pods"][2] = _unschedulable(
        pod(2, phase="Pending", hash_="from-the-bad-spec", ready=False), NO_NODE
    )
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    p = ep.plan(facts)
    assert p["ended"] == ["e-2"] and p["heal"] == ["e-2"] and p["roll"] == []
    assert [r["reason"] for r in p["refusals"]] == ["MemberUnschedulable"], "not a halt"
    facts["pods"][2] = _unschedulable(pod(2, phase="Pending", ready=False), NO_NODE)
    assert ep.plan(facts)["ended"] == [], "the current Pod: said, not re-made"


def test_a_member_merely_down_on_an_outdated_pod_is_left_to_its_kubelet():
    """Not Ready for a moment (an election, a slow disk), its container running: re-made now,
    it would be rolled without waiting for the member rolled before it to prove itself."""
    facts = healthy3(repository="registry.local/etcd")
    facts["pods"][2] = pod(2, ready=False)
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    p = ep.plan(facts)
    assert p["ended"] == [] and p["heal"] == [] and p["roll"] == []
    assert [r["reason"] for r in p["refusals"]] == ["RollBlocked"]


def test_heal_does_not_wait_behind_a_refused_version_change():
    facts = healthy3(version="3.4.31")
    facts["pods"] = [pod(0), pod(1)]
    p = ep.plan(facts)
    assert p["heal"] == ["e-2"] and p["versions"]["e-2"] == "3.6.16", "healed on the version it ran"
    assert [r["reason"] for r in p["refusals"]] == ["UnsafeVersionChange"]
    assert p["roll"] == []


USER_TLS = {"enabled": True, "secrets": {"peer": "p", "server": "s", "client": "c"}}
GOOD_TLS = {"found": True, "type": "kubernetes.io/tls", "keys": list(TLS_KEYS)}


@pytest.mark.parametrize(
    "unseen, heal, fields",
    [
        # A Secret a member Pod mounts, gone or no longer labelled for the cluster: no Pod is
        # made with it, on any path; the refusal names the field.
        (["peer"], [], ["spec.tls.secrets.peer"]),
        (["server", "client"], [], ["spec.tls.secrets.server", "spec.tls.secrets.client"]),
        # The client Secret is the runbook's own, no Pod mounts it: the heal goes on.
        (["client"], ["e-2"], ["spec.tls.secrets.client"]),
        ([], ["e-2"], []),
    ],
)
def test_no_pod_is_made_with_a_user_secret_not_labelled_for_the_cluster(unseen, heal, fields):
    facts = healthy3(tls=USER_TLS)
    facts["pods"] = [pod(0), pod(1)]
    facts["tls"] = {p: {"found": False} if p in unseen else GOOD_TLS for p in TLS_LEAVES}
    p = ep.plan(facts)
    assert p["heal"] == heal
    assert [r["field"] for r in p["refusals"]] == fields
    assert sorted(p["tls_unmountable"]) == sorted(set(unseen) & {"peer", "server"})


# --- restore from a snapshot ---------------------------------------------------------------


def restoring(**spec: Any) -> dict[str, Any]:
    """An EtcdCluster whose first member EtcdRestore r1 writes (not created yet: no status)."""
    o = obj(status={}, **spec)
    o["metadata"]["annotations"] = {ANN_RESTORE: "r1"}
    return o


def pending(n: int) -> dict[str, Any]:
    """A claim the restore Job is still writing: no member ID yet."""
    return claim(n, joined=False, **{ANN_RESTORE_PENDING: "r1"})


ALL3 = ["e-0", "e-1", "e-2"]
BOOT3 = ",".join(f"e-{i}=https://e-{i}.{DOMAIN}:2380" for i in range(3))
SEED = f"e-0=https://e-0.{DOMAIN}:2380"


def boot(n: int, record: str = BOOT3) -> dict[str, Any]:
    """A claim made by an all-at-once bootstrap, its member not recorded yet."""
    return claim(n, joined=False, **{ANN_INITIAL_CLUSTER: record})


@pytest.mark.parametrize(
    "cluster, pods, claims, heal, ended, bootstrap",
    [
        (restoring(), [], [], [], [], []),  # never empty members: the first one is restored
        (restoring(), [], [pending(0)], [], [], []),  # no Pod on half a data dir
        (restoring(), [pod(0, phase="Failed")], [pending(0)], [], [], []),  # nor a second Pod
        (obj(status={}), [], [pending(0)], [], [], []),  # the claim alone is enough
        (restoring(), [], [claim(0, joined=False)], ["e-0"], [], []),  # released: it starts
        (obj(status={}), [], [], [], [], ALL3),  # an ordinary new cluster starts all at once
    ],
)
def test_a_restored_member_starts_only_once_its_data_is_written(
    cluster, pods, claims, heal, ended, bootstrap
):
    p = ep.plan({"object": cluster, "pods": pods, "claims": claims, "info": {}})
    assert (p["heal"], p["ended"], p["bootstrap"]) == (heal, ended, bootstrap)
    assert p["stale"] == [] and p["lost"] == [] and p["refusals"] == []


@pytest.mark.parametrize(
    ("size", "pods", "claims", "info", "bootstrap", "heal"),
    [
        # Nothing to lose: every member of the spec starts at once.
        (1, [], [], {}, ["e-0"], []),
        (3, [], [], {}, ALL3, []),
        (5, [], [], {}, [f"e-{i}" for i in range(5)], []),
        # An interrupted bootstrap is finished, never started again from nothing: the claims
        # say `new` with the whole --initial-cluster; a Pod is re-made from its claim, and a
        # member listed there without a claim gets one with that same record.
        (3, [], [boot(0)], {}, ["e-1", "e-2"], ["e-0"]),
        (3, [pod(0)], [boot(0), boot(1)], {}, ["e-2"], ["e-1"]),
        (3, [pod(0), pod(1), pod(2)], [boot(0), boot(1), boot(2)], {}, [], []),
        # The spec grew meanwhile: the bootstrap is finished as recorded; scaling comes after.
        (5, [], [boot(0), boot(1)], {}, ["e-2"], ["e-0", "e-1"]),
        # A claim that records a member, or says `existing`, or another --initial-cluster: the
        # cluster has been formed once, so nothing is made `new` again.
        (3, [], [boot(0), claim(1)], {}, [], ["e-0", "e-1"]),
        (
            3,
            [],
            [boot(0), claim(1, joined=False, **{ANN_INITIAL_STATE: "existing"})],
            {},
            [],
            ["e-0", "e-1"],
        ),
        (3, [], [boot(0), boot(1, "e-1=https://x:2380")], {}, [], ["e-0", "e-1"]),
        # The seed of the earlier seed-then-learners bootstrap: its record lists only itself.
        (3, [], [boot(0, SEED)], {}, [], ["e-0"]),
        # A Pod left without its claim (deleted by hand): nothing starts over it.
        (3, [pod(0)], [], {}, [], []),
        # etcd answers: not new, whatever Kubernetes shows.
        (3, [], [], info([member(0)]), [], []),
    ],
)
def test_only_a_cluster_with_nothing_to_lose_bootstraps_all_at_once(
    size, pods, claims, info, bootstrap, heal
):
    p = ep.plan({"object": obj(status={}, size=size), "pods": pods, "claims": claims, "info": info})
    assert p["bootstrap"] == bootstrap
    assert p["bootstrap_record"] == (BOOT3 if bootstrap and claims else "")
    assert p["heal"] == heal


def test_a_cluster_once_reported_is_never_bootstrapped_again():
    # Its status holds the cluster ID: it was Available once, so its members may hold data.
    p = ep.plan({"object": obj(), "pods": [], "claims": [boot(0)], "info": {}})
    assert p["bootstrap"] == [] and p["heal"] == ["e-0"]
    p = ep.plan({"object": obj(), "pods": [], "claims": [], "info": {}})
    assert p["bootstrap"] == []


def started(**spec: Any) -> dict[str, Any]:
    """A new cluster whose bootstrap the EtcdCluster records as started (its Pods were made)."""
    o = obj(status={}, **spec)
    o["metadata"]["annotations"] = {ANN_BOOTSTRAP_STARTED: BOOT3}
    return o


@pytest.mark.parametrize(
    ("pods", "claims", "missing", "heal"),
    [
        # A member's Pod and claim deleted while etcd cannot be reached from the operator: the
        # members may have formed a cluster, so it is never made `new` again.
        ([pod(0), pod(1)], [boot(0), boot(1)], "e-2", []),
        ([pod(0)], [boot(0), boot(1)], "e-2", ["e-1"]),  # heals go on regardless
        ([], [], "e-0, e-1, e-2", []),  # every claim gone: no empty cluster in its place
        # Every claim there: a Pod is re-made from its claim, as after any interruption.
        ([pod(0)], [boot(0), boot(1), boot(2)], "", ["e-1", "e-2"]),
    ],
)
def test_a_bootstrap_that_started_is_never_started_again(pods, claims, missing, heal):
    p = ep.plan({"object": started(), "pods": pods, "claims": claims, "info": {}})
    assert p["bootstrap"] == [] and p["heal"] == heal
    refused = [r for r in p["refusals"] if r["reason"] == "BootstrapNotRecorded"]
    assert [r["message"].split(" ha")[0] for r in refused] == ([missing] if missing else [])
    if missing:
        assert refused[0]["field"] == f"metadata.annotations[{ANN_BOOTSTRAP_STARTED}]"
        report = ep.report({"object": started(), "pods": pods, "claims": claims, "info": {}})
        assert cond(report, "Degraded") == ("True", "BootstrapNotRecorded")
        assert any(e["reason"] == "BootstrapNotRecorded" for e in report["events"])
    # Once etcd answers, the usual rules apply: the member without a claim is lost, replaced.
    members = [member(0), member(1), member(2, healthy=False)]
    answered = ep.plan({"object": started(), "pods": pods, "claims": claims, "info": info(members)})
    assert not [r for r in answered["refusals"] if r["reason"] == "BootstrapNotRecorded"]


def test_the_cluster_id_is_recorded_from_a_look_that_sees_an_agreeing_quorum():
    """The first answers of a new cluster: one member's word records nothing on any claim."""
    looked = info([member(i) for i in range(3)], views=[view(0, [0, 1, 2])])
    facts: dict[str, Any] = {
        "object": started(),
        "pods": [pod(i) for i in range(3)],
        "claims": [boot(i) for i in range(3)],
        "info": looked,
    }
    p = ep.plan(facts)
    assert p["record"] == [] and p["cluster_id"] == ""
    looked["views"].append(view(1, [0, 1, 2]))
    p = ep.plan(facts)
    assert [r["name"] for r in p["record"]] == ALL3 and p["cluster_id"] == CID


def test_a_bad_spec_bootstraps_nothing():
    p = ep.plan({"object": obj(status={}, size=0), "pods": [], "claims": [], "info": {}})
    assert p["bootstrap"] == [] and p["refusals"]


def test_a_claim_being_restored_is_not_stale_to_a_trusted_cluster():
    facts = healthy3()
    facts["claims"].append(pending(3))
    p = ep.plan(facts)
    assert p["trusted"] and actions(p) == {} and p["bootstrap"] == []
    facts["claims"][3] = claim(3, joined=False)  # the same claim, no restore behind it
    p = ep.plan(facts)
    assert p["stale"] == ["e-3"] and p["repair"] is True  # act.yml goes through repair.yml


@pytest.mark.parametrize("claims", [[], [pending(0)]])
def test_report_of_a_cluster_waiting_for_its_restore(claims):
    r = ep.report({"object": restoring(), "pods": [], "claims": claims, "info": {}})
    assert r["phase"] == "Creating" and not r["failed"]
    assert cond(r, "Available") == ("False", "Creating")
    assert cond(r, "Progressing") == ("True", "WaitingForRestore")
    assert "restored by EtcdRestore r1" in r["conditions"]["Progressing"]["message"]
    assert cond(r, "Degraded")[0] == "False"
    assert not [e for e in r["events"] if e["type"] == "Warning"]


def test_report_stops_waiting_for_the_restore_once_the_claim_is_released():
    facts = {"object": restoring(), "pods": [], "claims": [claim(0, joined=False)], "info": {}}
    assert cond(ep.report(facts), "Progressing")[1] != "WaitingForRestore"
    r = ep.report({"object": obj(status={}), "pods": [], "claims": [], "info": {}})
    assert cond(r, "Progressing") == ("True", "Creating")


# --- the data-loss guard, fencing and the member's record ----------------------------------


GUARD = (
    '{"level":"fatal","msg":"discovery failed","error":"cannot fetch cluster info from peer '
    'urls: could not retrieve cluster information from the given URLs"}'
)


def test_a_member_whose_data_is_gone_is_replaced_never_healed():
    facts = healthy3()
    facts["pods"] = [pod(0, message=GUARD), pod(1), pod(2)]
    facts["info"] = info([member(0, healthy=False), member(1), member(2)], leader=1)
    p = ep.plan(facts)
    assert p["lost_data"] == ["e-0"] and p["heal"] == []
    assert [r["name"] for r in p["replace"]] == ["e-0"] and "a0" in p["replace"][0]["reason"]
    assert p["add"] == ["e-3"], "a fresh member on a fresh claim, under a new name"
    assert p["stale"] == [] and p["lost"] == []


def test_an_old_failed_start_of_a_running_healthy_member_is_not_data_loss():
    """A learner's first start can race its peers' DNS records: the failure stays in the Pod's
    lastState after it recovered. Neither that nor a healthy member may ever be replaced."""
    facts = healthy3()
    running = pod(2, message=GUARD)
    running["status"]["containerStatuses"][0]["state"] = {"running": {}}
    facts["pods"] = [pod(0), pod(1), running]
    assert ep.plan(facts)["lost_data"] == []
    facts["pods"] = [pod(0), pod(1), pod(2, message=GUARD)]  # crash-looping, yet etcd says healthy
    assert ep.plan(facts)["lost_data"] == []


def test_the_guard_on_a_claim_that_never_joined_is_just_a_crash():
    facts = healthy3()
    facts["claims"][0] = claim(0, joined=False)
    facts["pods"] = [pod(0, message=GUARD), pod(1), pod(2)]
    p = ep.plan(facts)
    assert p["lost_data"] == [] and p["replace"] == []


def test_data_loss_without_quorum_is_only_reported():
    facts = healthy3()
    facts["pods"] = [pod(0, message=GUARD), pod(1), pod(2, phase="Pending")]
    facts["info"] = info(
        [member(0, healthy=False), member(1), member(2, healthy=False)], leader=None
    )
    p = ep.plan(facts)
    assert p["lost_data"] == ["e-0"] and actions(p) == {}
    assert "no quorum" in p["withheld"]


def test_joined_members_get_their_identity_recorded_on_their_claim():
    facts = healthy3()
    facts["claims"] = [claim(0, joined=False), claim(1), claim(2)]
    p = ep.plan(facts)
    assert p["repair"] is True and p["steps"] is True
    (rec,) = p["record"]
    assert rec == {
        "name": "e-0",
        "member_id": "a0",
        "cluster_id": CID,
        "voter": "true",
        "version": "3.6.16",
        "initial_cluster": f"e-0=https://e-0.{DOMAIN}:2380",
    }


def test_a_learner_is_recorded_as_not_voting_and_an_unhealthy_member_not_at_all():
    facts = healthy3(size=4)
    facts["claims"] = [claim(i, joined=False) for i in range(4)]
    facts["pods"] = [pod(i) for i in range(4)]
    facts["info"] = info([member(0), member(1), member(2, healthy=False), member(3, learner=True)])
    records = {r["name"]: r["voter"] for r in ep.plan(facts)["record"]}
    assert records == {"e-0": "true", "e-1": "true", "e-3": "false"}


def test_a_member_answering_for_another_cluster_is_fenced_and_replaced():
    facts = healthy3()
    facts["info"] = info(
        [member(0, healthy=False), member(1), member(2)],
        leader=1,
        views=[view(0, [0], cluster="f0e"), view(1, [0, 1, 2]), view(2, [0, 1, 2])],
    )
    p = ep.plan(facts)
    assert p["fence"] == [{"name": "e-0", "reason": f"it answers for cluster f0e, not {CID}"}]
    assert p["repair"] is True
    assert [r["name"] for r in p["replace"]] == ["e-0"] and p["add"] == ["e-3"]
    assert "e-0" not in {r["name"] for r in p["record"]}


def test_a_member_answering_as_another_member_than_its_claim_is_fenced():
    facts = healthy3()
    facts["info"]["views"][0]["member_id"] = "b0"
    assert ep.plan(facts)["fence"] == [
        {"name": "e-0", "reason": "it answers as member b0, its claim records a0"}
    ]


def test_a_fork_under_the_same_cluster_id_is_fenced():
    """A seed that re-bootstrapped with its old flags has the same cluster ID and member ID as
    before: it shows itself by leading a one-member cluster while a quorum lists three."""
    facts = healthy3()
    facts["info"] = info(
        [member(0, healthy=False), member(1), member(2)],
        leader=1,
        views=[view(0, [0]), view(1, [0, 1, 2]), view(2, [0, 1, 2])],
    )
    p = ep.plan(facts)
    assert [f["name"] for f in p["fence"]] == ["e-0"]
    assert "a cluster of its own" in p["fence"][0]["reason"]
    assert [r["name"] for r in p["replace"]] == ["e-0"]
    # A member answering from local state only (no leader) is not taken for a fork, nor one
    # whose list differs by a member being added.
    facts["info"]["views"][0]["linearizable"] = False
    assert ep.plan(facts)["fence"] == []
    facts["info"]["views"][0] = view(0, [0, 1, 2, 3])
    assert ep.plan(facts)["fence"] == []


def over_plain_http(facts: dict[str, Any]) -> dict[str, Any]:
    """The same cluster with spec.tls.enabled false: every URL plain HTTP."""
    facts["object"] = obj(tls={"enabled": False})
    plain = pod_hash(normalize_spec(facts["object"], {}), "3.6.16")
    facts["pods"] = [pod(i, hash_=plain) for i in range(len(facts["pods"]))]
    for m in facts["info"]["members"]:
        m["peer_urls"] = [u.replace("https://", "http://") for u in m["peer_urls"]]
        m["client_urls"] = [u.replace("https://", "http://") for u in m["client_urls"]]
    for v in facts["info"]["views"]:
        v["endpoint"] = v["endpoint"].replace("https://", "http://")
    for c in facts["claims"]:
        record = c["metadata"]["annotations"]
        record[ANN_INITIAL_CLUSTER] = record[ANN_INITIAL_CLUSTER].replace("https", "http")
    return facts


def stranger_on_e0(**views: Any) -> dict[str, Any]:
    facts = healthy3()
    facts["info"] = info(
        [member(0, healthy=False), member(1), member(2)],
        leader=1,
        views=[view(0, [0], cluster="f0e"), view(1, [0, 1, 2]), view(2, [0, 1, 2])],
    )
    return facts


@pytest.mark.parametrize(
    "case, fenced, suspects, why",
    [
        ("tls", ["e-0"], [], ""),
        ("plain", [], ["e-0"], "plain HTTP"),
        ("no quorum agrees", [], ["e-0"], "no trusted quorum contradicts it"),
        ("strangers on two addresses", [], ["e-0", "e-1"], "no trusted quorum contradicts it"),
        ("another member of ours on its address", [], [], ""),
    ],
)
def test_a_member_is_fenced_only_on_a_trusted_quorum_and_an_answer_over_tls(
    case, fenced, suspects, why
):
    """Whatever answers on a member's address over plain HTTP (a reused Pod IP, someone's Pod)
    may say anything: it is said, never acted on; nor is anything fenced that no agreeing
    quorum contradicts."""
    facts = stranger_on_e0()
    if case == "plain":
        facts = over_plain_http(facts)
    elif case == "no quorum agrees":
        facts["info"]["views"][2]["linearizable"] = False
    elif case == "strangers on two addresses":
        facts["info"]["views"][1] = view(1, [1], cluster="f0e")
    elif case == "another member of ours on its address":
        facts["info"]["views"][0] = {**view(2, [0, 1, 2]), "endpoint": view(0, [])["endpoint"]}
    p = ep.plan(facts)
    assert [f["name"] for f in p["fence"]] == fenced
    assert [s["name"] for s in p["suspects"]] == suspects
    assert all(why in s["unfenced"] for s in p["suspects"])
    if suspects:
        assert p["replace"] == [] and p["stale"] == [] and p["lost"] == []
        report = ep.report(facts)
        assert cond(report, "Degraded") == ("True", "MemberSuspect")
        assert any(e["reason"] == "MemberSuspect" for e in report["events"])


RAFT_PANIC = (
    "panic: tocommit(37) is out of range [lastIndex(4)]. Was the raft log corrupted, "
    "truncated, or lost?"
)


def test_a_member_that_panics_on_a_lost_raft_log_is_replaced():
    facts = healthy3()
    facts["pods"] = [pod(0, message=RAFT_PANIC), pod(1), pod(2)]
    facts["info"] = info([member(0, healthy=False), member(1), member(2)], leader=1)
    p = ep.plan(facts)
    assert p["lost_data"] == ["e-0"] and [r["name"] for r in p["replace"]] == ["e-0"]


def test_a_fork_that_answers_first_does_not_make_the_cluster():
    """etcd_cluster_info took the fork's word (cluster f0e): nothing is trusted, nothing is
    deleted, and nothing is fenced on a word no quorum confirms: the fork is said."""
    facts = healthy3()
    facts["info"] = {
        **info(
            [member(0)],
            leader=0,
            views=[view(0, [0], cluster="f0e"), view(1, [0, 1, 2]), view(2, [0, 1, 2])],
        ),
        "cluster_id": "f0e",
    }
    p = ep.plan(facts)
    assert not p["trusted"] and "not the recorded" in p["agreement"]["why"]
    assert p["stale"] == [] and p["remove"] == [] and p["lost"] == []
    assert p["fence"] == [] and [s["name"] for s in p["suspects"]] == ["e-0"]
    assert "no trusted quorum contradicts it" in p["suspects"][0]["unfenced"]


# --- agreement: never on one endpoint's word -----------------------------------------------


@pytest.mark.parametrize(
    "views, ok",
    [
        ([view(0, [0, 1, 2]), view(1, [0, 1, 2]), view(2, [0, 1, 2])], True),
        ([view(0, [0, 1, 2]), view(1, [0, 1, 2])], True),
        ([view(0, [0, 1, 2])], False),  # one member's word
        ([view(0, [0, 1, 2]), view(1, [0, 1, 2], linearizable=False)], False),  # local state only
        ([view(0, [0, 1, 2]), view(1, [0, 1])], False),  # lists differ
        (
            [view(0, [0, 1, 2], cluster="zz"), view(1, [0, 1, 2], cluster="zz")],
            False,
        ),  # other cluster
    ],
)
def test_agreement_needs_a_quorum_of_voters_confirming_the_list(views, ok):
    facts = healthy3()
    facts["info"] = info([member(i) for i in range(3)], views=views)
    assert agreement(facts["info"], CID)["ok"] is ok


def test_stale_pods_and_claims_go_only_when_an_agreeing_quorum_says_so():
    facts = healthy3()
    facts["claims"].append(claim(5))
    facts["pods"].append(pod(5))
    assert ep.plan(facts)["stale"] == ["e-5"]
    facts["info"]["views"] = facts["info"]["views"][:1]
    p = ep.plan(facts)
    assert p["stale"] == [] and "confirm the member list" in p["withheld"]


def test_the_recorded_cluster_id_comes_from_status_else_the_claims():
    assert recorded_cluster_id(obj(), []) == CID
    assert recorded_cluster_id(obj(status={}), [claim(0), claim(1)]) == CID
    assert recorded_cluster_id(obj(status={}), [claim(0, joined=False)]) == ""


def test_without_quorum_nothing_destructive_happens():
    facts = healthy3()
    facts["pods"] = [pod(0)]
    facts["claims"] = [claim(0)]  # two members lost with their claims
    facts["info"] = info(
        [member(0), member(1, healthy=False), member(2, healthy=False)], leader=None
    )
    p = ep.plan(facts)
    assert actions(p) == {} and not p["trusted"]
    assert "no quorum (1 of 3 voting members healthy, 2 needed)" in p["withheld"]


# --- membership ----------------------------------------------------------------------------


def test_scale_up_adds_the_lowest_free_names():
    p = ep.plan(healthy3(size=5))
    assert p["add"] == ["e-3", "e-4"]


def test_a_member_removed_by_someone_is_lost_and_replaced():
    facts = healthy3()
    facts["claims"] = facts["claims"][:2]
    facts["pods"] = facts["pods"][:2]
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    p = ep.plan(facts)
    assert p["lost"] == ["e-2"] and p["add"] == ["e-3"]


def test_a_removal_recorded_on_the_claim_is_finished():
    facts = healthy3(size=2)
    facts["claims"][2]["metadata"]["annotations"][ANN_REMOVING] = "scale-down"
    p = ep.plan(facts)
    assert p["lost"] == ["e-2"] and p["heal"] == [] and p["remove"] == []


@pytest.mark.parametrize(
    "members, leader, size, order",
    [
        ([member(0), member(1), member(2), member(3), member(4)], 4, 3, ["e-3", "e-2"]),
        (
            [member(0), member(1), member(2), member(3), member(4, learner=True)],
            0,
            3,
            ["e-4", "e-3"],
        ),
        ([member(0), member(1, healthy=False), member(2), member(3), member(4)], 0, 4, ["e-1"]),
        ([member(0), member(1), member(2)], 2, 1, None),  # never through a two-member cluster
    ],
)
def test_scale_down_order_learners_unhealthy_then_index_leader_last(members, leader, size, order):
    n = len(members)
    facts = {
        "object": obj(size=size),
        "pods": [pod(i, voter="false" if members[i]["is_learner"] else "true") for i in range(n)],
        "claims": [claim(i) for i in range(n)],
        "info": info(members, leader=leader),
    }
    p = ep.plan(facts)
    if order is None:
        assert p["remove"] == [] and [r["reason"] for r in p["refusals"]] == ["UnsafeScaleDown"]
    else:
        assert p["remove"] == order


def test_a_learner_left_behind_is_promoted_and_lowering_size_cancels_it():
    members = [member(0), member(1), member(2), member(3, learner=True, healthy=False)]
    facts = {
        "object": obj(size=4),
        "pods": [pod(i) for i in range(3)] + [pod(3, voter="false", phase="Pending")],
        "claims": [claim(i) for i in range(3)] + [claim(3, joined=False)],
        "info": info(members),
    }
    assert ep.plan(facts)["promote"] == ["e-3"]
    facts["object"] = obj(size=3)
    p = ep.plan(facts)
    assert p["remove"] == ["e-3"] and p["promote"] == []


def test_no_member_is_added_while_tls_material_is_invalid():
    secrets = {"peer": "p", "server": "s", "client": "c"}
    facts = healthy3(size=5, tls={"enabled": True, "secrets": secrets})
    good = {"found": True, "type": "kubernetes.io/tls", "keys": list(TLS_KEYS)}
    facts["tls"] = {"peer": good, "server": good, "client": {"found": False}}
    p = ep.plan(facts)
    assert p["add"] == [] and [r["field"] for r in p["refusals"]] == ["spec.tls.secrets.client"]
    assert "not labelled etcd.runbook.io/tls-for=e" in p["refusals"][0]["message"]
    facts["tls"]["client"] = good
    assert ep.plan(facts)["add"] == ["e-3", "e-4"]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_tls_summary_and_material_from_the_secrets_read():
    secrets = [
        {
            "metadata": {"name": "p"},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": b64("C"), "tls.key": b64("K"), "ca.crt": b64("A")},
        },
        {"metadata": {"name": "other"}, "type": "Opaque", "data": {"x": b64("y")}},
    ]
    cluster = obj(tls={"enabled": True, "secrets": {"peer": "p", "server": "s", "client": "c"}})
    seen = tls_seen(secrets, cluster)
    assert seen["peer"] == {
        "found": True,
        "type": "kubernetes.io/tls",
        "keys": ["ca.crt", "tls.crt", "tls.key"],
        "certs": {"tls.crt": [], "ca.crt": []},
    }
    assert seen["client"] == {
        "found": False,
        "type": "",
        "keys": [],
        "certs": {"tls.crt": [], "ca.crt": []},
    }
    material = tls_material(secrets, cluster)
    assert material == {"peer": {"tls.crt": "C", "tls.key": "K", "ca.crt": "A"}}


def test_certificates_are_told_apart_by_the_fingerprint_of_their_der():
    ca = create_ca("e CA", 1)
    other = create_ca("another CA", 1)
    bundle = cert_pem(ca.cert) + cert_pem(other.cert)
    der = ca.cert.public_bytes(serialization.Encoding.DER)
    assert pem_fingerprints(cert_pem(ca.cert)) == [hashlib.sha256(der).hexdigest()]
    assert len(pem_fingerprints(bundle)) == 2
    assert pem_fingerprints("not a certificate") == []
    secret = {
        "metadata": {"name": "e-peer-tls"},
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": b64(cert_pem(other.cert)), "ca.crt": b64(bundle), "tls.key": b64("K")},
    }
    seen = tls_seen([secret], obj())["peer"]
    assert seen["certs"]["ca.crt"] == pem_fingerprints(bundle)
    assert seen["certs"]["tls.crt"] == pem_fingerprints(cert_pem(other.cert))


@pytest.mark.parametrize(
    "seen, reason, words",
    [
        ({}, "TLSSecretMissing", "or is not labelled etcd.runbook.io/tls-for=e"),
        ({"found": True, "type": "Opaque"}, "TLSSecretInvalid", "not kubernetes.io/tls"),
        (
            {"found": True, "type": "kubernetes.io/tls", "keys": ["tls.crt"]},
            "TLSSecretInvalid",
            "lacks tls.key, ca.crt",
        ),
    ],
)
def test_tls_secrets_must_look_like_tls_material_for_this_cluster(seen, reason, words):
    spec = normalize_spec(
        obj(tls={"enabled": True, "secrets": {"peer": "p", "server": "s", "client": "c"}}), {}
    )
    problems = tls_problems({"peer": seen}, spec, "e")
    assert problems[0]["reason"] == reason and words in problems[0]["message"]


# --- the role's own TLS material: put back, never replaced, once the cluster has run -------

CA_FP, OTHER_FP = "c" * 64, "0" * 64
ALL = ["peer", "server", "client"]
OWN = {"ca": "e-ca", "peer": "e-peer-tls", "server": "e-server-tls", "client": "e-client-tls"}


def own_tls(ca: str = "whole", **leaves: str | None) -> dict[str, Any]:
    """tls_seen's summary of the role's Secrets. ca: `whole` (certificate and key), `cert`
    (put back without its key), `other` (another CA, with its key) or `gone`; each leaf
    (default: there, trusting the CA) gives the fingerprint its ca.crt holds, None when gone."""
    seen: dict[str, Any] = {}
    if ca != "gone":
        fp = OTHER_FP if ca == "other" else CA_FP
        keys = ["ca.crt", "tls.crt"] + ([] if ca == "cert" else ["tls.key"])
        seen["ca"] = {
            "found": True,
            "type": "Opaque",
            "keys": keys,
            "certs": {"tls.crt": [fp], "ca.crt": [fp]},
        }
    else:
        seen["ca"] = {"found": False}
    for purpose in TLS_LEAVES:
        trusted = leaves.get(purpose, CA_FP)
        seen[purpose] = (
            {"found": False}
            if trusted is None
            else {**GOOD_TLS, "certs": {"tls.crt": ["l" * 64], "ca.crt": [trusted]}}
        )
    return seen


def own_spec() -> dict[str, Any]:
    return normalize_spec(obj(), {})


@pytest.mark.parametrize(
    "seen, state, issue, new_ca, ca_from, write, reasons, unmountable",
    [
        # Nothing missing.
        (own_tls(), "running", [], False, "", [], [], []),
        # A cluster that never ran: a new CA and everything, or only what is missing.
        (own_tls("gone", peer=None, server=None, client=None), "new",
         ALL, True, "", ["ca", *ALL], [], []),
        (own_tls(server=None, client=None), "new",
         ["server", "client"], False, "", ["server", "client"], [], []),
        (own_tls("gone"), "new", ALL, True, "", ["ca", *ALL], [], []),
        # It has run, no member Pod and no Secret is left to hold its CA (re-created after a
        # deletion, which takes the Secrets along): a new CA harms no member.
        (own_tls("gone", peer=None, server=None, client=None), "stopped",
         ALL, True, "", ["ca", *ALL], [], []),
        # ... but with anything left, what is missing is put back or refused.
        (own_tls("gone", peer=None, client=None), "stopped", [], False, "server", ["ca"],
         ["TLSSecretLost", "TLSSecretLost", "TLSCAKeyLost"], ["peer"]),
        (own_tls(peer=None), "stopped", ["peer"], False, "", ["peer"], [], []),
        # It has run, the CA is at hand: a missing certificate is issued again from it.
        (own_tls(peer=None), "running", ["peer"], False, "", ["peer"], [], []),
        (own_tls(peer=None, server=None, client=None), "running",
         ALL, False, "", ALL, [], []),
        # The CA Secret gone: its certificate put back from what the members trust, the key
        # said lost, never a new CA.
        (own_tls("gone"), "running", [], False, "peer", ["ca"], ["TLSCAKeyLost"], []),
        (own_tls("gone", peer=None), "running", [], False, "server", ["ca"],
         ["TLSSecretLost", "TLSCAKeyLost"], ["peer"]),
        (own_tls("cert"), "running", [], False, "", [], ["TLSCAKeyLost"], []),
        (own_tls("cert", client=None), "running", [], False, "", [],
         ["TLSSecretLost", "TLSCAKeyLost"], []),
        # The certificates disagree on their CA: nothing to put back.
        (own_tls("gone", server=OTHER_FP), "running", [], False, "", [], ["TLSCAKeyLost"], []),
        # Everything gone while members run: refused by name, nothing made.
        (own_tls("gone", peer=None, server=None, client=None), "running", [], False, "", [],
         ["TLSSecretLost"] * 3 + ["TLSCAKeyLost"], ["peer", "server"]),
        # A CA Secret of another CA than the members trust: nothing issued from it.
        (own_tls("other"), "running", [], False, "", [], ["TLSCAMismatch"], []),
        (own_tls("other", server=None), "running", [], False, "", [],
         ["TLSSecretLost", "TLSCAMismatch"], ["server"]),
    ],
)  # fmt: skip
def test_own_tls_material_is_put_back_never_replaced_once_the_cluster_ran(
    seen, state, issue, new_ca, ca_from, write, reasons, unmountable
):
    t = tls_plan(seen, own_spec(), "e", state)
    assert (t["issue"], t["new_ca"], t["ca_from"], t["write"]) == (issue, new_ca, ca_from, write)
    assert [r["reason"] for r in t["refusals"]] == reasons
    assert sorted(t["unmountable"]) == unmountable
    assert {r["field"] for r in t["refusals"]} <= {"spec.tls"}
    # Every Secret written is announced, and only those.
    announced = " ".join(e["message"] for e in t["announce"])
    assert all(OWN[purpose] in announced or "Created" in announced for purpose in write)
    assert bool(t["announce"]) == bool(write)


def test_tls_refusals_name_the_secret_and_say_what_to_do():
    t = tls_plan(own_tls("gone", server=None), own_spec(), "e", "running")
    lost, key = t["refusals"]
    assert lost["message"].startswith("Secret e-server-tls is gone and cannot be issued again")
    assert "Secret e-ca, tls.key" in lost["message"] and "from a backup" in lost["message"]
    assert "not re-made until it is back" in lost["message"]
    assert key["message"].startswith("Secret e-ca: the cluster's CA private key (tls.key)")
    assert "put back from the ca.crt of Secret e-peer-tls" in key["message"]
    assert "No new CA is made" in key["message"]
    (event,) = t["announce"]
    assert event["type"] == "Warning" and event["reason"] == "TLSSecretRestored"
    assert "Secret e-ca was missing" in event["message"]
    t = tls_plan(own_tls(client=None), own_spec(), "e", "running")
    assert (
        "Secret e-client-tls was missing: issued again from the cluster's CA"
        in (t["announce"][0]["message"])
    )


def test_tls_not_looked_at_or_off_decides_nothing():
    assert tls_plan(None, own_spec(), "e", "running")["refusals"] == []
    off = normalize_spec(obj(tls={"enabled": False}), {})
    assert tls_plan(own_tls("gone", peer=None), off, "e", "running")["write"] == []


@pytest.mark.parametrize(
    "facts, state",
    [
        (healthy3(), "running"),
        ({"object": obj(status={})}, "new"),  # nothing yet
        ({"object": obj()}, "stopped"),  # a cluster ID was recorded
        ({"object": obj(status={}), "claims": [claim(0, joined=False)]}, "stopped"),
        ({"object": obj(status={}), "pods": [pod(0)]}, "running"),
        # A restore makes the first claim before any member or certificate exists.
        ({"object": restoring(), "claims": [pending(0)]}, "new"),
        ({"object": restoring(), "claims": [claim(0, joined=False)]}, "new"),
        ({"object": restoring(), "claims": [claim(0)], "pods": [pod(0)]}, "running"),
        # A member answers, without quorum.
        ({"object": obj(status={}), "info": {"views": [view(0, [0, 1, 2])]}}, "running"),
    ],
)
def test_how_far_the_tls_material_may_be_in_use(facts, state):
    assert run_state(_Observed(facts)) == state


def test_the_ca_secret_deleted_from_a_running_cluster_comes_back_as_it_was():
    facts = healthy3()
    facts["pods"] = [pod(0), pod(1)]
    facts["tls"] = own_tls("gone")
    p = ep.plan(facts)
    assert p["heal"] == ["e-2"], "healed with the certificates it had"
    assert (p["tls_missing"], p["tls_issue"], p["tls_new_ca"]) == (["ca"], [], False)
    assert p["tls_ca_from"] == "peer" and p["busy"]
    assert [r["reason"] for r in p["refusals"]] == ["TLSCAKeyLost"]
    report = ep.report(facts)
    assert report["conditions"]["Degraded"]["reason"] == "TLSCAKeyLost"
    assert report["conditions"]["Available"]["status"] == "True"
    assert [e["reason"] for e in report["events"]] == ["TLSCAKeyLost"]


def test_no_member_pod_is_made_while_a_secret_it_mounts_is_lost():
    # Its certificate cannot be issued again: no heal, no Pod made again, no new member, no
    # replacement, no roll; the Pods that run keep running.
    facts = healthy3(size=5)
    facts["pods"] = [pod(0), pod(1, hash_="older"), pod(2, phase="Failed")]
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    facts["tls"] = own_tls("cert", peer=None)
    p = ep.plan(facts)
    assert actions(p) == {}
    assert p["tls_unmountable"] == {"peer": "e-peer-tls"}
    assert p["refusals"][0]["reason"] == "TLSSecretLost"
    # With the CA at hand the same loss is issued again first, and nothing waits.
    facts["tls"] = own_tls(peer=None)
    p = ep.plan(facts)
    assert p["tls_issue"] == ["peer"] and p["tls_unmountable"] == {}
    assert p["heal"] == ["e-2"] and p["ended"] == ["e-2"]
    # Nor a roll, or a replacement of a member whose data is gone.
    facts = healthy3()
    facts["pods"] = [pod(0), pod(1), pod(2, hash_="older")]
    facts["pods"][:2] = [settled_on(facts, 0), settled_on(facts, 1)]
    facts["tls"] = own_tls("cert", server=None)
    assert ep.plan(facts)["roll"] == []
    facts["tls"] = own_tls("cert")
    assert ep.plan(facts)["roll"] == ["e-2"]
    facts = healthy3()
    facts["pods"] = [pod(0), pod(1), pod(2, phase="Failed", message=DATA_LOST_SIGNS[0])]
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    facts["tls"] = own_tls("cert")
    assert [r["name"] for r in ep.plan(facts)["replace"]] == ["e-2"]
    facts["tls"] = own_tls("cert", peer=None)
    assert ep.plan(facts)["replace"] == []


def test_a_new_cluster_starts_on_a_new_ca():
    facts = {"object": obj(status={}), "tls": own_tls("gone", peer=None, server=None, client=None)}
    p = ep.plan(facts)
    assert p["bootstrap"] == ["e-0", "e-1", "e-2"]
    assert p["tls_new_ca"] and p["tls_missing"] == ["ca", "peer", "server", "client"]
    assert p["refusals"] == []


def test_the_runbook_connects_with_what_the_secrets_still_hold():
    def secret(name: str, type_: str = "kubernetes.io/tls", **data: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "type": type_,
            "data": {k.replace("_", "."): b64(v) for k, v in data.items()},
        }

    ca = secret("e-ca", "Opaque", tls_crt="CA", tls_key="CAK", ca_crt="CA")
    peer = secret("e-peer-tls", tls_crt="P", tls_key="PK", ca_crt="CA")
    server = secret("e-server-tls", tls_crt="S", tls_key="SK", ca_crt="CA")
    client = secret("e-client-tls", tls_crt="C", tls_key="CK", ca_crt="CA")
    whole = {"ca": "CA", "cert": "C", "key": "CK"}
    assert tls_client([ca, peer, server, client], obj()) == whole
    assert tls_client([ca, peer, client], obj()) == whole
    # The client pair gone: the server's stands in, else the peer's; never the CA's own.
    assert tls_client([ca, peer, server], obj()) == {"ca": "CA", "cert": "S", "key": "SK"}
    assert tls_client([ca, peer], obj()) == {"ca": "CA", "cert": "P", "key": "PK"}
    assert tls_client([ca], obj()) == {}


# --- rolling -------------------------------------------------------------------------------


def minor_upgrade(*backups: dict[str, Any], annotation: str = "") -> dict[str, Any]:
    """A healthy 3.5 cluster whose spec asks for 3.6, with the EtcdBackups of its namespace."""
    facts = healthy3(version="3.6.16")
    if annotation:
        facts["object"]["metadata"]["annotations"] = {ANN_UPGRADE_WITHOUT_SNAPSHOT: annotation}
    facts["claims"] = [claim(i, version="3.5.35") for i in range(3)]
    facts["pods"] = [pod(i, version="3.5.35") for i in range(3)]
    facts["info"] = info([member(i) for i in range(3)], leader=0)
    facts["backups"] = list(backups)
    return facts


def etcd_backup(
    name: str, cluster: str = "e", before: str = "", phase: str = "", snapshot: bool = False
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase} if phase else {}
    if phase == "Failed":
        status["conditions"] = [{"type": "Degraded", "status": "True", "message": "S3AuthFailed"}]
    if snapshot:
        status["lastSnapshot"] = {"location": "s3://b/k.db", "sha256": "f" * 64, "revision": 9}
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {LABEL_BEFORE_UPGRADE: before} if before else {},
        },
        "spec": {
            "clusterName": cluster,
            "destination": {
                "s3": {
                    "endpoint": "http://s3:9000",
                    "bucket": "b",
                    "prefix": "p/",
                    "credentialsSecret": "c",
                }
            },
        },
        "status": status,
    }


def test_a_version_change_rolls_followers_first_and_the_leader_last():
    p = ep.plan(minor_upgrade(annotation="3.6.16"))
    assert p["roll"] == ["e-1"] and p["roll_first"], "one member a run"
    assert p["roll_pending"] == ["e-1", "e-2", "e-0"]
    assert p["refusals"] == []


@pytest.mark.parametrize(
    ("backups", "annotation", "refused", "waiting", "creates"),
    [
        # No EtcdBackup saves the cluster: refused, naming the field and the way out.
        ([], "", "UpgradeNeedsSnapshot", False, False),
        ([etcd_backup("other", cluster="x")], "", "UpgradeNeedsSnapshot", False, False),
        # Written down for another version: still refused.
        ([], "3.6.15", "UpgradeNeedsSnapshot", False, False),
        # The cluster's EtcdBackup: a one-off to its destination, and the roll waits.
        ([etcd_backup("nightly")], "", "", True, True),
        # Taken but not verified yet: the roll waits, nothing made twice.
        ([etcd_backup("nightly"), etcd_backup("e-before-3-6", before="3.6")], "", "", True, False),
        (
            [etcd_backup("e-before-3-6", before="3.6", phase="Running")],
            "",
            "",
            True,
            False,
        ),
        # It failed: refused, with the backup's words, until it is taken again or waived.
        (
            [etcd_backup("e-before-3-6", before="3.6", phase="Failed")],
            "",
            "UpgradeSnapshotFailed",
            False,
            False,
        ),
    ],
)
def test_a_minor_upgrade_waits_for_a_verified_snapshot(
    backups, annotation, refused, waiting, creates
):
    p = ep.plan(minor_upgrade(*backups, annotation=annotation))
    assert p["roll"] == []
    assert [r["reason"] for r in p["refusals"]] == ([refused] if refused else [])
    if refused:
        assert p["refusals"][0]["field"] == "spec.version"
        assert p["refusals"][0]["message"].startswith("spec.version 3.6.16: ")
        assert ANN_UPGRADE_WITHOUT_SNAPSHOT in p["refusals"][0]["message"]
    assert bool(p["upgrade_waiting"]) == waiting
    assert bool(p["upgrade_backup"]) == creates
    assert p["steps"] == creates
    report = ep.report(minor_upgrade(*backups, annotation=annotation))
    if waiting:
        progressing = report["conditions"]["Progressing"]
        assert (progressing["status"], progressing["reason"]) == ("True", "SnapshotBeforeUpgrade")
        assert report["conditions"]["Degraded"]["status"] == "False"


def test_the_snapshot_before_an_upgrade_goes_where_the_clusters_backups_go_but_apart():
    (made,) = ep.plan(minor_upgrade(etcd_backup("nightly")))["upgrade_backup"]
    assert made["metadata"]["name"] == "e-before-3-6"
    assert made["metadata"]["labels"][LABEL_BEFORE_UPGRADE] == "3.6"
    assert made["metadata"]["ownerReferences"][0]["kind"] == "EtcdCluster"
    # Its own prefix: the schedule's retention never prunes it. Once, no schedule.
    assert made["spec"]["destination"]["s3"]["prefix"] == "p/before-upgrade"
    assert made["spec"]["destination"]["s3"]["bucket"] == "b"
    assert set(made["spec"]) == {"clusterName", "destination"}


@pytest.mark.parametrize(
    ("path", "expected"), [("/nightly", "/nightly/before-upgrade"), (None, "/before-upgrade")]
)
def test_the_snapshot_before_an_upgrade_goes_onto_the_claim_of_a_volume_backup(path, expected):
    on_claim = etcd_backup("to-claim")
    volume = {"claimName": "backups", **({"path": path} if path else {})}
    on_claim["spec"]["destination"] = {"volume": volume}
    (made,) = ep.plan(minor_upgrade(on_claim))["upgrade_backup"]
    assert made["spec"]["destination"] == {"volume": {"claimName": "backups", "path": expected}}


@pytest.mark.parametrize("volume", [False, True])
def test_the_before_upgrade_backup_is_what_the_crd_accepts(volume):
    from tests import crd_schema as cs

    source = etcd_backup("nightly")
    source["spec"]["destination"] = (
        {"volume": {"claimName": "backups", "path": "/etcd"}}
        if volume
        else {"s3": {"endpoint": "http://s3:9000", "bucket": "etcd", "credentialsSecret": "c"}}
    )
    (made,) = ep.plan(minor_upgrade(source))["upgrade_backup"]
    schema = cs.schema_of(cs.load("etcdbackups"))["properties"]["spec"]
    assert cs.validate(schema, made["spec"]) == []


def test_the_roll_starts_once_the_snapshot_is_verified_and_status_says_where():
    backups = [etcd_backup("e-before-3-6", before="3.6", phase="Succeeded", snapshot=True)]
    p = ep.plan(minor_upgrade(*backups))
    assert p["roll"] == ["e-1"] and p["refusals"] == []
    assert p["upgrade_snapshot"]["location"] == "s3://b/k.db"
    status = ep.report(minor_upgrade(*backups))["status"]
    assert status["upgradeSnapshot"]["backup"] == "e-before-3-6"
    assert status["upgradeSnapshot"]["sha256"] == "f" * 64


@pytest.mark.parametrize(
    ("case", "before", "cluster", "phase", "roll", "refused", "words"),
    [
        # What the plan writes (label value: the target minor; for this cluster): used.
        ("labelled, verified", "3.6", "e", "Succeeded", True, "", ""),
        ("labelled, running", "3.6", "e", "Running", False, "", ""),
        # A person's object of that name: never read as the snapshot, and never waited on.
        ("unlabelled, verified", "", "e", "Succeeded", False, "UpgradeSnapshotNameTaken",
         f"lacks the label {LABEL_BEFORE_UPGRADE}=3.6"),
        ("unlabelled, failed", "", "e", "Failed", False, "UpgradeSnapshotNameTaken",
         "lacks the label"),
        ("labelled for another minor", "3.5", "e", "Succeeded", False,
         "UpgradeSnapshotNameTaken", f"labelled {LABEL_BEFORE_UPGRADE}=3.5, not 3.6"),
        # Labelled, but for another cluster: not this cluster's snapshot.
        ("labelled, another cluster", "3.6", "x", "Succeeded", False,
         "UpgradeSnapshotNameTaken", "spec.clusterName is 'x', not 'e'"),
    ],
)  # fmt: skip
def test_the_gate_reads_only_the_before_upgrade_backup_the_plan_makes(
    case, before, cluster, phase, roll, refused, words
):
    taken = etcd_backup(
        "e-before-3-6", cluster=cluster, before=before, phase=phase, snapshot=phase == "Succeeded"
    )
    p = ep.plan(minor_upgrade(etcd_backup("nightly"), taken))
    assert bool(p["roll"]) == roll, case
    assert bool(p["upgrade_snapshot"]) == roll, case
    assert [r["reason"] for r in p["refusals"]] == ([refused] if refused else []), case
    # Never made again under a name that is taken, nor waited on.
    assert p["upgrade_backup"] == [], case
    if refused:
        assert not p["upgrade_waiting"], case
        message = p["refusals"][0]["message"]
        assert message.startswith("spec.version 3.6.16: not upgrading: EtcdBackup e-before-3-6 ")
        assert words in message, case
        assert "Delete or rename EtcdBackup e-before-3-6" in message, case
        assert p["refusals"][0]["field"] == "spec.version"


def test_an_unlabelled_backup_of_that_name_being_deleted_is_not_in_the_way():
    taken = etcd_backup("e-before-3-6")
    taken["metadata"]["deletionTimestamp"] = "2026-11-24T03:00:00Z"
    p = ep.plan(minor_upgrade(etcd_backup("nightly"), taken))
    assert p["refusals"] == [] and p["upgrade_waiting"]


def test_a_waiver_for_this_version_rolls_without_a_snapshot():
    p = ep.plan(minor_upgrade(annotation="3.6.16"))
    assert p["roll"] and not p["upgrade_backup"] and not p["upgrade_waiting"]


# Each state of the gate a minor upgrade passes (3.5.35 -> 3.6.16): the EtcdBackups of the
# namespace, the waiver annotation, and the version a Pod made meanwhile must run.
GATE_STATES = {
    "no destination": ([], "", "3.5.35"),
    "another cluster's backup": ([etcd_backup("other", cluster="x")], "", "3.5.35"),
    "snapshot asked for": ([etcd_backup("nightly")], "", "3.5.35"),
    "snapshot running": (
        [etcd_backup("nightly"), etcd_backup("e-before-3-6", before="3.6", phase="Running")],
        "",
        "3.5.35",
    ),
    "snapshot failed": (
        [etcd_backup("e-before-3-6", before="3.6", phase="Failed")],
        "",
        "3.5.35",
    ),
    "name taken": ([etcd_backup("nightly"), etcd_backup("e-before-3-6")], "", "3.5.35"),
    "waived for another version": ([], "3.6.15", "3.5.35"),
    "snapshot verified": (
        [etcd_backup("e-before-3-6", before="3.6", phase="Succeeded", snapshot=True)],
        "",
        "3.6.16",
    ),
    "waived": ([], "3.6.16", "3.6.16"),
}


def _made_on(p: dict[str, Any], name: str, claim_: dict[str, Any]) -> str:
    """The version the Pod the runbook makes for `name` runs, by its image."""
    pod_ = manifests.member_pod(p, name, claim_)
    image = pod_["spec"]["containers"][0]["image"]
    assert pod_["metadata"]["annotations"][ANN_POD_HASH] == pod_hash(p["spec"], p["versions"][name])
    return image.rsplit(":v", 1)[1]


@pytest.mark.parametrize("state", GATE_STATES)
def test_a_pod_made_while_a_minor_upgrade_may_not_start_keeps_the_version(state):
    """Heals, learners and replacements while the upgrade waits for its snapshot (or is
    refused) run the version their member ran (a new member: the lowest running); once the
    snapshot is verified or waived, the new one."""
    backups, waiver, expected = GATE_STATES[state]

    # A member Pod deleted: back on its claim.
    facts = minor_upgrade(*backups, annotation=waiver)
    del facts["pods"][2]
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    p = ep.plan(facts)
    assert p["heal"] == ["e-2"], state
    assert _made_on(p, "e-2", facts["claims"][2]) == expected, state

    # A learner for a larger size: added (an upgrade waiting holds the version, not the
    # members), on the lowest version running.
    facts = minor_upgrade(*backups, annotation=waiver)
    facts["object"]["spec"]["size"] = 4
    p = ep.plan(facts)
    assert p["add"] == ["e-3"], (state, p["refusals"])
    new_claim = manifests.member_claim(p, "e-3", "", "existing")
    assert new_claim["metadata"]["annotations"][ANN_VERSION] == expected, state
    assert _made_on(p, "e-3", new_claim) == expected, state

    # A member lost with its node: replaced (removed first)...
    facts = minor_upgrade(*backups, annotation=waiver)
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    _on_nodes(facts, {"node0": _node(), "node1": _node(), "node2": _node(found=False)})
    assert [r["name"] for r in ep.plan(facts)["replace"]] == ["e-2"], state
    # ...then a fresh member joins on a new claim, on the version the others run.
    facts = minor_upgrade(*backups, annotation=waiver)
    del facts["pods"][2], facts["claims"][2]
    facts["info"] = info([member(0), member(1)])
    p = ep.plan(facts)
    assert p["add"] == ["e-2"], state
    fresh = manifests.member_claim(p, "e-2", "", "existing")
    assert _made_on(p, "e-2", fresh) == expected, state


def test_a_member_keeps_the_newer_version_it_already_runs_while_the_upgrade_waits():
    facts = minor_upgrade()
    facts["claims"][1] = claim(1, version="3.6.16")
    facts["pods"][1] = pod(1, version="3.6.16")
    del facts["pods"][2]
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    p = ep.plan(facts)
    assert [r["reason"] for r in p["refusals"]] == ["UpgradeNeedsSnapshot"]
    assert p["versions"]["e-1"] == "3.6.16" and p["versions"]["e-2"] == "3.5.35"
    assert p["versions"]["e-5"] == "3.5.35", "a new member: the lowest version running"


def test_a_patch_change_needs_no_snapshot_and_heals_on_the_new_patch():
    facts = healthy3()
    facts["claims"] = [claim(i, version="3.6.15") for i in range(3)]
    facts["pods"] = [pod(i, version="3.6.15") for i in range(2)]
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    p = ep.plan(facts)
    assert [r["reason"] for r in p["refusals"]] == ["RollBlocked"], "no snapshot asked for"
    assert not p["upgrade_waiting"] and not p["upgrade_backup"]
    assert p["heal"] == ["e-2"] and p["versions"]["e-2"] == "3.6.16"


def test_another_change_rolls_on_the_old_version_while_the_upgrade_waits():
    facts = minor_upgrade(etcd_backup("nightly"))
    facts["object"]["spec"]["pod"] = {"resources": {"limits": {"memory": "1Gi"}}}
    p = ep.plan(facts)
    assert p["upgrade_waiting"] and p["roll"][:1] == ["e-1"]
    assert p["versions"]["e-1"] == "3.5.35"
    assert p["pod_hashes"]["e-1"] == pod_hash(p["spec"], "3.5.35")


def test_a_waiting_upgrade_reports_upgrading_a_refused_one_degraded():
    waiting = ep.report(minor_upgrade(etcd_backup("nightly")))
    assert waiting["phase"] == "Upgrading"
    assert waiting["conditions"]["Progressing"]["reason"] == "SnapshotBeforeUpgrade"
    refused = ep.report(minor_upgrade())
    assert refused["phase"] == "Degraded"
    assert refused["conditions"]["Degraded"]["reason"] == "UpgradeNeedsSnapshot"


@pytest.mark.parametrize("cluster", ["e", "a" * 44, "b" * 50])
def test_the_before_upgrade_backup_name_leaves_room_for_its_jobs(cluster):
    name = before_upgrade_name(cluster, "3.6")
    assert len(name) <= 52 and name.endswith("-before-3-6")
    assert name != before_upgrade_name(cluster[:-1] + "z", "3.6")


@pytest.mark.parametrize(
    "change",
    [
        {"repository": "registry.local/etcd"},
        {"pod": {"resources": {"limits": {"memory": "1Gi"}}}},
        {"pod": {"labels": {"team": "a"}}},
        {"pod": {"annotations": {"x": "y"}}},
        {"pod": {"tolerations": [{"key": "k", "operator": "Exists"}]}},
        {"pod": {"affinity": {"nodeAffinity": {}}}},
        {"storage": {"size": "2Gi"}},
    ],
)
def test_pod_changes_roll_the_members(change):
    facts = healthy3(**change)
    if "storage" in change:
        for c in facts["claims"]:
            c["status"]["capacity"]["storage"] = "2Gi"
    assert ep.plan(facts)["roll_pending"] == ["e-1", "e-2", "e-0"]
    assert ep.plan(facts)["roll"] == ["e-1"]


def test_a_volume_grows_first_and_the_quota_follows_its_real_capacity():
    facts = healthy3(storage={"size": "2Gi"})
    p = ep.plan(facts)
    assert p["grow"] == ["e-0-data", "e-1-data", "e-2-data"]
    assert p["spec"]["quota_bytes"] == 320 * MiB and p["roll"] == [], "not before the disk grew"


def test_no_roll_while_a_member_is_unhealthy():
    facts = healthy3(repository="registry.local/etcd")
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    p = ep.plan(facts)
    assert p["roll"] == [] and [r["reason"] for r in p["refusals"]] == ["RollBlocked"]


# --- one member at a time, each settled before the next ----------------------------------

ROLL_NOW = "2026-11-25T10:00:00Z"
NO_NODE = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."


def made_from(spec: dict[str, Any], n: int, version: str = "3.6.16") -> dict[str, Any]:
    """Member e-<n>'s Pod as the runbook makes it from `spec` (keys of EtcdCluster.spec), its
    container running since STARTED and Ready since READY."""
    facts = healthy3(**spec)
    facts["claims"] = [claim(i, version=version) for i in range(3)]
    p = ep.plan(facts)
    made = manifests.member_pod(p, f"e-{n}", facts["claims"][n])
    running = pod(n, version=version)
    made["status"] = running["status"]
    made["metadata"]["creationTimestamp"] = CREATED
    return made


def on_new_pod(
    facts: dict[str, Any], n: int, healthy_for: float | None = None, **status: Any
) -> dict[str, Any]:
    """e-<n> on the Pod the spec of `facts` makes, marked healthy `healthy_for` seconds before
    ROLL_NOW (None: not marked), with `status` merged into its etcd container's status."""
    facts["observed_at"] = ROLL_NOW
    made = made_from(facts["object"]["spec"], n)
    made["metadata"]["creationTimestamp"] = "2026-11-25T09:58:00Z"  # by the roll
    container = made["status"]["containerStatuses"][0]
    container.update(status)
    if "running" not in container["state"]:
        made["status"]["conditions"][0]["status"] = "False"
    if healthy_for is not None:
        since = datetime.fromisoformat(ROLL_NOW.replace("Z", "+00:00")) - timedelta(
            seconds=healthy_for
        )
        made["metadata"]["annotations"][ANN_HEALTHY_SINCE] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
        made["metadata"]["annotations"][ANN_HEALTHY_RUN] = f"{STARTED}/{READY}"
    return made


def settled_on(facts: dict[str, Any], n: int) -> dict[str, Any]:
    return on_new_pod(facts, n, healthy_for=300)


def resources_roll() -> dict[str, Any]:
    """A healthy cluster of old Pods asked for a memory limit; e-0 leads."""
    facts = healthy3(pod={"resources": {"limits": {"memory": "1Gi"}}})
    facts["pods"] = [made_from({}, i) for i in range(3)]
    return facts


@pytest.mark.parametrize(
    ("case", "healthy_for", "status", "etcd_healthy", "roll", "settling", "marks"),
    [
        # Just came up, not yet marked: marked now, the roll waits the whole period.
        ("unmarked", None, {}, True, [], {"e-1": 0.0}, ["e-1"]),
        ("healthy 10 s", 10, {}, True, [], {"e-1": 10.0}, []),
        ("healthy 29 s", 29, {}, True, [], {"e-1": 29.0}, []),
        ("healthy 30 s", 30, {}, True, ["e-2"], {}, []),
        # Ready, but etcd does not count it healthy: not yet, and not marked.
        ("etcd says not yet", None, {}, False, [], {"e-1": None}, []),
        ("etcd says no more", 60, {}, False, [], {"e-1": None}, []),
        # Its container started again since it was marked (a restart: counted below) or it
        # turned Ready again: another run of it, marked anew.
        (
            "Ready again",
            60,
            {"state": {"running": {"startedAt": "2026-11-25T09:59:50Z"}}},
            True,
            [],
            {"e-1": 0.0},
            ["e-1"],
        ),
    ],
)
def test_a_rolled_member_must_stay_healthy_before_the_next_goes(
    case, healthy_for, status, etcd_healthy, roll, settling, marks
):
    facts = resources_roll()
    facts["pods"][1] = on_new_pod(facts, 1, healthy_for=healthy_for, **status)
    facts["info"] = info([member(0), member(1, healthy=etcd_healthy), member(2)])
    p = ep.plan(facts)
    assert p["roll"] == roll, case
    assert p["settling"] == settling, case
    assert [m["name"] for m in p["settle_marks"]] == marks, case
    assert p["refusals"] == [], case
    assert p["halted"] == {} and p["ended"] == [] and p["heal"] == [], case
    if marks:
        assert p["settle_marks"][0]["since"] == ROLL_NOW
        assert p["settle_marks"][0]["run"] == healthy_run(facts["pods"][1])
    report = ep.report(facts)
    progressing = report["conditions"]["Progressing"]
    assert progressing["status"] == "True" and report["phase"] == "Upgrading", case
    if settling.get("e-1") is not None:
        # No event marks the end of the period: the run asks to look again then.
        assert report["requeue_after"] == 30 - settling["e-1"] + 1, case
        assert "spec.minReadySeconds" in progressing["message"], case


def test_the_period_is_the_spec_s():
    facts = resources_roll()
    facts["object"]["spec"]["minReadySeconds"] = 5
    facts["pods"][1] = on_new_pod(facts, 1, healthy_for=5)
    assert ep.plan(facts)["roll"] == ["e-2"]
    facts["object"]["spec"]["minReadySeconds"] = 0
    facts["pods"][1] = on_new_pod(facts, 1)
    p = ep.plan(facts)
    assert p["roll"] == ["e-2"] and p["settle_marks"] == [], "0: healthy now is enough"


@pytest.mark.parametrize(
    ("spec", "status", "scheduler", "reason", "fields", "words"),
    [
        # An image that does not exist, by its tag or its repository.
        (
            {"version": "3.6.17"},
            {"state": {"waiting": {"reason": "ErrImagePull", "message": "not found"}}},
            "",
            "ErrImagePull",
            ["spec.version"],
            "its image gcr.io/etcd-development/etcd:v3.6.17 cannot be pulled",
        ),
        (
            {"repository": "registry.local/etcd"},
            {"state": {"waiting": {"reason": "ImagePullBackOff"}}},
            "",
            "ImagePullBackOff",
            ["spec.repository"],
            "registry.local/etcd:v3.6.16 cannot be pulled (ImagePullBackOff)",
        ),
        # A node selector no node has.
        (
            {"pod": {"nodeSelector": {"disk": "ssd"}}},
            {},
            NO_NODE,
            "Unschedulable",
            ["spec.pod.nodeSelector"],
            "no node takes it (0/1 nodes are available",
        ),
        # Too little memory: killed, then waiting to start again...
        (
            {"pod": {"resources": {"limits": {"memory": "16Mi"}}}},
            {
                "restartCount": 2,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
            },
            "",
            "CrashLoopBackOff",
            ["spec.pod.resources"],
            "etcd was killed for want of memory (OOMKilled, 2 restarts)",
        ),
        # ...or just restarted, running again (and even answering) for a moment.
        (
            {"pod": {"resources": {"limits": {"memory": "16Mi"}}}},
            {
                "restartCount": 1,
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
            },
            "",
            "OOMKilled",
            ["spec.pod.resources"],
            "killed for want of memory (OOMKilled, 1 restart)",
        ),
        # etcd refuses what it is given, and says why in its last words.
        (
            {"storage": {"size": "1Gi", "quotaBackendBytes": "100Mi"}},
            {
                "state": {
                    "terminated": {
                        "reason": "Error",
                        "exitCode": 1,
                        "message": 'starting\n{"msg":"bad flag"}\n',
                    }
                }
            },
            "",
            "Error",
            ["spec.storage"],
            'etcd exited (Error, exit code 1): {"msg":"bad flag"}',
        ),
    ],
)
def test_a_rolled_member_that_cannot_run_halts_the_roll_naming_the_field(
    spec, status, scheduler, reason, fields, words
):
    facts = healthy3(**spec)
    facts["pods"] = [made_from({}, i) for i in range(3)]
    facts["pods"][1] = on_new_pod(facts, 1, **status)
    if scheduler:
        facts["pods"][1] = _unschedulable(facts["pods"][1], scheduler)
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    p = ep.plan(facts)
    # Stopped at its first member; the others are not touched, now or while it stays so.
    assert p["roll"] == [] and p["ended"] == [] and p["heal"] == []
    assert list(p["halted"]) == ["e-1"] and p["halted"]["e-1"]["reason"] == reason
    (refusal,) = p["refusals"]
    assert refusal["reason"] == "RollHalted" and refusal["field"] == ", ".join(fields)
    assert words in refusal["message"], refusal["message"]
    assert f"Changed: {', '.join(fields)}." in refusal["message"]
    assert "(e-0, e-2 keep running as they are)" in refusal["message"]
    report = ep.report(facts)
    assert report["phase"] == "Degraded"
    assert report["conditions"]["Degraded"]["reason"] == "RollHalted"
    assert report["conditions"]["Progressing"]["reason"] == "RollHalted"
    assert {"type": "Warning", "reason": "RollHalted", "message": refusal["message"]} in report[
        "events"
    ]
    # Another old member going down meanwhile is not re-made on the spec that cannot run.
    facts["pods"][2]["status"]["containerStatuses"][0]["state"] = {
        "waiting": {"reason": "CrashLoopBackOff"}
    }
    facts["pods"][2]["status"]["conditions"][0]["status"] = "False"
    facts["info"] = info([member(0), member(1, healthy=False), member(2, healthy=False)])
    assert ep.plan(facts)["ended"] == []

    # The spec set back: the halted member is made again from it at once, on its claim.
    facts = healthy3()
    facts["pods"] = [made_from({}, i) for i in range(3)]
    facts["pods"][1] = on_new_pod(healthy3(**spec), 1, **status)
    if scheduler:
        facts["pods"][1] = _unschedulable(facts["pods"][1], scheduler)
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    p = ep.plan(facts)
    if healthy_run(facts["pods"][1]):
        # Up for a moment between two deaths: left alone, and re-made once it is down again.
        assert p["ended"] == [] and p["roll"] == [] and "RollHalted" not in str(p["refusals"])
        return
    assert p["ended"] == ["e-1"] and p["heal"] == ["e-1"], reason
    assert [r["reason"] for r in p["refusals"]] == (["MemberUnschedulable"] if scheduler else [])
    assert p["pod_hashes"]["e-1"] == facts["pods"][0]["metadata"]["annotations"][ANN_POD_HASH]


def test_setting_the_spec_back_is_not_held_by_the_other_members_own_past():
    """Set back, the members the roll never touched are on the spec again, made long before
    the halted member's Pod: a restart of theirs last week, or one crash-looping now, is
    theirs, not the roll's, and the halted member is made again all the same."""
    broken = {"pod": {"resources": {"limits": {"memory": "16Mi"}}}}
    facts = healthy3()
    facts["pods"] = [made_from({}, i) for i in range(3)]
    facts["pods"][0]["status"]["containerStatuses"][0]["restartCount"] = 3
    facts["pods"][0]["status"]["containerStatuses"][0]["lastState"] = {
        "terminated": {"reason": "Error", "exitCode": 1}
    }
    facts["pods"][1] = on_new_pod(
        healthy3(**broken), 1, state={"waiting": {"reason": "CrashLoopBackOff"}}, restartCount=2
    )
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    p = ep.plan(facts)
    assert p["halted"] == {} and p["refusals"] == []
    assert p["ended"] == ["e-1"] and p["heal"] == ["e-1"]
    # e-2 crash-looping now, for reasons of its own: said, and e-1 still comes back.
    facts["pods"][2]["status"]["containerStatuses"][0]["state"] = {
        "waiting": {"reason": "CrashLoopBackOff"}
    }
    facts["pods"][2]["status"]["conditions"][0]["status"] = "False"
    facts["info"] = info([member(0), member(1, healthy=False), member(2, healthy=False)])
    p = ep.plan(facts)
    assert p["halted"] == {} and p["ended"] == ["e-1"]
    assert [r["reason"] for r in p["refusals"]] == ["MemberCannotRun"]


def test_a_restart_settled_again_no_longer_halts():
    """A member that restarted once (a first start that raced DNS) and then stayed healthy for
    the whole period is trusted again."""
    facts = resources_roll()
    restarted: dict[str, Any] = {
        "restartCount": 1,
        "lastState": {"terminated": {"reason": "Error", "exitCode": 1}},
    }
    facts["pods"][1] = on_new_pod(facts, 1, **restarted)
    facts["info"] = info([member(0), member(1), member(2)])
    assert list(ep.plan(facts)["halted"]) == ["e-1"]
    facts["pods"][1] = on_new_pod(facts, 1, healthy_for=30, **restarted)
    p = ep.plan(facts)
    assert p["halted"] == {} and p["roll"] == ["e-2"]


@pytest.mark.parametrize(
    ("ready", "healthy", "reason"),
    [
        # Any member not Ready or not healthy: none is taken down.
        ([True, True, False], [True, True, True], "RollBlocked"),
        ([True, True, True], [True, False, True], "RollBlocked"),
        ([True, True, True], [True, True, True], ""),
    ],
)
def test_no_member_goes_down_unless_every_member_is_ready_and_healthy(ready, healthy, reason):
    facts = resources_roll()
    for i, r in enumerate(ready):
        facts["pods"][i]["status"]["conditions"][0]["status"] = "True" if r else "False"
    facts["info"] = info([member(i, healthy=h) for i, h in enumerate(healthy)])
    p = ep.plan(facts)
    assert [r["reason"] for r in p["refusals"]] == ([reason] if reason else [])
    assert p["roll"] == ([] if reason else ["e-1"])


@pytest.mark.parametrize(
    ("status", "fields"),
    [
        (
            {"state": {"waiting": {"reason": "ErrImagePull"}}},
            "spec.repository, spec.version, spec.imageDigests, spec.pod.imagePullSecrets",
        ),
        (
            {
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
            },
            "spec.pod.resources",
        ),
        ({"state": {"terminated": {"reason": "Error", "exitCode": 2}}}, ""),
    ],
)
def test_a_pod_made_from_the_spec_that_cannot_run_is_said_outside_a_roll(status, fields):
    """One member (nothing left to roll): its Pod cannot run, and status says why."""
    facts = healthy3(size=1)
    facts["claims"] = [claim(0)]
    facts["pods"] = [on_new_pod(facts, 0, **status)]
    facts["info"] = {}
    p = ep.plan(facts)
    (refusal,) = p["refusals"]
    assert refusal["reason"] == "MemberCannotRun" and refusal["field"] == fields
    assert refusal["message"].startswith("e-0's Pod cannot run: ")
    assert ep.report(facts)["conditions"]["Degraded"]["reason"] == "MemberCannotRun"


@pytest.mark.parametrize(
    ("before", "after", "fields"),
    [
        ({}, {}, []),
        ({}, {"version": "3.6.17"}, ["spec.version"]),
        ({}, {"repository": "r.local/etcd", "version": "3.6.17"},
         ["spec.repository", "spec.version"]),
        ({}, {"pod": {"resources": {"limits": {"memory": "1Gi"}}}}, ["spec.pod.resources"]),
        ({}, {"pod": {"nodeSelector": {"a": "b"}}}, ["spec.pod.nodeSelector"]),
        ({}, {"pod": {"antiAffinity": "required"}}, ["spec.pod.antiAffinity"]),
        ({}, {"pod": {"affinity": {"nodeAffinity": {"x": 1}}}}, ["spec.pod.affinity"]),
        ({}, {"pod": {"tolerations": [{"key": "k", "operator": "Exists"}]}},
         ["spec.pod.tolerations"]),
        ({}, {"pod": {"priorityClassName": "high"}}, ["spec.pod.priorityClassName"]),
        ({}, {"imageDigests": {"3.6.16": "sha256:" + "1" * 64}}, ["spec.imageDigests"]),
        ({"imageDigests": {"3.6.16": "sha256:" + "1" * 64}},
         {"version": "3.6.17", "imageDigests": {"3.6.17": "sha256:" + "2" * 64}},
         ["spec.version", "spec.imageDigests"]),
        ({}, {"pod": {"imagePullSecrets": [{"name": "r"}]}}, ["spec.pod.imagePullSecrets"]),
        ({}, {"pod": {"topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"}]}},
         ["spec.pod.topologySpreadConstraints"]),
        ({}, {"pod": {"securityContext": {"fsGroup": 7}}}, ["spec.pod.securityContext"]),
        ({}, {"storage": {"size": "1Gi", "quotaBackendBytes": "100Mi"}}, ["spec.storage"]),
        ({}, {"etcd": {"heartbeatInterval": 50, "electionTimeout": 500}}, ["spec.etcd"]),
        # What cannot stop a Pod from running is not named.
        ({}, {"pod": {"labels": {"team": "a"}}}, []),
    ],
)  # fmt: skip
def test_what_a_new_pod_changed_is_told_from_an_old_one(before, after, fields):
    assert changed_fields(made_from(after, 1), made_from(before, 0)) == fields


@pytest.mark.parametrize(
    ("value", "ok"), [(None, True), (0, True), (30, True), (3600, True), (-1, False), ("30", False)]
)
def test_min_ready_seconds(value, ok):
    spec = {} if value is None else {"minReadySeconds": value}
    normalized = normalize_spec(obj(**spec), {})
    assert [p["field"] for p in normalized["problems"]] == ([] if ok else ["spec.minReadySeconds"])
    assert normalized["min_ready_seconds"] == (value if ok and value is not None else 30)


# --- pause and the report ------------------------------------------------------------------


def test_paused_changes_nothing_but_reports():
    facts = healthy3(paused=True, size=5)
    facts["pods"] = facts["pods"][:2]
    p = ep.plan(facts)
    assert actions(p) == {} and p["paused"]
    assert ep.report(facts)["phase"] == "Paused"
    facts["options"] = {"ignore_pause": True}
    assert ep.plan(facts)["heal"] == ["e-2"]


def cond(r, type_):
    c = r["conditions"][type_]
    return c["status"], c["reason"]


def test_report_of_a_healthy_cluster():
    r = ep.report(healthy3())
    assert r["phase"] == "Running" and not r["failed"]
    assert cond(r, "Available") == ("True", "QuorumHealthy")
    assert cond(r, "Progressing") == ("False", "Reconciled")
    assert cond(r, "Degraded") == ("False", "AllMembersHealthy")
    assert r["status"]["clusterID"] == CID and r["status"]["readyMembers"] == 3
    assert r["status"]["currentVersion"] == "3.6.16"


@pytest.mark.parametrize(
    "members, leader, error, reason_words",
    [
        (
            [member(0), member(1, healthy=False), member(2, healthy=False)],
            None,
            "",
            "1 of 3 voting members healthy",
        ),
        (None, None, "connection refused", "no member answered: connection refused"),
    ],
)
def test_report_says_quorum_lost_loudly(members, leader, error, reason_words):
    facts = healthy3()
    facts["info"] = info(members, leader=leader) if members else {}
    facts["info_error"] = error
    r = ep.report(facts)
    assert r["phase"] == "QuorumLost" and r["failed"]
    status, reason = cond(r, "Available")
    assert (status, reason) == ("False", "QuorumLost")
    assert reason_words in r["conditions"]["Available"]["message"]
    assert cond(r, "Degraded") == ("True", "QuorumLost")
    assert any(e["reason"] == "QuorumLost" and e["type"] == "Warning" for e in r["events"])


def test_nospace_is_an_alarm_not_lost_quorum():
    facts = healthy3()
    facts["info"] = info(
        [member(i) for i in range(3)], alarms=[{"member_id": "a1", "alarm": "NOSPACE"}]
    )
    r = ep.report(facts)
    assert cond(r, "Available") == ("True", "QuorumHealthy")
    assert cond(r, "Degraded") == ("True", "Alarm")
    assert "NOSPACE on e-1" in r["conditions"]["Degraded"]["message"]
    assert r["status"]["alarms"] == [{"member": "e-1", "alarm": "NOSPACE"}]


def test_report_names_the_refusal_and_keeps_availability_true():
    r = ep.report(healthy3(version="3.4.31"))
    assert cond(r, "Available") == ("True", "QuorumHealthy")
    assert cond(r, "Degraded") == ("True", "UnsafeVersionChange")
    assert cond(r, "Progressing") == ("False", "UnsafeVersionChange")
    assert r["failed"]


def test_report_of_a_new_cluster():
    r = ep.report({"object": obj(status={}), "pods": [], "claims": [], "info": {}})
    assert r["phase"] == "Creating" and not r["failed"]
    assert cond(r, "Available") == ("False", "Creating")
    assert cond(r, "Degraded")[0] == "False"
    assert "clusterID" not in r["status"]


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"storage": {"size": "lots"}}, "InvalidSpec"),
        ({"version": "3.5.1"}, "InvalidSpec"),
        ({"etcd": {"featureGates": {"NoSuchGate": True}}}, "InvalidSpec"),
    ],
)
def test_a_new_cluster_refused_reads_failed_not_creating(spec, reason):
    r = ep.report({"object": obj(status={}, **spec), "pods": [], "claims": [], "info": {}})
    assert r["phase"] == "Failed" and r["failed"]
    assert cond(r, "Available") == ("False", "Creating")
    assert cond(r, "Degraded") == ("True", reason)


@pytest.mark.parametrize(
    "peer, name",
    [
        (f"https://e-1.{DOMAIN}:2380", "e-1"),
        (f"HTTPS://E-1.{DOMAIN.upper()}:2380/", "e-1"),
        ("https://e-1.e.other.svc.cluster.local:2380", ""),  # another namespace's e-1
        ("https://e-1.e.ns.svc.example.org:2380", ""),  # another cluster domain
        (f"http://e-1.{DOMAIN}:2380", ""),  # plain HTTP to a TLS cluster's member
        (f"https://e-1.{DOMAIN}:2381", ""),
        ("https://e-1:2380", ""),
        ("https://e-1.f.ns.svc.cluster.local:2380", ""),  # cluster f's
    ],
)
def test_a_member_is_who_its_whole_peer_url_says(peer, name):
    """Not the URL's first label, nor the name the member gives itself."""
    m = {**member(1), "peer_urls": [peer], "name": "e-1"}
    o = _Observed({**healthy3(), "info": info([member(0), m, member(2)])})
    assert [x["name"] for x in o.members] == ["e-0", name, "e-2"]
    assert o.healthy("e-1") is bool(name)
    assert [x["id"] for x in o.foreign] == ([] if name else [mid(1)])


def test_a_member_of_another_namespace_is_never_taken_for_ours():
    """Seen as a learner of this cluster, at the peer URL of another namespace's e-1 (a
    cluster of the same name): taken for e-1, it was removed as the surplus learner, and with
    it the healthy voter e-1 that etcd_member found by name, its claim deleted."""
    stranger = {
        **member(5, healthy=False, learner=True, started=False),
        "peer_urls": ["https://e-1.e.other.svc.cluster.local:2380"],
    }
    facts = healthy3()
    members = [member(0), member(1), member(2), stranger]
    facts["info"] = info(members, views=[view(i, [0, 1, 2, 5]) for i in range(3)])
    p = ep.plan(facts)
    assert actions(p) == {} and p["relabel"] == [] and not p["trusted"]
    assert p["refusals"][0]["reason"] == "ForeignMember"
    message = p["refusals"][0]["message"]
    assert mid(5) in message and "e.other.svc" in message and "ns/e" in message
    assert "none of this cluster's" in p["withheld"]
    report = ep.report(facts)
    assert cond(report, "Degraded") == ("True", "ForeignMember")
    assert cond(report, "Available")[0] == "True"
    # Its Pod gone meanwhile, e-1 still comes back on its claim: healing waits for nothing.
    facts["pods"] = facts["pods"][:1] + facts["pods"][2:]
    assert ep.plan(facts)["heal"] == ["e-1"]


def test_the_leader_hands_over_to_a_member_already_rolled():
    facts = healthy3(repository="registry.local/etcd")
    facts["info"] = info([member(i) for i in range(3)], leader=1)
    p = ep.plan(facts)
    assert p["roll_pending"] == ["e-0", "e-2", "e-1"] and p["roll"] == ["e-0"]
    # e-0 and e-2 rolled and settled: e-1, the leader, goes last, to one of them.
    facts["pods"][0] = settled_on(facts, 0)
    facts["pods"][2] = settled_on(facts, 2)
    p = ep.plan(facts)
    assert p["roll"] == ["e-1"] and p["transferee"] == "e-0"
    # Only e-2 rolled yet: leadership would go to it (not to e-0, still on its old Pod).
    facts["pods"][0] = pod(0)
    assert ep.plan(facts)["transferee"] == "e-2"


@pytest.mark.parametrize(
    "voters, size, min_available",
    [
        (3, 3, 2),
        (5, 3, 3),  # scaling down: the real voters, not the size asked for
        (4, 3, 3),
        (3, 5, 3),  # scaling up: already the size being built
        (1, 1, 1),
        (2, 2, 2),  # no drain at all: the TwoMemberCluster warning says so
    ],
)
def test_the_disruption_budget_follows_the_voting_membership(voters, size, min_available):
    facts = {
        "object": obj(size=size),
        "pods": [pod(i) for i in range(voters)],
        "claims": [claim(i) for i in range(voters)],
        "info": info([member(i) for i in range(voters)]),
    }
    assert ep.plan(facts)["pdb_min_available"] == min_available


def _unschedulable(p: dict[str, Any], message: str) -> dict[str, Any]:
    p["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
            }
        ],
    }
    return p


ANTI = "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."


@pytest.mark.parametrize(
    ("conditions", "said"),
    [
        ([], ""),
        ([{"type": "PodScheduled", "status": "True"}], ""),
        # Not tried yet, or waiting on its claim: not the scheduler's refusal.
        ([{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}], ""),
        (
            [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
            "no node fits it",
        ),
        (
            [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": ANTI,
                }
            ],
            ANTI,
        ),
    ],
)
def test_what_the_scheduler_said(conditions, said):
    assert unschedulable({"status": {"conditions": conditions}}) == said


def test_a_learner_no_node_takes_is_neither_promoted_nor_followed_and_says_why():
    # Required anti-affinity, size 4 on three nodes: the fourth member was added as a learner and
    # its Pod stays Pending.
    members = [member(0), member(1), member(2), member(3, learner=True, healthy=False)]
    facts = {
        "object": obj(size=5, pod={"antiAffinity": "required"}),
        "pods": [pod(i) for i in range(3)] + [_unschedulable(pod(3, voter="false"), ANTI)],
        "claims": [claim(i) for i in range(3)] + [claim(3, joined=False)],
        "info": info(members),
    }
    p = ep.plan(facts)
    assert p["promote"] == [] and p["add"] == [] and p["unschedulable"] == {"e-3": ANTI}
    refusal = p["refusals"][0]
    assert (refusal["reason"], refusal["field"]) == ("MemberUnschedulable", "spec.pod.antiAffinity")
    assert "e-3's Pod cannot be scheduled" in refusal["message"] and ANTI in refusal["message"]
    assert "change spec.pod.antiAffinity" in refusal["message"]
    r = ep.report(facts)
    assert r["conditions"]["Degraded"]["reason"] == "MemberUnschedulable"
    assert r["conditions"]["Available"]["status"] == "True"
    assert r["phase"] == "Scaling"
    # Lowering the size removes it, unpromoted.
    facts["object"] = obj(size=3, pod={"antiAffinity": "required"})
    assert ep.plan(facts)["remove"] == ["e-3"]


def test_a_member_pod_waiting_for_a_cordoned_node_names_the_pod_spec():
    facts = healthy3()
    why = (
        "0/3 nodes are available: 1 node(s) were unschedulable, "
        "2 node(s) had volume node affinity conflict."
    )
    facts["pods"][1] = _unschedulable(pod(1), why)
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    p = ep.plan(facts)
    assert [(r["reason"], r["field"]) for r in p["refusals"]] == [
        ("MemberUnschedulable", "spec.pod")
    ]
    # The Pod exists: it is not re-made, only waited for.
    assert p["heal"] == [] and p["ended"] == []


@pytest.mark.parametrize(
    ("healthy", "ready", "paused", "again"),
    [
        # All healthy: nothing to look at again.
        (True, True, False, None),
        # The Pod is Ready but etcd does not count the member yet: look again soon.
        (False, True, False, LAGGING_RECHECK),
        # The Pod is not Ready: its turning Ready is an event of its own.
        (False, False, False, None),
        # Paused: the operator changes nothing, and looks when told.
        (False, True, True, None),
    ],
)
def test_a_member_etcd_lags_behind_its_ready_pod_is_looked_at_again(healthy, ready, paused, again):
    facts = healthy3(paused=paused)
    facts["pods"][1] = pod(1, ready=ready)
    facts["info"] = info([member(0), member(1, healthy=healthy), member(2)])
    assert ep.report(facts)["requeue_after"] == again


NOW = "2026-11-25T10:00:00Z"


def _node(
    ready: str = "True",
    silent: float | None = None,
    found: bool = True,
    since: str = "",
    renewed: str = "",
) -> dict[str, Any]:
    """A node as the observe module reports it: `silent` is how long its kubelet has not
    renewed its Lease, on the API server's clock; `since` (its Ready condition's change) and
    `renewed` (its last renewTime) are on the kubelet's clock."""
    return {
        "found": found,
        "ready": ready,
        "ready_since": since,
        "renewed": renewed,
        "silent_for": silent,
        "read_at": NOW,
    }


def _on_nodes(
    facts: dict[str, Any],
    nodes: dict[str, dict[str, Any]] | None,
    volumes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    for i, p in enumerate(facts["pods"]):
        p["spec"] = {"nodeName": f"node{i}"}
    facts["nodes"] = nodes
    facts["volumes"] = volumes
    return facts


def _bound(*nodes: str, pinned: tuple[str, ...] = ()) -> dict[str, Any]:
    """A claim's volume whose node affinity admits `nodes` (none left: nowhere to go)."""
    return {
        "bound": True,
        "pv": "pv-1",
        "found": True,
        "anywhere": False,
        "nodes": list(nodes),
        "pinned": list(pinned),
    }


ANYWHERE = {"bound": True, "pv": "pv-1", "found": True, "anywhere": True}


@pytest.mark.parametrize(
    ("node1", "healthy", "timeout", "lost", "replaced"),
    [
        # Kubernetes counts the node Ready: a member down there is healed as any other.
        (_node(), False, None, {}, []),
        (_node("True", 10), False, None, {}, []),
        # Ready still (for 35 s more), but its kubelet silent for 20 s: noticed, waited for.
        (_node("True", 20), False, None, {"e-1": 20.0}, []),
        # Not Ready for 40 s, 5 min allowed: noticed, waited for.
        (_node("Unknown", 40), False, None, {"e-1": 40.0}, []),
        # Past the timeout: replaced.
        (_node("Unknown", 360), False, None, {"e-1": 360.0}, ["e-1"]),
        (_node("False", 40), False, "30s", {"e-1": 40.0}, ["e-1"]),
        # Its kubelet renews, and says the node is not Ready: counted on the kubelet's clock,
        # from the condition's change to the last renewal (plus the silence since).
        (
            _node("False", 2, since="2026-11-25T08:58:00Z", renewed="2026-11-25T09:00:00Z"),
            False,
            "60s",
            {"e-1": 122.0},
            ["e-1"],
        ),
        # No Lease to tell: from the condition's change to the API server's answer.
        (_node("Unknown", None, since="2026-11-25T09:59:00Z"), False, "90s", {"e-1": 60.0}, []),
        # Not Ready since no time that can be read: lost, never due.
        (_node("False", None), False, "1s", {"e-1": 0.0}, []),
        # 0: wait for the node for good.
        (_node("Unknown", 7200), False, "0", {"e-1": 7200.0}, []),
        # The Node object is gone: nothing to wait for.
        (_node(found=False), False, None, {"e-1": None}, ["e-1"]),
        # etcd still counts the member healthy (only the API server lost the node): kept.
        (_node("Unknown", 3600), True, None, {}, []),
    ],
)
def test_a_member_on_a_lost_node_is_waited_for_then_replaced(
    node1, healthy, timeout, lost, replaced
):
    facts = healthy3() if timeout is None else healthy3(nodeLossTimeout=timeout)
    facts["info"] = info([member(0), member(1, healthy=healthy), member(2)])
    # Its volume can go nowhere else (a node-local volume).
    _on_nodes(
        facts, {"node0": _node(), "node1": node1, "node2": _node()}, {"e-1-data": _bound("node1")}
    )
    p = ep.plan(facts)
    assert {n: v["seconds"] for n, v in p["node_lost"].items()} == lost
    assert [r["name"] for r in p["replace"]] == replaced
    if replaced:
        reason = p["replace"][0]["reason"]
        if lost["e-1"] is None:
            assert reason == "its node node1 no longer exists: there is no node left to wait for"
        else:
            assert "past spec.nodeLossTimeout" in reason, reason
    # Never healed, moved or re-made in place: no kubelet would run it, nor another node.
    assert p["heal"] == [] and p["ended"] == [] and p["moved"] == []


def test_a_kubelet_whose_clock_is_off_is_not_taken_for_silent():
    # Its renewTime is an hour behind the operator's (and the API server's) clock, but the
    # API server stored its last renewal 3 s before it answered: heard from, not lost. Before,
    # the operator's clock minus the kubelet's said 3600 s of silence, and its member was
    # never healed, then replaced.
    facts = healthy3(nodeLossTimeout="60s")
    facts["pods"][1] = pod(1, phase="Failed", ready=False)
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    skewed = _node("True", 3, renewed="2026-11-25T09:00:00Z")
    _on_nodes(facts, {"node0": _node(), "node1": skewed, "node2": _node()}, {})
    p = ep.plan(facts)
    assert p["node_lost"] == {} and p["replace"] == []
    assert p["ended"] == ["e-1"] and p["heal"] == ["e-1"]


MOVED = "made again on its own volume on another node after"
REPLACED = "replaced after"
WAITED = "waited for (spec.nodeLossTimeout is 0)"


@pytest.mark.parametrize(
    ("volume", "node1", "timeout", "moved", "replaced", "said"),
    [
        # Any node can mount its volume: past the timeout, the same member is made again
        # elsewhere on it, never replaced.
        (ANYWHERE, _node("Unknown", 400), None, ["e-1"], [], MOVED),
        # Its volume's affinity admits another node that runs.
        (_bound("node1", "node2"), _node("Unknown", 400), None, ["e-1"], [], MOVED),
        # ... but not one that is lost too, nor its own node alone: replaced.
        (_bound("node1", "node3"), _node("Unknown", 400), None, [], ["e-1"], REPLACED),
        (_bound("node1"), _node("Unknown", 400), None, [], ["e-1"], REPLACED),
        # Nobody could read where its volume can go: replaced as it always was.
        (None, _node("Unknown", 400), None, [], ["e-1"], REPLACED),
        # Not yet due: waited for, and said what will be done.
        (ANYWHERE, _node("Unknown", 40), None, [], [], MOVED),
        # 0: waited for, for good (its Pod is never deleted out from under it).
        (ANYWHERE, _node("Unknown", 40000), "0", [], [], WAITED),
        # The Node deleted: nothing to wait for, moved at once.
        (ANYWHERE, _node(found=False), "1h", ["e-1"], [], MOVED),
    ],
)
def test_a_member_on_a_lost_node_whose_volume_can_go_elsewhere_is_moved_with_it(
    volume, node1, timeout, moved, replaced, said
):
    facts = healthy3() if timeout is None else healthy3(nodeLossTimeout=timeout)
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    nodes = {"node0": _node(), "node1": node1, "node2": _node(), "node3": _node("Unknown", 400)}
    _on_nodes(facts, nodes, None if volume is None else {"e-1-data": volume})
    p = ep.plan(facts)
    assert list(p["node_lost"]) == ["e-1"]
    assert p["moved"] == moved
    assert p["heal"] == moved
    assert [r["name"] for r in p["replace"]] == replaced
    message = ep.report(facts)["conditions"]["Degraded"]["message"]
    assert said in message, message


def test_moving_a_member_with_its_volume_needs_no_quorum():
    # Two of three nodes lost for good, their volumes mountable anywhere: no quorum, so no
    # member may be removed, but both are the same members elsewhere.
    facts = healthy3()
    facts["info"] = info([member(0), member(1, healthy=False), member(2, healthy=False)])
    gone = _node("Unknown", 3600)
    _on_nodes(
        facts,
        {"node0": _node(), "node1": gone, "node2": gone},
        {"e-1-data": ANYWHERE, "e-2-data": ANYWHERE},
    )
    p = ep.plan(facts)
    assert p["moved"] == ["e-1", "e-2"] and p["heal"] == ["e-1", "e-2"]
    assert p["replace"] == [] and p["withheld"]


def _pending(n: int) -> dict[str, Any]:
    pending = pod(n, phase="Pending", ready=False)
    pending["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 node(s) had volume node affinity conflict.",
        }
    ]
    return pending


@pytest.mark.parametrize(
    ("volume", "timeout", "unplaced_pod", "lost", "replaced", "healed", "refused"),
    [
        # Its volume can be mounted on a node that runs: the Pod is made again on its claim,
        # whatever node the claim was first scheduled to.
        (ANYWHERE, None, False, {}, [], True, []),
        (_bound("node2", pinned=("node2",)), None, False, {}, [], True, []),
        # A volume not bound yet goes where its class puts it; one nobody could read is never
        # a reason to give a member up.
        ({"bound": False}, None, False, {}, [], True, []),
        (None, "1s", False, {}, [], True, []),
        # Its volume's node is gone (the pod garbage collector deleted the Pod with the Node):
        # nothing to wait for, replaced, never re-made.
        (_bound(pinned=("node9",)), None, False, {"e-1": None}, ["e-1"], False, []),
        # The same, with a Pod re-made before that no node takes: not a scheduling problem.
        (_bound(pinned=("node9",)), None, True, {"e-1": None}, ["e-1"], False, []),
        # Its volume's node is down, the timeout not yet passed: waited for.
        (_bound("node3"), None, False, {"e-1": 40.0}, [], False, []),
        # 0: never replaced; the Pod is made again on its claim, to wait for its node there.
        (_bound("node3"), "0", False, {"e-1": 40.0}, [], True, []),
        (_bound(pinned=("node9",)), "0", False, {"e-1": None}, [], True, []),
        # Its volume (the PersistentVolume) is gone: its data with it.
        (
            {"bound": True, "pv": "pv-1", "found": False},
            None,
            False,
            {"e-1": None},
            ["e-1"],
            False,
            [],
        ),
        # The volume's node is fine, but the Pod is not placed: said, as any unschedulable Pod.
        (_bound("node2"), None, True, {}, [], False, ["MemberUnschedulable"]),
    ],
)
def test_a_member_without_a_pod_is_judged_by_where_its_volume_can_go(
    volume, timeout, unplaced_pod, lost, replaced, healed, refused
):
    facts = healthy3() if timeout is None else healthy3(nodeLossTimeout=timeout)
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    # The scheduler's pick for the claim, which nothing updates: never what is judged.
    facts["claims"][1]["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] = "node9"
    facts["pods"][1] = _pending(1)
    _on_nodes(
        facts,
        {"node0": _node(), "node2": _node(), "node3": _node("Unknown", 40)},
        None if volume is None else {"e-1-data": volume},
    )
    if unplaced_pod:
        facts["pods"][1]["spec"] = {}
    else:
        del facts["pods"][1]
    p = ep.plan(facts)
    assert {n: v["seconds"] for n, v in p["node_lost"].items()} == lost
    assert [r["name"] for r in p["replace"]] == replaced
    assert [r["reason"] for r in p["refusals"]] == refused
    assert p["heal"] == (["e-1"] if healed else [])
    assert p["moved"] == []


def test_members_whose_pods_went_during_a_node_rotation_come_back_without_quorum():
    # Two of three nodes rotated out while the cluster was paused: their Nodes and Pods are
    # gone, their claims still name them (selected-node), their volumes any node can mount.
    # No quorum: nothing may be removed, but re-making a Pod on its own claim changes no
    # membership, so both come back as the members they were.
    facts = healthy3()
    del facts["pods"][1:]
    for c in facts["claims"][1:]:
        c["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] = "gone"
    facts["info"] = info([member(0), member(1, healthy=False), member(2, healthy=False)])
    _on_nodes(facts, {"node0": _node()}, {"e-1-data": _bound("node0"), "e-2-data": ANYWHERE})
    p = ep.plan(facts)
    assert p["heal"] == ["e-1", "e-2"]
    assert p["node_lost"] == {} and p["replace"] == [] and p["withheld"]


def test_nodes_nobody_could_read_judge_no_member():
    facts = healthy3(nodeLossTimeout="1s")
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    del facts["pods"][2]
    _on_nodes(facts, None)
    p = ep.plan(facts)
    assert p["node_lost"] == {} and p["replace"] == [] and p["moved"] == []
    assert p["heal"] == ["e-2"]


def test_one_member_lost_with_its_node_at_a_time_and_never_without_quorum():
    gone = _node("Unknown", 3600)
    facts = healthy3(size=5)
    facts["pods"] = [pod(i) for i in range(5)]
    facts["claims"] = [claim(i) for i in range(5)]
    health = [True, False, False, True, True]
    facts["info"] = info([member(i, healthy=h) for i, h in enumerate(health)])
    _on_nodes(facts, {f"node{i}": (_node() if h else gone) for i, h in enumerate(health)})
    p = ep.plan(facts)
    assert [r["name"] for r in p["replace"]] == ["e-1"]
    # Three of five down: no quorum, so nothing is removed on the word of the other two.
    facts["info"] = info([member(i, healthy=i > 2) for i in range(5)])
    _on_nodes(facts, {f"node{i}": (_node() if i > 2 else gone) for i in range(5)})
    p = ep.plan(facts)
    assert p["replace"] == [] and p["withheld"]


def test_a_pod_deleted_on_a_lost_node_is_not_waited_for():
    facts = healthy3()
    facts["pods"][1] = pod(1, deleting=True, ready=False)
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    _on_nodes(facts, {"node0": _node(), "node1": _node("Unknown", 60), "node2": _node()})
    p = ep.plan(facts)
    assert p["leaving"] == [] and list(p["node_lost"]) == ["e-1"]


@pytest.mark.parametrize("trusted", [True, False])
def test_only_an_agreeing_quorum_s_word_lets_a_pod_go_at_once(trusted):
    # e-3 is no member (its removal finished, its cleanup did not): its Pod may be deleted at
    # once, on a lost node too, but only on the word of an agreeing quorum.
    facts = healthy3()
    facts["pods"].append(pod(3))
    facts["claims"].append(claim(3))
    if not trusted:
        facts["info"] = info([member(0), member(1, healthy=False), member(2, healthy=False)])
    p = ep.plan(facts)
    assert p["unlisted"] == (["e-3"] if trusted else [])
    assert p["stale"] == (["e-3"] if trusted else [])


def test_a_lost_node_is_reported():
    facts = healthy3(nodeLossTimeout="2m")
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    _on_nodes(facts, {"node0": _node(), "node1": _node("Unknown", 30), "node2": _node()})
    r = ep.report(facts)
    degraded = r["conditions"]["Degraded"]
    assert degraded["reason"] == "NodeLost"
    assert (
        "e-1: its node node1 is not Ready (30 s without word from its kubelet)"
        in degraded["message"]
    )
    assert "replaced after 120 s (spec.nodeLossTimeout)" in degraded["message"]
    assert r["conditions"]["Available"]["status"] == "True"


@pytest.mark.parametrize(
    ("timeout", "silent", "again"),
    [
        # A node that comes back may turn Ready after the last event watched (its Lease, its
        # Pods): looked at again every NODE_LOST_RECHECK seconds while it is lost.
        ("2m", 30, NODE_LOST_RECHECK),
        ("0", 30, NODE_LOST_RECHECK),  # never replaced, still looked at
        ("10m", 30, NODE_LOST_RECHECK),
        ("2m", 110, 11.0),  # due sooner than the recheck: looked at when due
        ("2m", 119, 2.0),
    ],
)
def test_a_lost_node_is_looked_at_again_until_it_returns_or_comes_due(timeout, silent, again):
    facts = healthy3(nodeLossTimeout=timeout)
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    _on_nodes(facts, {"node0": _node(), "node1": _node("Unknown", silent), "node2": _node()})
    assert ep.report(facts)["requeue_after"] == again


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, 300),
        ("0", 0),
        ("90s", 90),
        ("5m", 300),
        ("1h30m", 5400),
        ("2h5s", 7205),
        ("", None),
        ("5", None),
        ("5 m", None),
        ("m", None),
        (True, None),
    ],
)
def test_node_loss_timeout(value, seconds):
    assert node_loss_seconds(value) == seconds


def test_a_bad_node_loss_timeout_is_refused_naming_the_field():
    p = ep.plan(healthy3(nodeLossTimeout="soon"))
    assert [r["field"] for r in p["refusals"]] == ["spec.nodeLossTimeout"]


@pytest.mark.parametrize(
    ("age", "halted"),
    [
        (120, False),
        (599, False),
        # As long as a learner's bound: etcd starts under the spec but never serves.
        (600, True),
        (3600, True),
    ],
)
def test_a_rolled_member_that_runs_but_is_never_healthy_halts_the_roll_after_a_bound(age, halted):
    facts = resources_roll()
    facts["pods"][1] = on_new_pod(facts, 1)
    facts["pods"][1]["status"]["conditions"][0]["status"] = "False"
    made = datetime.fromisoformat(ROLL_NOW.replace("Z", "+00:00")) - timedelta(seconds=age)
    facts["pods"][1]["metadata"]["creationTimestamp"] = made.strftime("%Y-%m-%dT%H:%M:%SZ")
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    p = ep.plan(facts)
    assert p["roll"] == [] and p["ended"] == [] and p["heal"] == []
    if not halted:
        assert p["halted"] == {} and p["settling"] == {"e-1": None} and p["refusals"] == []
        return
    assert p["halted"]["e-1"]["reason"] == "NotHealthy"
    (refusal,) = p["refusals"]
    assert refusal["reason"] == "RollHalted" and refusal["field"] == "spec.pod.resources"
    assert f"has not counted it healthy {age} s after its Pod was made" in refusal["message"]
    assert "(e-0, e-2 keep running as they are)" in refusal["message"]

    # The spec set back: the member on the newest Pod, never healthy, is made again from it;
    # not one that has run healthy for long (down now: left to its kubelet).
    back = healthy3()
    back["pods"] = [made_from({}, i) for i in range(3)]
    back["pods"][1] = facts["pods"][1]
    back["observed_at"] = ROLL_NOW
    back["info"] = info([member(0), member(1, healthy=False), member(2)])
    p = ep.plan(back)
    assert p["ended"] == ["e-1"] and p["heal"] == ["e-1"] and p["refusals"] == []
    back["pods"][1]["metadata"]["creationTimestamp"] = CREATED
    assert ep.plan(back)["ended"] == []


def _taken(name: str, time: str, cluster: str = "e", sha256: str = "f" * 64) -> dict[str, Any]:
    backup = etcd_backup(name, cluster=cluster)
    backup["status"]["lastSnapshot"] = {
        "location": f"s3://b/{name}.db",
        "sha256": sha256,
        "time": time,
    }
    return backup


@pytest.mark.parametrize(
    ("backups", "last"),
    [
        ([], None),
        # The newest verified snapshot of any of the cluster's EtcdBackups.
        (
            [_taken("nightly", "2026-11-27T03:00:00Z"), _taken("hourly", "2026-11-28T09:00:00Z")],
            {"backup": "hourly", "time": "2026-11-28T09:00:00Z", "location": "s3://b/hourly.db"},
        ),
        # Another cluster's, a snapshot without its sha256 (not verified), none at all: not it.
        (
            [
                _taken("theirs", "2026-11-28T10:00:00Z", cluster="other"),
                _taken("unverified", "2026-11-28T11:00:00Z", sha256=""),
                etcd_backup("empty"),
                _taken("nightly", "2026-11-27T03:00:00Z"),
            ],
            {"backup": "nightly", "time": "2026-11-27T03:00:00Z", "location": "s3://b/nightly.db"},
        ),
    ],
)
def test_the_last_backup_is_the_newest_verified_snapshot_of_the_cluster(backups, last):
    facts = healthy3()
    facts["backups"] = backups
    assert ep.report(facts)["status"]["lastBackup"] == last
