"""The restore runbook's decisions (plugins/filter/etcd_restore_plan.py), table-driven: what
is refused, what is created in which order, when the first member's claim is released, and
what the EtcdRestore's status says."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from etcd_runbook.rules import etcd_manifests as em
from etcd_runbook.rules import etcd_plan as ep
from etcd_runbook.rules import etcd_restore_plan as rp

SHA = "a" * 64
UID = "0123456789abcdef"


def restore(source: dict[str, Any] | None = None, version: str = "3.6.16", **status: Any) -> dict:
    return {
        "apiVersion": "etcd.runbook.io/v1alpha1",
        "kind": "EtcdRestore",
        "metadata": {"name": "back", "namespace": "prod", "uid": UID, "generation": 1},
        "spec": {
            "source": source if source is not None else {"backupName": "nightly"},
            "cluster": {"name": "again", "spec": {"size": 3, "version": version}},
        },
        "status": status,
    }


def backup(location: str = "s3://etcd/prod/example/snap-1.db", version: str = "3.6.16") -> dict:
    return {
        "metadata": {"name": "nightly", "namespace": "prod"},
        "spec": {
            "clusterName": "example",
            "destination": {
                "s3": {"endpoint": "http://s3:9000", "bucket": "etcd", "credentialsSecret": "creds"}
            },
        },
        "status": {
            "lastSnapshot": {
                "location": location,
                "sha256": SHA,
                "revision": 42,
                "size": 4096,
                "etcdVersion": version,
            }
        },
    }


MISSING = {
    "type": "Available",
    "status": "False",
    "reason": "SnapshotMissing",
    "message": "status.lastSnapshot is gone (checked at 2026-11-24T06:00:00Z): ...",
}


def test_a_backup_whose_check_found_its_snapshot_says_so_and_a_found_one_restores():
    found = {**MISSING, "status": "True", "reason": "SnapshotTaken"}
    ok = {**backup(), "status": {**backup()["status"], "conditions": [found]}}
    assert rp.restore_source(restore(), ok)["key"] == "prod/example/snap-1.db"
    gone = {**backup(), "status": {**backup()["status"], "conditions": [MISSING]}}
    with pytest.raises(rp.RestoreRefused, match=r"snap-1\.db is missing"):
        rp.restore_source(restore(), gone)


def volume_backup(location: str = "pvc://backups/etcd/prod/example/snap-1.db") -> dict:
    saved = backup(location)
    saved["spec"]["destination"] = {"volume": {"claimName": "backups", "path": "etcd"}}
    return saved


def target(obj: dict) -> dict:
    spec = ep.normalize_spec(
        {"metadata": {"name": "again"}, "spec": obj["spec"]["cluster"]["spec"]}, {}
    )
    shape = {
        "name": "again",
        "namespace": "prod",
        "uid": "",
        "domain": "cluster.local",
        "spec": spec,
        "versions": {},
    }
    peer = em.peer_url(shape, "again-0")
    return {
        "name": "again",
        "spec": spec,
        "member": "again-0",
        "claim_name": "again-0-data",
        "claim": em.member_claim(shape, "again-0", f"again-0={peer}", "new"),
        "peer_url": peer,
        "token": "again-01234567",
        "image": "operator:dev",
        "job_deadline": 600,
    }


def seen(**over: Any) -> dict:
    base: dict[str, Any] = {
        "cluster": None,
        "claims": [],
        "job": None,
        "pods": [],
        "backup": backup(),
        "secret_keys": ["accessKeyId", "secretAccessKey"],
        "image": "",
        "now": "2026-11-24T20:00:00Z",
    }
    return {**base, **over}


def ours(**status: Any) -> dict:
    return {
        "metadata": {
            "name": "again",
            "labels": {rp.LABEL_RESTORE: "back"},
            "annotations": {rp.ANN_RESTORE: "back", rp.ANN_RESTORE_UID: UID},
        },
        "status": status,
    }


def claim(pending: bool = True, uid: str = UID) -> dict:
    annotations = {rp.ANN_RESTORE_UID: uid}
    if pending:
        annotations[rp.ANN_RESTORE_PENDING] = uid
    return {"metadata": {"name": "again-0-data", "annotations": annotations}}


JOB_UID = "job-uid-1"


def controlled_by(kind: str, uid: str) -> list[dict[str, Any]]:
    return [{"kind": kind, "name": "back", "uid": uid, "controller": True}]


def job(state: str = "", owner: str = UID) -> dict:
    """The Job of the restore's name; made by this EtcdRestore unless `owner` says else."""
    conditions = (
        [{"type": "Complete" if state == "Succeeded" else "Failed", "status": "True"}]
        if state
        else []
    )
    meta: dict[str, Any] = {"name": "back-restore", "uid": JOB_UID}
    if owner:
        meta["ownerReferences"] = controlled_by("EtcdRestore", owner)
    return {"metadata": meta, "status": {"conditions": conditions}}


def run(obj: dict | None = None, **over: Any) -> dict:
    obj = obj or restore()
    return rp.plan(obj, seen(**over), target(obj))


def reasons(result: dict) -> list[str]:
    return [r["reason"] for r in result["refusals"]]


@pytest.mark.parametrize(
    ("obj", "over", "reason", "field"),
    [
        (None, {"cluster": {"metadata": {"name": "again"}}}, "ClusterExists", "spec.cluster.name"),
        (
            None,
            {"claims": [{"metadata": {"name": "again-1-data", "annotations": {}}}]},
            "ClaimsExist",
            "spec.cluster.name",
        ),
        (None, {"backup": None}, "SourceNotFound", "spec.source.backupName"),
        (
            None,
            {"backup": {**backup(), "status": {}}},
            "SourceNotFound",
            "spec.source.backupName",
        ),
        # Its check found the newest snapshot gone: refused before anything is made.
        (
            None,
            {"backup": {**backup(), "status": {**backup()["status"], "conditions": [MISSING]}}},
            "SourceNotFound",
            "spec.source.backupName",
        ),
        (
            None,
            {"secret_keys": None},
            "CredentialsInvalid",
            "EtcdBackup nightly spec.destination.s3.credentialsSecret",
        ),
        (None, {"secret_keys": ["accessKeyId"]}, "CredentialsInvalid", None),
        (
            restore({"volume": {"claimName": "b", "path": "/s.db"}, "sha256": SHA}),
            {"source_claim_found": False},
            "SourceNotFound",
            "spec.source.volume.claimName",
        ),
        (
            restore({"volume": {"claimName": "b", "path": "/a/../s.db"}, "sha256": SHA}),
            {},
            "InvalidSpec",
            "spec.source.volume.path",
        ),
        (
            restore({"volume": {"claimName": "b", "path": "/s.db"}}),
            {},
            "InvalidSpec",
            "spec.source.sha256",
        ),
        (
            None,
            {"backup": volume_backup(), "secret_keys": None, "source_claim_found": False},
            "SourceNotFound",
            "spec.source.backupName",
        ),
        (
            None,
            {"backup": volume_backup("pvc://elsewhere/prod/example/snap-1.db")},
            "SourceNotFound",
            "spec.source.backupName",
        ),
        (
            restore({"s3": {"endpoint": "http://s3:9000", "bucket": "etcd", "key": "k"}}),
            {},
            "InvalidSpec",
            "spec.source.sha256",
        ),
        # A snapshot of 3.6 cannot be read by 3.5; one of 3.4 by 3.6 is two minors away.
        (restore(version="3.5.35"), {}, "UnsafeVersionChange", "spec.cluster.spec.version"),
        (
            None,
            {"backup": backup(version="3.4.31")},
            "UnsafeVersionChange",
            "spec.cluster.spec.version",
        ),
        (restore(version="2.3"), {}, "InvalidSpec", "spec.cluster.spec.version"),
        # An upload needs the sha256 it will be checked against, and is a source of its own.
        (restore({"upload": {}}), {}, "InvalidSpec", "spec.source.sha256"),
        (
            restore({"upload": {}, "backupName": "nightly", "sha256": SHA}),
            {},
            "InvalidSpec",
            "spec.source",
        ),
    ],
)
def test_refused_with_the_field_named_and_nothing_created(obj, over, reason, field):
    result = run(obj, **over)
    assert reason in reasons(result)
    if field is not None:
        assert field in [r["field"] for r in result["refusals"]]
    assert result["create"] == [] and result["release"] is None
    report = result["report"]
    assert report["status"]["phase"] == "Failed"
    assert report["conditions"]["Degraded"]["status"] == "True"
    assert report["events"][0]["type"] == "Warning"


OTHER_RESTORE = "0ld0ld00-uid-of-an-earlier-restore"


@pytest.mark.parametrize(
    ("case", "over", "field"),
    [
        # The case: the same EtcdRestore made again after the first was deleted with
        # --cascade=orphan: its finished Job has no controller any more.
        ("orphaned, fresh", {"job": job("Succeeded", owner="")}, "metadata.name"),
        # An earlier restore of the same name, its Job not yet collected.
        ("earlier, fresh", {"job": job("Succeeded", owner=OTHER_RESTORE)}, "metadata.name"),
        ("earlier, failed", {"job": job("Failed", owner=OTHER_RESTORE)}, "metadata.name"),
        # Found once this restore made its cluster and pending claim: never released by it.
        (
            "orphaned, claim pending",
            {"cluster": ours(), "claims": [claim()], "job": job("Succeeded", owner="")},
            "metadata.name",
        ),
        (
            "earlier, claim pending",
            {"cluster": ours(), "claims": [claim()], "job": job("Succeeded", OTHER_RESTORE)},
            "metadata.name",
        ),
        # Another app's claim under the first member's name (no label of the cluster).
        (
            "another app's claim",
            {"first_claim": {"metadata": {"name": "again-0-data", "labels": {"app": "db"}}}},
            "spec.cluster.name",
        ),
    ],
)
def test_only_the_restores_own_job_and_claims_count(case, over, field):
    """Never Starting or Succeeded, never a claim released, nothing created: refused as
    NameTaken, naming the object, until it is gone."""
    result = run(restore(phase="Restoring" if "pending" in case else None), **over)
    assert reasons(result) == ["NameTaken"], case
    assert result["refusals"][0]["field"] == field, case
    assert result["create"] == [] and result["release"] is None, case
    report = result["report"]
    assert report["status"]["phase"] == "Failed", case
    assert report["conditions"]["Degraded"]["reason"] == "NameTaken", case
    assert report["conditions"]["Available"]["status"] == "False", case
    named = "Job back-restore" if field == "metadata.name" else "claim again-0-data"
    assert named in report["conditions"]["Degraded"]["message"], case
    assert report["events"][0]["reason"] == "NameTaken", case


def test_once_the_other_job_is_gone_the_restore_goes_on():
    result = run(restore(phase="Failed"))
    assert result["refusals"] == []
    assert [o["kind"] for o in result["create"]] == ["EtcdCluster", "PersistentVolumeClaim", "Job"]
    job_made = result["create"][2]
    assert job_made["metadata"]["ownerReferences"][0]["uid"] == UID


def test_the_upload_goes_only_into_the_restores_own_job():
    orphan = fetching({"running": {"startedAt": "t"}})
    orphan["metadata"]["ownerReferences"] = controlled_by("Job", "an-orphans-job-uid")
    obj = restore(UPLOAD, phase="Restoring")
    over = {"cluster": ours(), "claims": [claim()], "job": job(), "pods": [orphan]}
    result = rp.plan(obj, seen(backup=None, secret_keys=None, **over), target(obj))
    assert result["upload"] is None


def test_a_fresh_restore_creates_the_cluster_then_the_pending_claim_then_the_job():
    result = run()
    assert result["refusals"] == []
    kinds = [o["kind"] for o in result["create"]]
    assert kinds == ["EtcdCluster", "PersistentVolumeClaim", "Job"]
    cluster, pvc, _the_job = result["create"]
    assert cluster["metadata"]["annotations"] == {rp.ANN_RESTORE: "back", rp.ANN_RESTORE_UID: UID}
    assert cluster["spec"] == {"size": 3, "version": "3.6.16"}
    # The claim the cluster runbook would have made, marked restore-pending.
    assert pvc["metadata"]["name"] == "again-0-data"
    assert pvc["metadata"]["annotations"][rp.ANN_RESTORE_PENDING] == UID
    assert pvc["metadata"]["annotations"]["etcd.runbook.io/initial-cluster-state"] == "new"
    assert pvc["metadata"]["labels"]["etcd.runbook.io/cluster"] == "again"
    assert result["report"]["status"]["phase"] == "Pending"
    assert result["report"]["status"]["snapshot"]["location"] == "s3://etcd/prod/example/snap-1.db"
    assert result["report"]["status"]["restoredRevision"] == 42


def test_the_job_fetches_then_restores_with_a_new_token_and_bumped_revisions():
    the_job = run()["create"][2]
    spec = the_job["spec"]
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == 600
    pod = spec["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    (fetch,) = pod["initContainers"]
    env = {e["name"]: e.get("value") for e in fetch["env"]}
    assert env["ETCD_RESTORE_KEY"] == "prod/example/snap-1.db"
    assert env["ETCD_RESTORE_SHA256"] == SHA
    # Credentials only by reference; the key is data in the environment, never an argument.
    secret_refs = [e for e in fetch["env"] if "valueFrom" in e]
    assert {e["valueFrom"]["secretKeyRef"]["name"] for e in secret_refs} == {"creds"}
    assert fetch["command"][1] == "playbooks/etcd-restore-fetch.yml"
    (restore_c,) = pod["containers"]
    assert restore_c["image"].endswith(":v3.6.16")
    command = restore_c["command"]
    assert command[:3] == ["/usr/local/bin/etcdutl", "snapshot", "restore"]
    assert "--name=again-0" in command
    assert "--initial-cluster-token=again-01234567" in command
    assert "--bump-revision=1000000000" in command and "--mark-compacted" in command
    assert "--data-dir=/var/lib/etcd/data" in command
    peer = "https://again-0.again.prod.svc.cluster.local:2380"
    assert f"--initial-cluster=again-0={peer}" in command
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "again-0-data"}} in pod[
        "volumes"
    ]
    for container in [fetch, restore_c]:
        assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_etcd_34_restores_with_its_etcdctl():
    obj = restore(version="3.4.31")
    result = rp.plan(obj, seen(backup=backup(version="3.4.31")), target(obj))
    command = result["create"][2]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[0] == "/usr/local/bin/etcdctl"


def test_explicit_s3_source_uses_its_own_store_and_sha256():
    obj = restore(
        {
            "s3": {
                "endpoint": "https://s3.example.com",
                "bucket": "other",
                "key": "x/y.db",
                "credentialsSecret": "mine",
            },
            "sha256": "b" * 64,
        }
    )
    result = rp.plan(obj, seen(backup=None), target(obj))
    assert result["refusals"] == []
    assert result["source"]["location"] == "s3://other/x/y.db"
    env = result["create"][2]["spec"]["template"]["spec"]["initContainers"][0]["env"]
    assert {e["name"]: e.get("value") for e in env}["ETCD_RESTORE_SHA256"] == "b" * 64


@pytest.mark.parametrize(
    ("obj", "over", "claim_name", "key"),
    [
        (
            None,
            {"backup": volume_backup(), "secret_keys": None},
            "backups",
            "etcd/prod/example/snap-1.db",
        ),
        (
            restore({"volume": {"claimName": "mine", "path": "/x/y.db"}, "sha256": SHA}),
            {"backup": None, "secret_keys": None, "source_claim_found": True},
            "mine",
            "x/y.db",
        ),
    ],
)
def test_a_volume_source_is_read_from_its_claim_mounted_read_only(obj, over, claim_name, key):
    obj = obj or restore()
    result = rp.plan(obj, seen(**over), target(obj))
    assert result["refusals"] == []
    assert result["source"]["location"] == f"pvc://{claim_name}/{key}"
    pod = result["create"][2]["spec"]["template"]["spec"]
    fetch = pod["initContainers"][0]
    env = {e["name"]: e.get("value") for e in fetch["env"]}
    assert env["ETCD_RESTORE_DIRECTORY"] == rp.SOURCE_DIR and env["ETCD_RESTORE_KEY"] == key
    assert not [
        e for e in fetch["env"] if "valueFrom" in e or e["name"].startswith("ETCD_RESTORE_S3")
    ]
    assert {"name": "source", "mountPath": rp.SOURCE_DIR, "readOnly": True} in fetch["volumeMounts"]
    source = next(v for v in pod["volumes"] if v["name"] == "source")
    assert source["persistentVolumeClaim"] == {"claimName": claim_name, "readOnly": True}
    restore_mounts = pod["containers"][0]["volumeMounts"]
    assert "source" not in [m["name"] for m in restore_mounts], "etcd's tool never sees the claim"


def fetching(state: dict[str, Any], deleted: bool = False) -> dict:
    meta: dict[str, Any] = {
        "name": "back-restore-x7k2p",
        "labels": {"job-name": "back-restore"},
        "ownerReferences": controlled_by("Job", JOB_UID),
    }
    if deleted:
        meta["deletionTimestamp"] = "2026-11-24T20:00:00Z"
    return {
        "metadata": meta,
        "status": {"initContainerStatuses": [{"name": "fetch", "state": state}]},
    }


UPLOAD = {"upload": {}, "sha256": SHA}


def test_an_upload_source_waits_in_the_fetch_step_for_the_file():
    obj = restore(UPLOAD)
    result = rp.plan(obj, seen(backup=None, secret_keys=None), target(obj))
    assert result["refusals"] == [] and result["upload"] is None
    assert result["source"]["location"] == f"upload:sha256:{SHA}"
    pod = result["create"][2]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["initContainers"][0]["env"]}
    assert env["ETCD_RESTORE_DIRECTORY"] == rp.UPLOAD_DIR
    assert env["ETCD_RESTORE_KEY"] == rp.UPLOAD_NAME and env["ETCD_RESTORE_SHA256"] == SHA
    # The Job's deadline is 600 s in target(): the wait leaves time for the checks and etcd.
    assert env["ETCD_RESTORE_UPLOAD_WAIT"] == "60"
    assert not [e for e in pod["initContainers"][0]["env"] if "valueFrom" in e]
    assert [v["name"] for v in pod["volumes"]] == ["tmp", "snapshot", "data"]


@pytest.mark.parametrize(
    ("pods", "job_state", "upload_to"),
    [
        # Only a running fetch step can take the file; not before, not after, not a Pod going.
        ([fetching({"running": {"startedAt": "t"}})], "", "back-restore-x7k2p"),
        ([fetching({"waiting": {"reason": "PodInitializing"}})], "", None),
        ([fetching({"terminated": {"exitCode": 0}})], "", None),
        ([fetching({"running": {"startedAt": "t"}}, deleted=True)], "", None),
        ([fetching({"running": {"startedAt": "t"}})], "Failed", None),
        ([], "", None),
    ],
)
def test_where_the_upload_goes(pods, job_state, upload_to):
    obj = restore(UPLOAD, phase="Restoring")
    over = {"cluster": ours(), "claims": [claim()], "job": job(job_state), "pods": pods}
    result = rp.plan(obj, seen(backup=None, secret_keys=None, **over), target(obj))
    if upload_to is None:
        assert result["upload"] is None
        return
    assert result["upload"] == {
        "pod": upload_to,
        "container": "fetch",
        "dest": f"{rp.UPLOAD_DIR}/{rp.UPLOAD_NAME}",
        "sha256": SHA,
    }
    progressing = result["report"]["conditions"]["Progressing"]
    assert progressing["reason"] == "WaitingForUpload"
    assert "-e restore=back -e namespace=prod -e file=" in progressing["message"]


def test_an_upload_that_never_came_fails_with_its_own_reason():
    message = (
        "Fetch | Wait for the snapshot a person uploads: UploadTimeout: "
        "no snapshot was uploaded within 60 s"
    )
    pod = fetching({"terminated": {"exitCode": 2, "message": message}})
    obj = restore(UPLOAD, phase="Restoring")
    over = {"cluster": ours(), "claims": [claim()], "job": job("Failed"), "pods": [pod]}
    result = rp.plan(obj, seen(backup=None, secret_keys=None, **over), target(obj))
    assert result["report"]["conditions"]["Degraded"]["reason"] == "UploadTimeout"


@pytest.mark.parametrize(("deadline", "wait"), [(3600, 3000), (600, 60), (100, 60), (None, 3000)])
def test_upload_wait_leaves_time_before_the_jobs_deadline(deadline, wait):
    options = {} if deadline is None else {"deadline_seconds": deadline}
    assert rp.upload_wait(options) == wait


@pytest.mark.parametrize(
    ("over", "phase", "creates", "released"),
    [
        # Interrupted after the cluster was made: the claim and Job follow.
        ({"cluster": ours()}, "Pending", ["PersistentVolumeClaim", "Job"], False),
        ({"cluster": ours(), "claims": [claim()]}, "Pending", ["Job"], False),
        ({"cluster": ours(), "claims": [claim()], "job": job()}, "Restoring", [], False),
        # The Job succeeded: the claim is released, the cluster starts its members.
        (
            {"cluster": ours(), "claims": [claim()], "job": job("Succeeded")},
            "Starting",
            [],
            True,
        ),
        (
            {"cluster": ours(), "claims": [claim(False)], "job": job("Succeeded")},
            "Starting",
            [],
            False,
        ),
        # A released claim is never given a second Job, even when the first is gone.
        ({"cluster": ours(), "claims": [claim(False)]}, "Starting", [], False),
    ],
)
def test_each_step_once(over, phase, creates, released):
    result = run(**over)
    assert result["refusals"] == []
    assert [o["kind"] for o in result["create"]] == creates
    assert (result["release"] is not None) == released
    if released:
        annotations = result["release"]["metadata"]["annotations"]
        assert annotations[rp.ANN_RESTORE_PENDING] is None
        assert annotations[rp.ANN_RESTORED_FROM] == "s3://etcd/prod/example/snap-1.db"
    assert result["report"]["status"]["phase"] == phase


def test_a_released_claim_with_no_job_reports_starting_not_pending():
    # The Job deleted after success: the released claim says the data was written.
    result = run(cluster=ours(), claims=[claim(False)])
    assert result["report"]["status"]["phase"] == "Starting"


@pytest.mark.parametrize(("ready", "phase"), [(1, "Starting"), (2, "Starting"), (None, "Starting")])
def test_not_succeeded_while_the_learners_still_copy_the_data(ready, phase):
    # Available comes with the first member; the restore is done when all are ready.
    cluster = ours(
        conditions=[{"type": "Available", "status": "True"}],
        **({"readyMembers": ready} if ready is not None else {}),
    )
    cluster["spec"] = {"size": 3}
    result = run(cluster=cluster, claims=[claim(False)], job=job("Succeeded"))
    assert result["report"]["status"]["phase"] == phase
    progressing = result["report"]["conditions"]["Progressing"]
    assert f"({ready or 0} of 3 ready)" in progressing["message"]
    assert result["unlabel"] is None


def test_succeeded_once_the_cluster_is_available_and_then_stops_following_it():
    available = ours(
        clusterID="c0ffee",
        readyMembers=3,
        conditions=[{"type": "Available", "status": "True"}],
    )
    available["spec"] = {"size": 3}
    result = run(cluster=available, claims=[claim(False)], job=job("Succeeded"))
    status = result["report"]["status"]
    assert status["phase"] == "Succeeded"
    assert status["clusterID"] == "c0ffee"
    assert status["completionTime"] == "2026-11-24T20:00:00Z"
    assert result["unlabel"]["metadata"]["labels"] == {rp.LABEL_RESTORE: None}
    assert result["report"]["events"][0]["reason"] == "RestoreSucceeded"


def test_done_is_done_even_when_the_cluster_is_deleted_later():
    obj = restore(phase="Succeeded", clusterID="c0ffee")
    result = rp.plan(obj, seen(backup=None, secret_keys=None), target(obj))
    assert result["refusals"] == [] and result["create"] == []
    assert result["report"]["status"]["phase"] == "Succeeded"
    assert result["report"]["events"] == []


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (
            "Fetch | Download the snapshot: SnapshotCorrupt: sha256 of the object is 12, not 34",
            "SnapshotCorrupt",
        ),
        # The step's name mentions sha256: the reason word decides, not the words around it.
        (
            "Fetch | Download the snapshot, checking its sha256: S3AuthFailed: wrong key",
            "S3AuthFailed",
        ),
        ("Fetch | Download: S3ObjectMissing: no such object", "S3ObjectMissing"),
        ("something else", "RestoreFailed"),
    ],
)
def test_a_failed_fetch_says_why_and_leaves_the_claim_pending(message, reason):
    pod = {
        "metadata": {
            "labels": {"job-name": "back-restore"},
            "creationTimestamp": "t",
            "ownerReferences": controlled_by("Job", JOB_UID),
        },
        "status": {
            "initContainerStatuses": [
                {"name": "fetch", "state": {"terminated": {"exitCode": 2, "message": message}}}
            ]
        },
    }
    obj = restore(phase="Restoring")
    result = rp.plan(
        obj, seen(cluster=ours(), claims=[claim()], job=job("Failed"), pods=[pod]), target(obj)
    )
    assert result["create"] == [] and result["release"] is None
    report = result["report"]
    assert report["status"]["phase"] == "Failed"
    degraded = report["conditions"]["Degraded"]
    assert degraded["reason"] == reason
    assert message in degraded["message"] and "restore-pending" in degraded["message"]
    assert report["events"][0] == {
        "type": "Warning",
        "reason": reason,
        "message": degraded["message"],
    }


def test_events_only_when_something_changed():
    obj = restore(
        phase="Restoring",
        conditions=[{"type": "Degraded", "status": "False", "message": "no problem seen"}],
    )
    result = rp.plan(obj, seen(cluster=ours(), claims=[claim()], job=job()), target(obj))
    assert result["report"]["events"] == []
    refused = restore(phase="Failed")
    first = rp.plan(refused, seen(backup=None), target(refused))["report"]
    again = copy.deepcopy(refused)
    again["status"]["conditions"] = [
        {
            "type": "Degraded",
            "status": "True",
            "message": first["conditions"]["Degraded"]["message"],
        }
    ]
    assert rp.plan(again, seen(backup=None), target(again))["report"]["events"] == []


@pytest.mark.parametrize(
    ("snapshot", "target_version", "ok"),
    [
        ("3.5.35", "3.5.1", True),
        ("3.5.35", "3.6.16", True),
        ("3.6.16", "3.5.35", False),
        ("3.4.31", "3.6.16", False),
        ("", "3.6.16", True),
    ],
)
def test_version_refusal(snapshot, target_version, ok):
    assert (rp.version_refusal(snapshot, target_version) is None) == ok


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("restore: Error: snapshot missing hash but --skip-hash-check=false", "SnapshotCorrupt"),
        ("restore: Error: data-dir exists", "RestoreFailed"),
        ("fetch: no such file: corrupt.db", "RestoreFailed"),
    ],
)
def test_failure_reason_of_etcds_tool(message, reason):
    assert rp.failure_reason(message) == reason


def test_the_status_a_run_by_hand_writes_keeps_transition_times():
    obj = restore(
        phase="Restoring",
        conditions=[
            {"type": "Progressing", "status": "True", "lastTransitionTime": "then"},
            {"type": "Degraded", "status": "True", "lastTransitionTime": "then"},
        ],
    )
    report = run(obj, cluster=ours(), claims=[claim()], job=job())["report"]
    status = rp.status_of(report, obj, "now")
    times = {c["type"]: c["lastTransitionTime"] for c in status["conditions"]}
    assert times == {"Available": "now", "Progressing": "then", "Degraded": "now"}
    assert status["phase"] == "Restoring"
    assert {c["observedGeneration"] for c in status["conditions"]} == {1}


def test_a_recovery_job_copies_the_stopped_survivors_database_read_only_then_restores_it():
    cluster = {"metadata": {"name": "again", "namespace": "prod", "uid": "c-uid"}}
    the_job = rp.recovery_job(
        cluster,
        "f" * 16,
        {"kind": "member", "claim": "again-1-data"},
        target(restore()),
        "operator:dev",
        {"deadline_seconds": 900},
    )
    meta = the_job["metadata"]
    assert meta["name"] == "again-recover-ffffffffff"
    assert meta["labels"]["app.kubernetes.io/name"] == "etcd-recovery"
    assert meta["labels"]["etcd.runbook.io/recovery"] == "f" * 16
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("EtcdCluster", "c-uid", True)
    assert the_job["spec"]["activeDeadlineSeconds"] == 900
    pod = the_job["spec"]["template"]["spec"]
    (fetch,) = pod["initContainers"]
    env = {e["name"]: e.get("value") for e in fetch["env"]}
    assert env["ETCD_RESTORE_MEMBER_DIR"] == f"{rp.SOURCE_DIR}/data"
    # Nothing to check a copied database against but itself: no key, no sha256, no store.
    assert not {"ETCD_RESTORE_KEY", "ETCD_RESTORE_SHA256", "ETCD_RESTORE_DIRECTORY"} & set(env)
    assert {"name": "source", "mountPath": rp.SOURCE_DIR, "readOnly": True} in fetch["volumeMounts"]
    source = next(v for v in pod["volumes"] if v["name"] == "source")
    assert source["persistentVolumeClaim"] == {"claimName": "again-1-data", "readOnly": True}
    (tool,) = pod["containers"]
    assert "source" not in [m["name"] for m in tool["volumeMounts"]]
    command = tool["command"]
    assert "--skip-hash-check" in command
    assert "--bump-revision=1000000000" in command and "--mark-compacted" in command


def test_a_restore_from_a_snapshot_checks_its_hash():
    command = run()["create"][2]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--skip-hash-check" not in command
