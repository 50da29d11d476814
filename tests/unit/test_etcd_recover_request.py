"""Quorum-loss recovery as a person asks for it (etcd_runbook/rules/cluster/recover.py): the
table of requests read and refused, and of what is decided on each, in the order the rules
apply; then a sweep over every combination, holding the rules that keep data safe."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from etcd_runbook.rules import etcd_plan as ep
from etcd_runbook.rules.cluster import recover as rr
from etcd_runbook.rules.cluster.recovery import newest
from tests.filters import load_filter
from tests.unit.test_etcd_plan import healthy3
from tests.unit.test_etcd_recovery import lost_facts

CID = "c1d"
NAME = "e"
SHA = "a" * 64
AT = "2026-11-27T09:00:00Z"


def survivor(name: str, raft: int | None, rev: int | None) -> dict[str, Any]:
    return {
        "name": name,
        "id": f"a{name[-1]}",
        "raftIndex": raft,
        "revision": rev,
        "lastAnswered": AT if raft is not None else "2026-11-27T08:00:00Z",
    }


def lost(*survivors: dict[str, Any], gone: tuple[str, ...] = ("e-1", "e-2", "e-4")) -> dict:
    """`majority_lost` as recovery.plan_majority_lost makes it."""
    rows = sorted(survivors, key=lambda s: s["name"])
    return {
        "voters": len(rows) + len(gone),
        "needed": (len(rows) + len(gone)) // 2 + 1,
        "lost": sorted(gone),
        "survivors": rows,
        "newest": newest(rows),
    }


# Five voters, three lost: e-3 holds the most, e-0 lags it.
TWO = lost(survivor("e-0", 50, 38), survivor("e-3", 55, 40))
# e-0 is as new as e-3 (a tie goes to the first name), so either is the newest data.
LEVEL = lost(survivor("e-0", 55, 40), survivor("e-3", 55, 40))
# e-0 does not answer Status now; e-3 does.
SILENT = lost(survivor("e-0", None, None), survivor("e-3", 55, 40))
NONE_LEFT = lost(gone=("e-0", "e-1", "e-2"))


def backup(
    name: str = "nightly",
    cluster: str = NAME,
    sha256: str | None = SHA,
    snapshot_of: str | None = CID,
    deleting: bool = False,
    missing: bool = False,
    bucket: str = "etcd",
    etcd_version: str = "3.6.16",
) -> dict[str, Any]:
    """An EtcdBackup as the API returns it; `bucket` is where its spec says it writes."""
    last: dict[str, Any] = {
        "location": f"s3://etcd/{cluster}/snap-7.db",
        "revision": 36,
        "etcdVersion": etcd_version,
    }
    if sha256:
        last["sha256"] = sha256
    if snapshot_of:
        last["clusterID"] = snapshot_of
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = AT
    conditions = [{"type": "Available", "status": "False", "reason": "SnapshotMissing"}]
    return {
        "metadata": meta,
        "spec": {
            "clusterName": cluster,
            "destination": {
                "s3": {
                    "endpoint": "http://127.0.0.1:9000",
                    "bucket": bucket,
                    "credentialsSecret": "s3-creds",
                }
            },
        },
        "status": {"lastSnapshot": last, "conditions": conditions if missing else []},
    }


def run(
    text: str,
    cluster_id: str = CID,
    quorum: bool = False,
    majority_lost: dict[str, Any] | None = None,
    backups: tuple[dict[str, Any], ...] = (backup(),),
    done: tuple[str, ...] = (),
    version: str = "3.6.16",
) -> rr.Decision:
    return rr.decide(
        rr.parse_request(text),
        cluster_id=cluster_id,
        cluster_name=NAME,
        quorum_answers=quorum,
        majority_lost=TWO if majority_lost is None else majority_lost,
        backups=list(backups),
        done=list(done),
        version=version,
    )


# --- reading the request --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("member=e-3 clusterID=c1d", rr.RecoverRequest("e-3", "", "c1d")),
        ("clusterID=c1d member=e-3", rr.RecoverRequest("e-3", "", "c1d")),
        (
            "backup=nightly clusterID=c1d acceptOlder=true",
            rr.RecoverRequest("", "nightly", CID, True),
        ),
        # Spaces, tabs and newlines separate alike (a YAML block scalar), and leading zeros
        # are dropped as status.clusterID drops them.
        ("  member=e-0\n\tclusterID=000c1d  acceptOlder=false ", rr.RecoverRequest("e-0", "", CID)),
        (
            "backup=nightly.v2 clusterID=ffffffffffffffff",
            rr.RecoverRequest("", "nightly.v2", "f" * 16),
        ),
    ],
    ids=["member", "any-order", "backup-accept-older", "whitespace-and-zeros", "widest-id"],
)
def test_a_request_is_read(text, expected):
    assert rr.parse_request(text) == expected


@pytest.mark.parametrize(
    "text, field, words",
    [
        ("", "member", "neither member nor backup is given"),
        ("clusterID=c1d", "member", "neither member nor backup is given"),
        ("member=e-0 backup=nightly clusterID=c1d", "member", "both member and backup are given"),
        ("member=e-0", "clusterID", "clusterID is missing: say which cluster"),
        (
            "member=e-0 clusterID=xyz",
            "clusterID",
            'recover-quorum: clusterID "xyz" is not a cluster ID (hex, as status.clusterID '
            "shows it)",
        ),
        ("member=e-0 clusterID=C1D", "clusterID", 'clusterID "C1D" is not a cluster ID'),
        ("member=e-0 clusterID=" + "1" * 17, "clusterID", "etcdctl -w json prints it in decimal"),
        ("member=e-0 clusterID=" + "a" * 17, "clusterID", "is not a cluster ID"),
        (
            "member=e-0 clusterId=c1d",
            "clusterId",
            'unknown key "clusterId" (did you mean clusterID?)',
        ),
        (
            "member=e-0 clusterID=c1d force=true",
            "force",
            'unknown key "force"; the keys are member',
        ),
        ("member=e-0 member=e-3 clusterID=c1d", "member", "member is given twice"),
        ("member= clusterID=c1d", "member", "member is empty; write member=<a survivor"),
        ("member=e-0 clusterID=", "clusterID", "clusterID is empty; write clusterID=<the cluster"),
        ("member=e-0 clusterID=c1d acceptOlder=yes", "acceptOlder", "neither true nor false"),
        ("member=e-0 clusterID=c1d acceptOlder=True", "acceptOlder", '"True" is neither true'),
        ("member=e-0 clusterID=c1d acceptOlder", "acceptOlder", "write acceptOlder=true"),
        ("e-0 c1d", "request", '"e-0" is not key=value; write member=<survivor>'),
        ("member=E_0 clusterID=c1d", "member", '"E_0" is not a Kubernetes name'),
        ("backup={{lookup('pipe','id')}} clusterID=c1d", "backup", "is not a Kubernetes name"),
    ],
    ids=[
        "empty",
        "no-source",
        "both-sources",
        "no-cluster-id",
        "cluster-id-not-hex",
        "cluster-id-upper-case",
        "cluster-id-decimal",
        "cluster-id-too-long",
        "key-misspelt",
        "key-unknown",
        "key-repeated",
        "member-empty",
        "cluster-id-empty",
        "accept-older-yes",
        "accept-older-capital",
        "accept-older-bare",
        "not-pairs",
        "member-not-a-name",
        "backup-a-template",
    ],
)
def test_a_malformed_request_names_its_key_and_what_is_expected(text, field, words):
    with pytest.raises(rr.RequestError) as raised:
        rr.parse_request(text)
    assert raised.value.field == field
    assert words in raised.value.message
    assert str(raised.value) == raised.value.message
    assert raised.value.message.startswith("recover-quorum: ")


def test_a_long_value_is_shown_cut_short():
    with pytest.raises(rr.RequestError) as raised:
        rr.parse_request("member=" + "X" * 5000 + " clusterID=c1d")
    assert '"' + "X" * 64 + '..."' in raised.value.message
    assert len(raised.value.message) < 300


# --- the fingerprint of a request carried out -----------------------------------------------


def test_the_fingerprint_is_stable_and_the_same_for_every_spelling_of_a_request():
    spellings = [
        "member=e-3 clusterID=c1d",
        "clusterID=0c1d member=e-3 acceptOlder=false",
        "\tmember=e-3\n clusterID=c1d ",
    ]
    assert {rr.parse_request(s).fingerprint() for s in spellings} == {"41f163a9caa15619"}
    assert rr.parse_request(spellings[1]).normalised() == "member=e-3 clusterID=c1d"


@pytest.mark.parametrize(
    "other",
    [
        "member=e-0 clusterID=c1d",
        "member=e-3 clusterID=c1e",
        "member=e-3 clusterID=c1d acceptOlder=true",
        "backup=e-3 clusterID=c1d",
    ],
    ids=["member", "cluster-id", "accept-older", "backup-of-the-same-name"],
)
def test_another_request_has_another_fingerprint(other):
    base = rr.parse_request("member=e-3 clusterID=c1d").fingerprint()
    assert rr.parse_request(other).fingerprint() != base


# --- the decision ---------------------------------------------------------------------------

ASK_NEWEST = "member=e-3 clusterID=c1d"
ASK_OLDER = "member=e-0 clusterID=c1d"
ASK_BACKUP = "backup=nightly clusterID=c1d"
NOT_LOST: dict[str, Any] = {}


@pytest.mark.parametrize(
    "text, kw, action, reason, words",
    [
        # A survivor as the source.
        (ASK_NEWEST, {}, "from_member", "FromNewestSurvivor", "member=e-3 (raft index 55"),
        (ASK_OLDER, {"majority_lost": LEVEL}, "from_member", "FromNewestSurvivor", "newest"),
        (ASK_OLDER, {}, "refuse", "NotNewest", "older than e-3's raft index 55"),
        (ASK_OLDER + " acceptOlder=true", {}, "from_member", "FromOlderSurvivor", "older than e-3"),
        ("member=e-1 clusterID=c1d", {}, "refuse", "NotASurvivor", "member=e-1 lost its data"),
        ("member=e-7 clusterID=c1d", {}, "refuse", "NotASurvivor", "the survivors are e-0, e-3"),
        (
            ASK_OLDER,
            {"majority_lost": NONE_LEFT},
            "refuse",
            "NotASurvivor",
            "no member survives: ask for backup=",
        ),
        (ASK_OLDER, {"majority_lost": SILENT}, "refuse", "NoAnswer", "last answered 2026-11-27T08"),
        (ASK_OLDER + " acceptOlder=true", {"majority_lost": SILENT}, "refuse", "NoAnswer", ""),
        # A backup as the source.
        (ASK_BACKUP, {"majority_lost": NONE_LEFT}, "from_backup", "FromBackup", "revision 36"),
        (ASK_BACKUP + " acceptOlder=true", {}, "from_backup", "FromBackup", "over the survivors"),
        (ASK_BACKUP, {}, "refuse", "SurvivorExists", "Name member=e-3, or add acceptOlder=true"),
        (
            "backup=weekly clusterID=c1d",
            {"majority_lost": NONE_LEFT},
            "refuse",
            "BackupNotFound",
            "no EtcdBackup weekly in this namespace",
        ),
        (
            ASK_BACKUP,
            {"majority_lost": NONE_LEFT, "backups": (backup(deleting=True),)},
            "refuse",
            "BackupNotFound",
            "being deleted",
        ),
        (
            ASK_BACKUP,
            {"majority_lost": NONE_LEFT, "backups": (backup(cluster="other"),)},
            "refuse",
            "BackupOfAnotherCluster",
            "backs up EtcdCluster other (its spec.clusterName)",
        ),
        (
            ASK_BACKUP,
            {"majority_lost": NONE_LEFT, "backups": (backup(snapshot_of="b0b"),)},
            "refuse",
            "BackupOfAnotherCluster",
            "cluster ID b0b (its status.lastSnapshot.clusterID)",
        ),
        (
            ASK_BACKUP,
            {"majority_lost": NONE_LEFT, "backups": (backup(snapshot_of=None),)},
            "from_backup",
            "FromBackup",
            "",
        ),
        (
            ASK_BACKUP,
            {"majority_lost": NONE_LEFT, "backups": (backup(sha256=None),)},
            "refuse",
            "BackupNotVerified",
            "status.lastSnapshot has no sha256",
        ),
        (
            ASK_BACKUP,
            {"majority_lost": NONE_LEFT, "backups": (backup(missing=True),)},
            "refuse",
            "BackupSnapshotMissing",
            "says SnapshotMissing",
        ),
        # What the restore runbook would refuse, refused before anything is fenced.
        (
            ASK_BACKUP,
            {"majority_lost": NONE_LEFT, "backups": (backup(bucket="moved"),)},
            "refuse",
            "BackupNotRestorable",
            "is not in its bucket moved (its destination changed since)",
        ),
        (
            ASK_BACKUP,
            {"majority_lost": NONE_LEFT, "backups": (backup(etcd_version="3.4.37"),)},
            "refuse",
            "BackupVersionMismatch",
            "snapshot of etcd 3.4.37, which spec.version 3.6.16 cannot start on",
        ),
        (
            ASK_BACKUP,
            {"majority_lost": NONE_LEFT, "backups": (backup(etcd_version="3.5.21"),)},
            "from_backup",
            "FromBackup",
            "",
        ),
        # The cluster, and its state.
        ("member=e-3 clusterID=b0b", {}, "refuse", "ClusterIDMismatch", "status.clusterID is c1d"),
        ("member=e-3 clusterID=00c1d", {}, "from_member", "FromNewestSurvivor", ""),
        (ASK_NEWEST, {"cluster_id": ""}, "refuse", "ClusterIDUnknown", "status.clusterID is empty"),
        (ASK_NEWEST, {"quorum": True, "majority_lost": NOT_LOST}, "refuse", "QuorumAnswers", ""),
        (ASK_NEWEST, {"majority_lost": NOT_LOST}, "refuse", "NotMajorityLost", "come back on"),
        # The order of the rules: the first that refuses is said.
        ("member=e-3 clusterID=b0b", {"quorum": True}, "refuse", "ClusterIDMismatch", ""),
        (
            "member=e-3 clusterID=b0b",
            {"majority_lost": NOT_LOST},
            "refuse",
            "ClusterIDMismatch",
            "",
        ),
        ("member=e-1 clusterID=c1d", {"quorum": True}, "refuse", "QuorumAnswers", ""),
        (
            "backup=weekly clusterID=c1d",
            {"majority_lost": NOT_LOST},
            "refuse",
            "NotMajorityLost",
            "",
        ),
        ("backup=weekly clusterID=c1d", {}, "refuse", "SurvivorExists", "e-0, e-3 keep their data"),
        # Carried out already: after a recovery the cluster has a new ID and a quorum answers,
        # and the request left in place is done, not refused.
        (
            ASK_NEWEST,
            {"done": ("41f163a9caa15619",), "cluster_id": "d00d", "quorum": True},
            "done",
            "AlreadyDone",
            "was carried out already",
        ),
    ],
    ids=[
        "newest-survivor",
        "survivor-level-with-newest",
        "older-survivor",
        "older-survivor-accepted",
        "lost-member",
        "not-a-member",
        "no-survivor",
        "silent-survivor",
        "silent-survivor-accept-older",
        "backup-none-survives",
        "backup-over-survivors-accepted",
        "backup-while-a-survivor-exists",
        "backup-not-found",
        "backup-being-deleted",
        "backup-of-another-cluster",
        "backup-snapshot-of-another-cluster-id",
        "backup-snapshot-without-cluster-id",
        "backup-not-verified",
        "backup-snapshot-missing",
        "backup-moved",
        "backup-of-an-etcd-too-old",
        "backup-of-the-minor-before",
        "cluster-id-mismatch",
        "cluster-id-leading-zeros",
        "cluster-id-unknown",
        "quorum-answers",
        "members-merely-down",
        "mismatch-before-quorum",
        "mismatch-before-not-majority-lost",
        "quorum-before-not-a-survivor",
        "not-majority-lost-before-backup-not-found",
        "survivor-before-backup-not-found",
        "done-before-everything",
    ],
)
def test_decide(text, kw, action, reason, words):
    d = run(text, **kw)
    assert (d.action, d.reason) == (action, reason), d.message
    assert words in d.message
    assert d.message.startswith("recover-quorum: ")
    assert d.fingerprint == rr.parse_request(text).fingerprint()


def test_a_survivor_recovery_says_what_it_starts_from_and_what_is_left_behind():
    d = run(ASK_OLDER + " acceptOlder=true")
    assert (d.source, d.raft_index, d.revision, d.newest) == ("e-0", 50, 38, "e-3")
    assert d.lost == (
        rr.LeftBehind("e-1", data_lost=True),
        rr.LeftBehind("e-2", data_lost=True),
        rr.LeftBehind("e-3", False, 55, 40),
        rr.LeftBehind("e-4", data_lost=True),
    )
    assert d.message.endswith(
        "left behind: e-1 (data lost), e-2 (data lost), e-3 (raft index 55, revision 40), "
        "e-4 (data lost)"
    )


def test_a_backup_recovery_leaves_every_member_behind():
    d = run(ASK_BACKUP + " acceptOlder=true", majority_lost=SILENT)
    assert (d.source, d.raft_index, d.revision, d.newest) == ("nightly", None, 36, "e-3")
    assert [m.name for m in d.lost] == ["e-0", "e-1", "e-2", "e-3", "e-4"]
    assert "e-0 (not answering)" in d.message
    assert "s3://etcd/e/snap-7.db" in d.message


def test_the_plan_s_own_majority_lost_is_what_is_decided_on():
    # Three members, two claims gone: e-0 survives and answers (rules/cluster/recovery.py).
    majority_lost = ep.plan(lost_facts({1: "claim", 2: "claim"}, {0: (40, 30)}))["majority_lost"]
    d = run("member=e-0 clusterID=c1d", majority_lost=majority_lost)
    assert (d.action, d.reason, d.raft_index, d.revision) == (
        "from_member",
        "FromNewestSurvivor",
        40,
        30,
    )
    assert [m.name for m in d.lost] == ["e-1", "e-2"]
    d = run("backup=nightly clusterID=c1d", majority_lost=majority_lost)
    assert d.reason == "SurvivorExists" and "e-0 keeps its data" in d.message


# --- every combination ----------------------------------------------------------------------

REQUESTS = [
    f"{source} clusterID={cid}{older}"
    for source in ("member=e-0", "member=e-1", "member=e-3", "backup=nightly", "backup=weekly")
    for cid in ("c1d", "b0b")
    for older in ("", " acceptOlder=true")
]
STATES = {
    "two": TWO,
    "level": LEVEL,
    "silent": SILENT,
    "none-left": NONE_LEFT,
    "not-lost": NOT_LOST,
}
BACKUPS = [
    (backup(),),
    (backup(cluster="other"),),
    (backup(snapshot_of="b0b"),),
    (backup(sha256=None),),
    (backup(missing=True),),
    (backup(bucket="moved"),),
    (backup(etcd_version="3.4.37"),),
    (),
]
# What a refusal may point a person to: a key of the request, or a status field.
POINTERS = ("member=", "backup=", "clusterID", "acceptOlder", "status.")
REASONS = {
    "ClusterIDUnknown",
    "ClusterIDMismatch",
    "QuorumAnswers",
    "NotMajorityLost",
    "NotASurvivor",
    "NoAnswer",
    "NotNewest",
    "SurvivorExists",
    "BackupNotFound",
    "BackupOfAnotherCluster",
    "BackupNotVerified",
    "BackupSnapshotMissing",
    "BackupNotRestorable",
    "BackupVersionMismatch",
}


def test_every_combination_keeps_the_rules_that_keep_data():
    seen = set()
    grid = itertools.product(REQUESTS, ("c1d", ""), (False, True), STATES.items(), BACKUPS)
    for text, cluster_id, quorum, (state, majority_lost), backups in grid:
        if quorum and majority_lost:
            continue  # the plan never says a majority's data is lost while a quorum answers
        request = rr.parse_request(text)
        d = run(text, cluster_id, quorum, majority_lost, backups)
        case = f"{text!r} on {cluster_id or 'no ID'}, quorum={quorum}, {state}: {d}"
        seen.add(d.reason)
        if d.action == "refuse":
            assert d.reason in REASONS, case
            assert any(p in d.message for p in POINTERS), case
            assert (d.source, d.lost, d.raft_index) == ("", (), None), case
            continue
        # A recovery only on this cluster, without a quorum, with a majority's data gone.
        assert request.cluster_id == cluster_id and not quorum and majority_lost, case
        lost_names = set(majority_lost["lost"])
        survivors = {s["name"]: s for s in majority_lost["survivors"]}
        assert d.source not in {m.name for m in d.lost}, case
        assert {m.name for m in d.lost} | {d.source} >= lost_names | set(survivors), case
        if d.action == "from_member":
            # Never a lost member, never one whose data is unknown, the newest unless asked.
            chosen = survivors[d.source]
            assert d.source not in lost_names and chosen["raftIndex"] is not None, case
            best = survivors[majority_lost["newest"]]
            older = (chosen["raftIndex"], chosen["revision"]) < (
                best["raftIndex"],
                best["revision"],
            )
            assert request.accept_older or not older, case
        else:
            assert request.accept_older or not survivors, case
            assert d.revision == 36, case
    assert seen >= REASONS | {"FromNewestSurvivor", "FromOlderSurvivor", "FromBackup"}


# --- the request on the EtcdCluster, through the plan and the report ------------------------


def annotated(facts: dict[str, Any], value: str | None) -> dict[str, Any]:
    if value is not None:
        facts["object"]["metadata"]["annotations"] = {rr.ANN_RECOVER_QUORUM: value}
    return facts


def majority_lost() -> dict[str, Any]:
    return lost_facts({1: "claim", 2: "claim"}, {0: (40, 30)})


def healthy() -> dict[str, Any]:
    return healthy3()


@pytest.mark.parametrize(
    "facts, value, action, reason, event",
    [
        (majority_lost, None, None, None, None),
        (
            majority_lost,
            f"member=e-0 clusterID={CID}",
            "from_member",
            "FromNewestSurvivor",
            "RecoveryChosen",
        ),
        (
            majority_lost,
            "member=e-0 clusterID=b0b",
            "refuse",
            "ClusterIDMismatch",
            "RecoveryRefused",
        ),
        (majority_lost, f"member=e-1 clusterID={CID}", "refuse", "NotASurvivor", "RecoveryRefused"),
        (majority_lost, "member=e-0", "refuse", "RequestInvalid", "RecoveryRefused"),
        (
            majority_lost,
            f"backup=nightly clusterID={CID}",
            "refuse",
            "SurvivorExists",
            "RecoveryRefused",
        ),
        (
            majority_lost,
            f"backup=nightly clusterID={CID} acceptOlder=true",
            "refuse",
            "BackupNotFound",
            "RecoveryRefused",
        ),
        (healthy, f"member=e-0 clusterID={CID}", "refuse", "QuorumAnswers", "RecoveryRefused"),
    ],
)
def test_the_request_is_decided_on_each_run_and_recorded_in_status(
    facts, value, action, reason, event
):
    r = ep.report(annotated(facts(), value))
    recovery = r["status"]["recovery"]
    events = [e for e in r["events"] if e["reason"].startswith("Recovery")]
    if action is None:
        assert recovery is None and events == []
        return
    assert (recovery["action"], recovery["reason"]) == (action, reason), recovery
    assert recovery["message"].startswith("recover-quorum: ")
    assert events == [{"type": "Warning", "reason": event, "message": recovery["message"]}]


def test_a_chosen_survivor_is_recorded_with_what_is_left_behind_and_carried_out():
    facts = annotated(majority_lost(), f"member=e-0 clusterID={CID}")
    recovery = ep.report(facts)["status"]["recovery"]
    assert recovery["asked"] == f"member=e-0 clusterID={CID}"
    assert (recovery["source"], recovery["raftIndex"], recovery["revision"]) == ("e-0", 40, 30)
    assert recovery["leftBehind"] == [
        {"name": "e-1", "dataLost": True, "raftIndex": None, "revision": None},
        {"name": "e-2", "dataLost": True, "raftIndex": None, "revision": None},
    ]
    # Carried out from this run on: the first step fences every claim there is.
    assert (recovery["carriedOut"], recovery["phase"]) == (True, "Fencing")
    fingerprint = recovery["fingerprint"]
    assert ep.plan(facts)["fence"] == [{"name": "e-0", "reason": f"recovery {fingerprint} source"}]


def test_a_chosen_survivor_waits_while_the_cluster_is_paused():
    facts = annotated(majority_lost(), f"member=e-0 clusterID={CID}")
    facts["object"]["spec"]["paused"] = True
    recovery = ep.report(facts)["status"]["recovery"]
    assert (recovery["action"], recovery["carriedOut"]) == ("from_member", False)
    assert "Nothing is done while spec.paused is true" in recovery["message"]
    assert ep.plan(facts)["fence"] == [] and ep.plan(facts)["recover"] == {}


def test_a_chosen_backup_with_no_claim_left_to_fence_is_restored_in_the_same_run():
    facts = annotated(
        lost_facts({0: "claim", 1: "claim", 2: "claim"}, {}),
        f"backup=nightly clusterID={CID}",
    )
    facts["backups"] = [backup("nightly")]
    facts["options"] = {"image": "operator:1.2.3"}
    recovery = ep.report(facts)["status"]["recovery"]
    assert (recovery["action"], recovery["phase"], recovery["carriedOut"]) == (
        "from_backup",
        "Restoring",
        True,
    ), recovery
    recover = ep.plan(facts)["recover"]
    assert (recover["seed"], recover["backup"], recover["from"]["kind"]) == ("e-0", "nightly", "s3")
    # Paused, the same decision is recorded and nothing is done.
    facts["object"]["spec"]["paused"] = True
    recovery = ep.report(facts)["status"]["recovery"]
    assert (recovery["action"], recovery["carriedOut"]) == ("from_backup", False), recovery
    assert "Nothing is done while spec.paused is true" in recovery["message"]
    assert ep.plan(facts)["recover"] == {}


def test_a_request_that_cannot_be_read_names_the_annotation_and_its_key():
    recovery = ep.report(annotated(majority_lost(), "member=e-0 clusterId=c1d"))["status"][
        "recovery"
    ]
    assert recovery["field"] == f"metadata.annotations[{rr.ANN_RECOVER_QUORUM}] clusterId"
    assert "did you mean clusterID?" in recovery["message"]


@pytest.mark.parametrize(
    "facts, value",
    [
        (facts, value)
        for facts in (majority_lost, healthy)
        for value in (f"member=e-0 clusterID={CID}", "member=e-0", f"backup=b clusterID={CID}")
        # A survivor chosen while a majority is lost is carried out (test_etcd_recover_steps.py).
        if (facts, value) != (majority_lost, f"member=e-0 clusterID={CID}")
    ],
)
def test_a_request_changes_nothing_else_the_run_decides(facts, value):
    """A request left in place, read or not, refused (or, for a backup, only recorded), never
    holds up healing or scaling, and never turns the run into a failed one. A survivor chosen
    is carried out (test_etcd_recover_steps.py)."""
    plain, asked = facts(), annotated(facts(), value)
    p, q = ep.plan(plain), ep.plan(asked)
    assert {k: v for k, v in q.items() if k != "recovery"} == {
        k: v for k, v in p.items() if k != "recovery"
    }
    r, s = ep.report(plain), ep.report(asked)
    assert (s["failed"], s["phase"], s["conditions"]) == (r["failed"], r["phase"], r["conditions"])


# --- a request given by hand: playbooks/etcd-recover-quorum.yml --------------------------------

recover_request = load_filter("etcd_recover").recover_request


def asked(**pairs: Any) -> dict[str, Any]:
    """The pairs the playbook hands the filter: every key, empty when not given."""
    return {"member": "", "backup": "", "clusterID": "", "acceptOlder": False, **pairs}


@pytest.mark.parametrize(
    "pairs, expected",
    [
        (asked(member="e-0", clusterID=CID), f"member=e-0 clusterID={CID}"),
        (asked(member="e-0", clusterID="00" + CID), f"member=e-0 clusterID={CID}"),
        (
            asked(member="e-0", clusterID=CID, acceptOlder=True),
            f"member=e-0 clusterID={CID} acceptOlder=true",
        ),
        (asked(backup="nightly", clusterID=CID), f"backup=nightly clusterID={CID}"),
    ],
)
def test_a_request_given_by_hand_is_normalised(pairs, expected):
    assert recover_request(pairs) == expected


@pytest.mark.parametrize(
    "pairs, key",
    [
        (asked(clusterID=CID), "neither member nor backup"),
        (asked(member="e-0", backup="nightly", clusterID=CID), "both member and backup"),
        (asked(member="E_0", clusterID=CID), "member"),
        (asked(backup="Nightly", clusterID=CID), "backup"),
        (asked(member="e-0"), "clusterID is missing"),
        (asked(member="e-0", clusterID="12345678901234567890"), "clusterID"),
        # A value is one pair's: a space would let it say another key.
        (asked(member="e-0 acceptOlder=true", clusterID=CID), "member"),
        (asked(member="e-0", clusterID=f"{CID} backup=b"), "clusterID"),
    ],
)
def test_a_request_given_by_hand_that_cannot_be_read_names_its_key(pairs, key):
    with pytest.raises(AnsibleFilterError, match=f"^recover-quorum: {key}"):
        recover_request(pairs)


def test_a_request_passed_to_the_run_is_decided_in_preference_to_the_annotation():
    facts = annotated(majority_lost(), "member=e-0 clusterID=b0b")
    facts["options"] = {"recover_quorum": f"member=e-0 clusterID={CID}"}
    recovery = ep.report(facts)["status"]["recovery"]
    assert (recovery["asked"], recovery["action"]) == (f"member=e-0 clusterID={CID}", "from_member")
    # Empty: the annotation's, as without the option.
    facts["options"] = {"recover_quorum": ""}
    assert ep.report(facts)["status"]["recovery"]["reason"] == "ClusterIDMismatch"


def test_a_request_passed_to_the_run_is_decided_without_an_annotation():
    facts = majority_lost()
    facts["options"] = {"recover_quorum": "member=e-0 clusterId=c1d"}
    recovery = ep.report(facts)["status"]["recovery"]
    assert (recovery["action"], recovery["field"]) == ("refuse", "options.recover_quorum clusterId")
