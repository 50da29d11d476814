"""The runbook's decisions (plugins/filter/etcd_plan.py), table-driven, no cluster needed.

Facts are built the way k8s_info and etcd_cluster_info return them; each case says what the
plan must (and must not) do with them, with the safety cases spelled out: quorum, learners,
the leader last, lost data, forks, one endpoint's word."""

from __future__ import annotations

import base64
import importlib.util
from pathlib import Path
from typing import Any

import pytest

_PATH = Path(__file__).resolve().parents[2] / "plugins" / "filter" / "etcd_plan.py"
_SPEC = importlib.util.spec_from_file_location("etcd_plan", _PATH)
assert _SPEC and _SPEC.loader
ep = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ep)

CID = "c1d"
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
        ep.ANN_INITIAL_CLUSTER: f"e-{n}=https://e-{n}.{DOMAIN}:2380",
        ep.ANN_INITIAL_STATE: "existing" if joined else "new",
        ep.ANN_VERSION: version,
        **ann,
    }
    if joined:
        a[ep.ANN_MEMBER_ID] = mid(n)
        a[ep.ANN_CLUSTER_ID] = CID
    return {
        "metadata": {
            "name": f"e-{n}-data",
            "labels": {ep.LABEL_MEMBER: f"e-{n}", ep.LABEL_VOTER: "true"},
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
) -> dict[str, Any]:
    spec = ep.normalize_spec(obj(), {})
    meta: dict[str, Any] = {
        "name": f"e-{n}",
        "labels": {ep.LABEL_MEMBER: f"e-{n}", ep.LABEL_VERSION: version, ep.LABEL_VOTER: voter},
        "annotations": {ep.ANN_POD_HASH: hash_ or ep.pod_hash(spec, version)},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
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
    assert ep.parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "1Gb", "-1", "Gi", True])
def test_parse_quantity_refuses(text):
    with pytest.raises(ep.PlanError):
        ep.parse_quantity(text)


@pytest.mark.parametrize(
    "volume, quota",
    [
        ("512Mi", 64 * ep.MiB),  # the smallest volume allowed
        ("1Gi", 320 * ep.MiB),
        ("4Gi", (4096 - 384) // 2 * ep.MiB),
        ("100Gi", 8 * ep.GiB),  # etcd's suggested maximum
    ],
)
def test_quota_follows_the_volume_with_room_for_wal_and_a_copy(volume, quota):
    spec = ep.normalize_spec(obj(storage={"size": volume}), {})
    assert spec["quota_bytes"] == quota and not spec["problems"]
    # The database and a second copy of it plus the WAL reserve fit on the volume.
    assert 2 * quota + ep.WAL_RESERVE <= ep.parse_quantity(volume)


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
    (problem,) = ep.normalize_spec(obj(storage=storage), {})["problems"]
    assert problem["field"] == field and words in problem["message"]


def test_a_quota_within_the_volume_is_taken():
    spec = ep.normalize_spec(obj(storage={"size": "4Gi", "quotaBackendBytes": "1Gi"}), {})
    assert spec["quota_bytes"] == ep.GiB and not spec["problems"]


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
    problem = ep.version_problem(version)
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
    refusal = ep.run_refusal(found, name, namespace, **kw)
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
    problem = ep.version_change_problem(current, target, "3.5.26")
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
    warnings = ep.normalize_spec(obj(size=size), {})["warnings"]
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
    assert set(ep.ACT_STEPS) <= set(p)
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
    facts["pods"][2] = pod(2, phase="Pending", hash_="from-the-bad-spec", ready=False)
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    p = ep.plan(facts)
    assert p["ended"] == ["e-2"] and p["heal"] == ["e-2"] and p["roll"] == []
    facts["pods"][2] = pod(2, phase="Pending", ready=False)  # current Pod, still starting
    assert ep.plan(facts)["ended"] == []


def test_heal_does_not_wait_behind_a_refused_version_change():
    facts = healthy3(version="3.4.31")
    facts["pods"] = [pod(0), pod(1)]
    p = ep.plan(facts)
    assert p["heal"] == ["e-2"] and p["versions"]["e-2"] == "3.6.16", "healed on the version it ran"
    assert [r["reason"] for r in p["refusals"]] == ["UnsafeVersionChange"]
    assert p["roll"] == []


def test_heal_does_not_wait_behind_missing_tls_secrets():
    facts = healthy3(tls={"enabled": True, "secrets": {"peer": "p", "server": "s", "client": "c"}})
    facts["pods"] = [pod(0), pod(1)]
    facts["tls"] = {}
    p = ep.plan(facts)
    assert p["heal"] == ["e-2"]
    assert {r["field"] for r in p["refusals"]} == {
        "spec.tls.secrets.peer",
        "spec.tls.secrets.server",
        "spec.tls.secrets.client",
    }


# --- restore from a snapshot ---------------------------------------------------------------


def restoring(**spec: Any) -> dict[str, Any]:
    """An EtcdCluster whose first member EtcdRestore r1 writes (not created yet: no status)."""
    o = obj(status={}, **spec)
    o["metadata"]["annotations"] = {ep.ANN_RESTORE: "r1"}
    return o


def pending(n: int) -> dict[str, Any]:
    """A claim the restore Job is still writing: no member ID yet."""
    return claim(n, joined=False, **{ep.ANN_RESTORE_PENDING: "r1"})


ALL3 = ["e-0", "e-1", "e-2"]
BOOT3 = ",".join(f"e-{i}=https://e-{i}.{DOMAIN}:2380" for i in range(3))
SEED = f"e-0=https://e-0.{DOMAIN}:2380"


def boot(n: int, record: str = BOOT3) -> dict[str, Any]:
    """A claim made by an all-at-once bootstrap, its member not recorded yet."""
    return claim(n, joined=False, **{ep.ANN_INITIAL_CLUSTER: record})


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
            [boot(0), claim(1, joined=False, **{ep.ANN_INITIAL_STATE: "existing"})],
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
    o["metadata"]["annotations"] = {ep.ANN_BOOTSTRAP_STARTED: BOOT3}
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
        assert refused[0]["field"] == f"metadata.annotations[{ep.ANN_BOOTSTRAP_STARTED}]"
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
    plain = ep.pod_hash(ep.normalize_spec(facts["object"], {}), "3.6.16")
    facts["pods"] = [pod(i, hash_=plain) for i in range(len(facts["pods"]))]
    for m in facts["info"]["members"]:
        m["peer_urls"] = [u.replace("https://", "http://") for u in m["peer_urls"]]
        m["client_urls"] = [u.replace("https://", "http://") for u in m["client_urls"]]
    for v in facts["info"]["views"]:
        v["endpoint"] = v["endpoint"].replace("https://", "http://")
    for c in facts["claims"]:
        record = c["metadata"]["annotations"]
        record[ep.ANN_INITIAL_CLUSTER] = record[ep.ANN_INITIAL_CLUSTER].replace("https", "http")
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
    assert ep.agreement(facts["info"], CID)["ok"] is ok


def test_stale_pods_and_claims_go_only_when_an_agreeing_quorum_says_so():
    facts = healthy3()
    facts["claims"].append(claim(5))
    facts["pods"].append(pod(5))
    assert ep.plan(facts)["stale"] == ["e-5"]
    facts["info"]["views"] = facts["info"]["views"][:1]
    p = ep.plan(facts)
    assert p["stale"] == [] and "confirm the member list" in p["withheld"]


def test_the_recorded_cluster_id_comes_from_status_else_the_claims():
    assert ep.recorded_cluster_id(obj(), []) == CID
    assert ep.recorded_cluster_id(obj(status={}), [claim(0), claim(1)]) == CID
    assert ep.recorded_cluster_id(obj(status={}), [claim(0, joined=False)]) == ""


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
    facts["claims"][2]["metadata"]["annotations"][ep.ANN_REMOVING] = "scale-down"
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
    good = {"found": True, "type": "kubernetes.io/tls", "keys": list(ep.TLS_KEYS)}
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
    seen = ep.tls_seen(secrets, cluster)
    assert seen["peer"] == {
        "found": True,
        "type": "kubernetes.io/tls",
        "keys": ["ca.crt", "tls.crt", "tls.key"],
    }
    assert seen["client"] == {"found": False, "type": "", "keys": []}
    material = ep.tls_material(secrets, cluster)
    assert material == {"peer": {"tls.crt": "C", "tls.key": "K", "ca.crt": "A"}}


def test_own_tls_material_missing_is_planned_for_creation():
    facts = healthy3()
    facts["tls"] = {"ca": {"found": True}, "peer": {"found": True}}
    assert ep.plan(facts)["tls_missing"] == ["server", "client"]
    facts["object"]["spec"]["tls"] = {"enabled": False}
    assert ep.plan(facts)["tls_missing"] == []


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
    spec = ep.normalize_spec(
        obj(tls={"enabled": True, "secrets": {"peer": "p", "server": "s", "client": "c"}}), {}
    )
    problems = ep.tls_problems({"peer": seen}, spec, "e")
    assert problems[0]["reason"] == reason and words in problems[0]["message"]


# --- rolling -------------------------------------------------------------------------------


def minor_upgrade(*backups: dict[str, Any], annotation: str = "") -> dict[str, Any]:
    """A healthy 3.5 cluster whose spec asks for 3.6, with the EtcdBackups of its namespace."""
    facts = healthy3(version="3.6.16")
    if annotation:
        facts["object"]["metadata"]["annotations"] = {ep.ANN_UPGRADE_WITHOUT_SNAPSHOT: annotation}
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
            "labels": {ep.LABEL_BEFORE_UPGRADE: before} if before else {},
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
    assert p["roll"] == ["e-1", "e-2", "e-0"]
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
        assert ep.ANN_UPGRADE_WITHOUT_SNAPSHOT in p["refusals"][0]["message"]
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
    assert made["metadata"]["labels"][ep.LABEL_BEFORE_UPGRADE] == "3.6"
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
    assert p["roll"] == ["e-1", "e-2", "e-0"] and p["refusals"] == []
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
         f"lacks the label {ep.LABEL_BEFORE_UPGRADE}=3.6"),
        ("unlabelled, failed", "", "e", "Failed", False, "UpgradeSnapshotNameTaken",
         "lacks the label"),
        ("labelled for another minor", "3.5", "e", "Succeeded", False,
         "UpgradeSnapshotNameTaken", f"labelled {ep.LABEL_BEFORE_UPGRADE}=3.5, not 3.6"),
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


@pytest.mark.parametrize("cluster", ["e", "a" * 44, "b" * 50])
def test_the_before_upgrade_backup_name_leaves_room_for_its_jobs(cluster):
    name = ep.before_upgrade_name(cluster, "3.6")
    assert len(name) <= 52 and name.endswith("-before-3-6")
    assert name != ep.before_upgrade_name(cluster[:-1] + "z", "3.6")


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
    assert ep.plan(facts)["roll"] == ["e-1", "e-2", "e-0"]


def test_a_volume_grows_first_and_the_quota_follows_its_real_capacity():
    facts = healthy3(storage={"size": "2Gi"})
    p = ep.plan(facts)
    assert p["grow"] == ["e-0-data", "e-1-data", "e-2-data"]
    assert p["spec"]["quota_bytes"] == 320 * ep.MiB and p["roll"] == [], "not before the disk grew"


def test_no_roll_while_a_member_is_unhealthy():
    facts = healthy3(repository="registry.local/etcd")
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    p = ep.plan(facts)
    assert p["roll"] == [] and [r["reason"] for r in p["refusals"]] == ["RollBlocked"]


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
    o = ep._Observed({**healthy3(), "info": info([member(0), m, member(2)])})
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
    assert p["roll"] == ["e-0", "e-2", "e-1"] and p["transferee"] == "e-0"


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
    assert ep.unschedulable({"status": {"conditions": conditions}}) == said


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
        (False, True, False, ep.LAGGING_RECHECK),
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


def _node(ready: str = "True", renewed: str = "", found: bool = True) -> dict[str, Any]:
    return {"found": found, "ready": ready, "ready_since": "", "renewed": renewed}


def _on_nodes(facts: dict[str, Any], nodes: dict[str, dict[str, Any]] | None) -> dict[str, Any]:
    for i, p in enumerate(facts["pods"]):
        p["spec"] = {"nodeName": f"node{i}"}
    facts["nodes"] = nodes
    facts["observed_at"] = NOW
    return facts


@pytest.mark.parametrize(
    ("node1", "healthy", "timeout", "lost", "replaced"),
    [
        # Kubernetes counts the node Ready: a member down there is healed as any other.
        (_node(), False, None, {}, []),
        (_node("True", "2026-11-25T09:59:50Z"), False, None, {}, []),
        # Ready still (for 50 s), but its kubelet silent for 20 s: noticed, waited for.
        (_node("True", "2026-11-25T09:59:40Z"), False, None, {"e-1": 20.0}, []),
        # Not Ready for 40 s, 5 min allowed: noticed, waited for.
        (_node("Unknown", "2026-11-25T09:59:20Z"), False, None, {"e-1": 40.0}, []),
        # Past the timeout: replaced.
        (_node("Unknown", "2026-11-25T09:54:00Z"), False, None, {"e-1": 360.0}, ["e-1"]),
        (_node("False", "2026-11-25T09:59:20Z"), False, "30s", {"e-1": 40.0}, ["e-1"]),
        # 0: wait for the node for good.
        (_node("Unknown", "2026-11-25T08:00:00Z"), False, "0", {"e-1": 7200.0}, []),
        # The Node object is gone: nothing to wait for.
        (_node(found=False), False, None, {"e-1": None}, ["e-1"]),
        # etcd still counts the member healthy (only the API server lost the node): kept.
        (_node("Unknown", "2026-11-25T09:00:00Z"), True, None, {}, []),
    ],
)
def test_a_member_on_a_lost_node_is_waited_for_then_replaced(
    node1, healthy, timeout, lost, replaced
):
    facts = healthy3() if timeout is None else healthy3(nodeLossTimeout=timeout)
    facts["info"] = info([member(0), member(1, healthy=healthy), member(2)])
    _on_nodes(facts, {"node0": _node(), "node1": node1, "node2": _node()})
    p = ep.plan(facts)
    assert {n: v["seconds"] for n, v in p["node_lost"].items()} == lost
    assert [r["name"] for r in p["replace"]] == replaced
    if replaced:
        reason = p["replace"][0]["reason"]
        if lost["e-1"] is None:
            assert reason == "its node node1 no longer exists: there is no node left to wait for"
        else:
            assert "past spec.nodeLossTimeout" in reason, reason
    # Never healed or re-made in place: no kubelet would run it.
    assert p["heal"] == [] and p["ended"] == []


@pytest.mark.parametrize(
    ("node1", "unplaced_pod", "lost", "replaced", "refused"),
    [
        # The Pod is gone (the pod garbage collector deletes those of a deleted Node), and its
        # claim's volume lives on a node that no longer exists: replaced, never re-made.
        (_node(found=False), False, {"e-1": None}, ["e-1"], []),
        # The same, with a Pod re-made before that no node takes: not a scheduling problem.
        (_node(found=False), True, {"e-1": None}, ["e-1"], []),
        # The volume's node is down, the timeout not yet passed: waited for.
        (_node("Unknown", "2026-11-25T09:59:20Z"), False, {"e-1": 40.0}, [], []),
        # The volume's node is fine: a lost Pod is healed as ever, an unplaced one said.
        (_node(), False, {}, [], []),
        (_node(), True, {}, [], ["MemberUnschedulable"]),
    ],
)
def test_a_member_whose_volume_s_node_is_lost_is_judged_by_its_claim(
    node1, unplaced_pod, lost, replaced, refused
):
    facts = healthy3()
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    _on_nodes(facts, {"node0": _node(), "node1": node1, "node2": _node()})
    facts["claims"][1]["metadata"]["annotations"][ep.ANN_SELECTED_NODE] = "node1"
    if unplaced_pod:
        facts["pods"][1] = pod(1, phase="Pending", ready=False)
        facts["pods"][1]["status"]["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 node(s) had volume node affinity conflict.",
            }
        ]
    else:
        del facts["pods"][1]
    p = ep.plan(facts)
    assert {n: v["seconds"] for n, v in p["node_lost"].items()} == lost
    assert [r["name"] for r in p["replace"]] == replaced
    assert [r["reason"] for r in p["refusals"]] == refused
    assert p["heal"] == ([] if lost or unplaced_pod else ["e-1"])


def test_nodes_nobody_could_read_judge_no_member():
    facts = healthy3(nodeLossTimeout="1s")
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    _on_nodes(facts, None)
    p = ep.plan(facts)
    assert p["node_lost"] == {} and p["replace"] == []


def test_one_member_lost_with_its_node_at_a_time_and_never_without_quorum():
    gone = _node("Unknown", "2026-11-25T09:00:00Z")
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
    _on_nodes(
        facts,
        {"node0": _node(), "node1": _node("Unknown", "2026-11-25T09:59:00Z"), "node2": _node()},
    )
    p = ep.plan(facts)
    assert p["leaving"] == [] and list(p["node_lost"]) == ["e-1"]


def test_a_lost_node_is_reported_and_looked_at_again_when_due():
    facts = healthy3(nodeLossTimeout="2m")
    facts["info"] = info([member(0), member(1, healthy=False), member(2)])
    _on_nodes(
        facts,
        {"node0": _node(), "node1": _node("Unknown", "2026-11-25T09:59:30Z"), "node2": _node()},
    )
    r = ep.report(facts)
    degraded = r["conditions"]["Degraded"]
    assert degraded["reason"] == "NodeLost"
    assert (
        "e-1: its node node1 is not Ready (30 s without word from its kubelet)"
        in degraded["message"]
    )
    assert "replaced after 120 s (spec.nodeLossTimeout)" in degraded["message"]
    assert r["requeue_after"] == 91.0
    assert r["conditions"]["Available"]["status"] == "True"


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
    assert ep.node_loss_seconds(value) == seconds


def test_a_bad_node_loss_timeout_is_refused_naming_the_field():
    p = ep.plan(healthy3(nodeLossTimeout="soon"))
    assert [r["field"] for r in p["refusals"]] == ["spec.nodeLossTimeout"]
