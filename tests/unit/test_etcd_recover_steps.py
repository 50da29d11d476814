"""A quorum recovery from a survivor or from an EtcdBackup carried out
(etcd_runbook/rules/cluster/recover_steps.py): each phase as the claims, Pods and Jobs of a
run show it, what that run does and holds back, and what status and Events say. Walked in the
order a recovery goes, each row the look a run cut short there would take up from."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from etcd_runbook.names import (
    ANN_BOOTSTRAP_STARTED,
    ANN_CLUSTER_ID,
    ANN_FENCED,
    ANN_MEMBER_ID,
    ANN_RECOVER_QUORUM,
    ANN_RECOVERY,
    ANN_RESTORE_PENDING,
    LABEL_RECOVERY,
)
from etcd_runbook.rules import etcd_plan as ep
from etcd_runbook.rules.cluster.recover import parse_request
from etcd_runbook.rules.cluster.recover_steps import HELD
from etcd_runbook.rules.etcd_manifests import recovery_objects
from tests.unit.test_etcd_plan import CID, claim, info, member, pod, view
from tests.unit.test_etcd_recover_request import SHA, backup
from tests.unit.test_etcd_recovery import lost_facts

REQUEST = f"member=e-0 clusterID={CID}"
FP = parse_request(REQUEST).fingerprint()
NEW_ID = "beef"
IMAGE = "operator:1.2.3"


def asked(facts: dict[str, Any]) -> dict[str, Any]:
    # Every member was started by a bootstrap once: the record stays on the EtcdCluster.
    facts["object"]["metadata"]["annotations"] = {
        ANN_RECOVER_QUORUM: REQUEST,
        ANN_BOOTSTRAP_STARTED: ",".join(f"e-{i}=https://e-{i}:2380" for i in range(3)),
    }
    facts["options"] = {"image": IMAGE}
    return facts


def chosen() -> dict[str, Any]:
    """e-1 and e-2 lost their claims; e-0 survives, answers, and is asked for."""
    return asked(lost_facts({1: "claim", 2: "claim"}, {0: (40, 30)}))


def fenced(facts: dict[str, Any], pods: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The look after the fencing run: e-0's claim fenced as the source, its Pod as given (by
    default gone), etcd silent, status recording the decision."""
    facts = copy.deepcopy(facts)
    decided = ep.report(facts)["status"]["recovery"]
    facts["object"]["status"]["recovery"] = decided
    facts["claims"][0]["metadata"]["annotations"][ANN_FENCED] = f"recovery {FP} source"
    facts["pods"] = pods or []
    facts["info"] = {}
    return facts


def seeded(facts: dict[str, Any], pending: bool = True, recorded: bool = False) -> dict[str, Any]:
    """The first member's claim, e-1, as the Restoring run made it."""
    facts = copy.deepcopy(facts)
    c = claim(1, joined=recorded)
    c["metadata"]["annotations"][ANN_RECOVERY] = f"{FP} {CID}"
    if pending:
        c["metadata"]["annotations"][ANN_RESTORE_PENDING] = FP
    if recorded:
        c["metadata"]["annotations"][ANN_CLUSTER_ID] = NEW_ID
    facts["claims"].append(c)
    return facts


def job(state: str) -> dict[str, Any]:
    conditions = {
        "Active": [],
        "Failed": [{"type": "Failed", "status": "True"}],
        "Complete": [{"type": "Complete", "status": "True"}],
    }[state]
    return {
        "metadata": {
            "name": f"e-recover-{FP[:10]}",
            "uid": "job-1",
            "labels": {LABEL_RECOVERY: FP},
            "ownerReferences": [{"uid": "u-123456789", "controller": True}],
        },
        "status": {"conditions": conditions},
    }


def failed_pod() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "j-1",
            "labels": {"job-name": f"e-recover-{FP[:10]}"},
            "ownerReferences": [{"uid": "job-1", "controller": True}],
        },
        "status": {
            "initContainerStatuses": [
                {
                    "name": "fetch",
                    "state": {"terminated": {"exitCode": 2, "message": "SnapshotCorrupt: torn"}},
                }
            ]
        },
    }


def with_job(facts: dict[str, Any], state: str) -> dict[str, Any]:
    facts = copy.deepcopy(facts)
    facts["recovery_jobs"] = [job(state)]
    facts["recovery_pods"] = [failed_pod()] if state == "Failed" else []
    return facts


def answering(facts: dict[str, Any]) -> dict[str, Any]:
    """The first member runs and answers alone, under the new cluster ID."""
    facts = copy.deepcopy(facts)
    facts["pods"] = [pod(1)]
    i = info([member(1)], leader=1, views=[view(1, [1], cluster=NEW_ID)])
    i["cluster_id"] = NEW_ID
    facts["info"] = i
    return facts


def recovery_of(facts: dict[str, Any]) -> dict[str, Any]:
    return ep.report(facts)["status"]["recovery"] or {}


def test_the_run_that_chooses_fences_every_claim_and_acts_alone():
    facts = chosen()
    p, r = ep.plan(facts), ep.report(facts)
    assert p["fence"] == [{"name": "e-0", "reason": f"recovery {FP} source"}]
    assert p["recover"] == {"fingerprint": FP, "stop": []}
    assert all(p[k] == [] for k in HELD if k in p)
    recovery = r["status"]["recovery"]
    assert (recovery["phase"], recovery["reason"], recovery["carriedOut"]) == (
        "Fencing",
        "FromNewestSurvivor",
        True,
    )
    assert [e["reason"] for e in r["events"] if e["reason"].startswith("Recover")] == [
        "RecoveryChosen"
    ]


@pytest.mark.parametrize(
    "look, phase, recover",
    [
        # Its Pod still stops: nothing but waiting (a Pod not yet deleted is stopped again).
        (lambda: fenced(chosen(), [pod(0, deleting=True)]), "Stopping", {"stop": []}),
        (lambda: fenced(chosen(), [pod(0)]), "Stopping", {"stop": ["e-0"]}),
        # Every Pod gone: the first member's claim under the lowest free name, and the Job.
        (
            lambda: fenced(chosen()),
            "Restoring",
            {
                "seed": "e-1",
                "from": {"kind": "member", "claim": "e-0-data"},
                "backup": "",
                "cluster_id": CID,
                "image": IMAGE,
                "deadline": 3600,
                "claim": True,
                "job": True,
            },
        ),
        # The claim made, its Job not (a run cut short between the two).
        (
            lambda: seeded(fenced(chosen())),
            "Restoring",
            {
                "seed": "e-1",
                "from": {"kind": "member", "claim": "e-0-data"},
                "backup": "",
                "cluster_id": CID,
                "image": IMAGE,
                "deadline": 3600,
                "claim": False,
                "job": True,
            },
        ),
        (lambda: with_job(seeded(fenced(chosen())), "Active"), "Restoring", {}),
        (
            lambda: with_job(seeded(fenced(chosen())), "Complete"),
            "Starting",
            {"release": "e-1"},
        ),
        (
            lambda: with_job(seeded(fenced(chosen())), "Failed"),
            "Failed",
            {},
        ),
    ],
)
def test_each_phase_as_the_claims_pods_and_job_show_it(look, phase, recover):
    facts = look()
    p, r = ep.plan(facts), ep.report(facts)
    assert p["recover"] == {"fingerprint": FP, **recover}
    assert r["status"]["recovery"]["phase"] == phase
    assert r["conditions"]["Available"]["reason"] == "Recovering"
    assert r["phase"] == "Recovering"
    # Nothing of the recovery's Job queues a run: the next look is asked for (but not after
    # a failure, which waits for a person).
    assert r["requeue_after"] == (None if phase == "Failed" else 5.0)
    # Progress is no failed run (which would back off), a failure is.
    assert r["failed"] is (phase == "Failed")
    # While the recovery acts alone, nothing else is healed, added, bootstrapped or rolled.
    assert all(p[k] == [] for k in HELD if k in p) and p["bootstrap"] == []
    # Nothing refused: the bootstrap's members gone is the recovery's business now.
    assert p["refusals"] == [], p["refusals"]


def test_a_failed_job_is_said_in_its_own_words_and_nothing_more_is_done():
    facts = with_job(seeded(fenced(chosen())), "Failed")
    r = ep.report(facts)
    recovery = r["status"]["recovery"]
    assert recovery["reason"] == "RecoveryFailed"
    assert "SnapshotCorrupt: torn" in recovery["message"]
    (event,) = [e for e in r["events"] if e["reason"].startswith("Recover")]
    assert (event["type"], event["reason"]) == ("Warning", "RecoveryFailed")


def test_the_survivors_claim_gone_ends_the_recovery_said_and_nothing_is_made():
    # e-1's guard tripped (its claim is there, fenced too); e-0's claim goes mid-way.
    facts = asked(lost_facts({1: "guard", 2: "claim"}, {0: (40, 30)}))
    assert [f["name"] for f in ep.plan(facts)["fence"]] == ["e-0", "e-1"]
    facts = fenced(facts)
    facts["claims"][1]["metadata"]["annotations"][ANN_FENCED] = f"recovery {FP}"
    del facts["claims"][0]
    p = ep.plan(facts)
    assert p["recover"] == {"fingerprint": FP}
    assert recovery_of(facts)["reason"] == "RecoverySourceGone"


def test_without_the_operators_image_nothing_is_made_and_it_is_said():
    facts = fenced(chosen())
    facts["options"] = {}
    assert ep.plan(facts)["recover"] == {"fingerprint": FP}
    assert recovery_of(facts)["reason"] == "RecoveryImageUnknown"


def test_released_the_first_member_is_started_and_the_old_id_is_dropped():
    facts = seeded(fenced(chosen()), pending=False)
    p, r = ep.plan(facts), ep.report(facts)
    assert p["heal"] == ["e-1"] and p["bootstrap"] == []
    assert r["status"]["recovery"]["phase"] == "Starting"
    # The old ID would hold the next look to the cluster left behind.
    assert r["status"]["clusterID"] is None


def test_the_first_member_answering_is_recorded_under_its_new_id():
    facts = answering(seeded(fenced(chosen()), pending=False))
    p = ep.plan(facts)
    assert p["cluster_id"] == NEW_ID
    assert [r["name"] for r in p["record"]] == ["e-1"]


def test_once_recorded_the_others_join_as_learners_and_the_request_reads_as_done():
    facts = answering(seeded(fenced(chosen()), pending=False, recorded=True))
    facts["claims"][-1]["metadata"]["annotations"][ANN_MEMBER_ID] = "a1"
    p, r = ep.plan(facts), ep.report(facts)
    # e-0's claim is fenced and kept: the learners take the other free names.
    assert p["add"] == ["e-2", "e-3"] and p["fence"] == [] and p["recover"] == {}
    recovery = r["status"]["recovery"]
    assert (recovery["action"], recovery["phase"]) == ("done", "Growing")
    # Both IDs said: the one recovered from, and the new cluster's.
    assert (recovery["oldClusterID"], recovery["newClusterID"]) == (CID, NEW_ID)
    assert f"the new cluster {NEW_ID}, which replaces {CID}" in recovery["message"]
    assert r["status"]["clusterID"] == NEW_ID
    assert not [e for e in r["events"] if e["reason"].startswith("Recover")]


def test_a_new_request_while_one_is_carried_out_waits():
    facts = seeded(fenced(chosen()))
    facts["object"]["metadata"]["annotations"][ANN_RECOVER_QUORUM] = (
        f"member=e-0 clusterID={CID} acceptOlder=true"
    )
    recovery = recovery_of(facts)
    assert recovery["fingerprint"] == FP and "RecoveryUnderway" in recovery["message"]


def test_paused_mid_way_nothing_is_done_and_it_is_said():
    facts = fenced(chosen())
    facts["object"]["spec"]["paused"] = True
    p = ep.plan(facts)
    assert p["recover"] == {} and p["fence"] == []
    assert "spec.paused" in recovery_of(facts)["message"]


def test_a_cluster_a_recovery_fenced_is_never_bootstrapped():
    facts = fenced(chosen())
    facts["object"]["status"] = {}
    facts["object"]["metadata"]["annotations"] = {}
    p = ep.plan(facts)
    assert p["bootstrap"] == []


def test_the_restoring_step_makes_the_pending_claim_then_the_job_from_the_survivors_claim():
    p = ep.plan(fenced(chosen()))
    claim_obj, job_obj = recovery_objects(p)
    annotations = claim_obj["metadata"]["annotations"]
    assert claim_obj["metadata"]["name"] == "e-1-data"
    assert annotations[ANN_RESTORE_PENDING] == FP
    assert annotations[ANN_RECOVERY] == f"{FP} {CID}"
    assert annotations["etcd.runbook.io/initial-cluster-state"] == "new"
    assert job_obj["metadata"]["labels"][LABEL_RECOVERY] == FP
    volumes = {v["name"]: v for v in job_obj["spec"]["template"]["spec"]["volumes"]}
    assert volumes["source"]["persistentVolumeClaim"] == {"claimName": "e-0-data", "readOnly": True}
    assert volumes["data"]["persistentVolumeClaim"] == {"claimName": "e-1-data"}
    # The claim made in a run cut short before its Job: the Job alone.
    p = ep.plan(seeded(fenced(chosen())))
    assert [o["kind"] for o in recovery_objects(p)] == ["Job"]


# --- from an EtcdBackup ------------------------------------------------------------------------

ASK_BACKUP = f"backup=nightly clusterID={CID} acceptOlder=true"
FPB = parse_request(ASK_BACKUP).fingerprint()


def backup_asked(facts: dict[str, Any]) -> dict[str, Any]:
    """The same loss, a backup asked for over the survivor's data (acceptOlder=true)."""
    facts = asked(facts)
    facts["object"]["metadata"]["annotations"][ANN_RECOVER_QUORUM] = ASK_BACKUP
    facts["backups"] = [backup("nightly", cluster="e")]
    return facts


def backup_fenced(facts: dict[str, Any]) -> dict[str, Any]:
    """After the fencing run: every claim fenced naming the backup, the Pods gone."""
    facts = copy.deepcopy(facts)
    facts["object"]["status"]["recovery"] = ep.report(facts)["status"]["recovery"]
    for c in facts["claims"]:
        c["metadata"]["annotations"][ANN_FENCED] = f"recovery {FPB} backup=nightly"
    facts["pods"], facts["info"] = [], {}
    return facts


def test_a_recovery_from_a_backup_fences_every_claim_naming_it_then_restores_its_snapshot():
    facts = backup_asked(lost_facts({1: "claim", 2: "claim"}, {0: (40, 30)}))
    p, r = ep.plan(facts), ep.report(facts)
    # The survivor's data is given up on purpose: its claim is fenced like the others', and
    # no claim is marked the source.
    assert p["fence"] == [{"name": "e-0", "reason": f"recovery {FPB} backup=nightly"}]
    assert p["recover"] == {"fingerprint": FPB, "stop": []}
    recovery = r["status"]["recovery"]
    assert (recovery["phase"], recovery["reason"]) == ("Fencing", "FromBackup")
    # The next run, the status of the decision lost (the request read back from the fences).
    facts = backup_fenced(facts)
    facts["object"]["status"]["recovery"] = {}
    p, recovery = ep.plan(facts), recovery_of(facts)
    assert (recovery["phase"], recovery["reason"], recovery["action"]) == (
        "Restoring",
        "FromBackup",
        "from_backup",
    )
    assert (
        "EtcdBackup nightly's snapshot s3://etcd/e/snap-7.db (revision 36)" in recovery["message"]
    )
    recover = p["recover"]
    assert (recover["seed"], recover["backup"], recover["cluster_id"]) == ("e-1", "nightly", CID)
    claim_obj, job_obj = recovery_objects(p)
    assert claim_obj["metadata"]["annotations"][ANN_RECOVERY] == f"{FPB} {CID} backup=nightly"
    pod_spec = job_obj["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod_spec["initContainers"][0]["env"]}
    # Fetched from the store and checked against the backup's sha256, as a restore does; the
    # survivor's claim is not mounted.
    assert (env["ETCD_RESTORE_KEY"], env["ETCD_RESTORE_SHA256"]) == ("e/snap-7.db", SHA)
    assert env["ETCD_RESTORE_S3_BUCKET"] == "etcd"
    assert "source" not in {v["name"] for v in pod_spec["volumes"]}
    assert "--skip-hash-check" not in pod_spec["containers"][0]["command"]


def test_a_recovery_from_a_backup_is_taken_up_from_its_first_members_claim_alone():
    # Every old claim deleted by a person after the first member's claim was made: that
    # claim still says which backup it is restored from.
    facts = backup_fenced(backup_asked(lost_facts({1: "claim", 2: "claim"}, {0: (40, 30)})))
    c = claim(1, joined=False)
    c["metadata"]["annotations"] |= {
        ANN_RECOVERY: f"{FPB} {CID} backup=nightly",
        ANN_RESTORE_PENDING: FPB,
    }
    facts["claims"] = [c]
    facts = with_job(facts, "Complete")
    facts["recovery_jobs"][0]["metadata"]["labels"][LABEL_RECOVERY] = FPB
    recovery = recovery_of(facts)
    assert (recovery["phase"], recovery["reason"]) == ("Starting", "FromBackup"), recovery
    assert "EtcdBackup nightly's snapshot" in recovery["message"]
    assert ep.plan(facts)["recover"] == {"fingerprint": FPB, "release": "e-1"}


def test_the_backup_gone_mid_way_ends_the_recovery_said_and_nothing_is_made():
    facts = backup_fenced(backup_asked(lost_facts({1: "claim", 2: "claim"}, {0: (40, 30)})))
    facts["backups"] = []
    assert ep.plan(facts)["recover"] == {"fingerprint": FPB}
    recovery = recovery_of(facts)
    assert (recovery["phase"], recovery["reason"]) == ("Failed", "RecoverySourceGone")
    assert "no EtcdBackup nightly in this namespace" in recovery["message"]


def test_an_etcdbackup_of_that_name_that_is_another_clusters_by_now_is_never_restored():
    facts = backup_fenced(backup_asked(lost_facts({1: "claim", 2: "claim"}, {0: (40, 30)})))
    facts["backups"] = [backup("nightly", cluster="other")]
    assert ep.plan(facts)["recover"] == {"fingerprint": FPB}
    recovery = recovery_of(facts)
    assert (recovery["phase"], recovery["reason"]) == ("Failed", "RecoverySourceGone")
    assert "backs up EtcdCluster other" in recovery["message"]
