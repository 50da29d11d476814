"""The backup runbook's Job/CronJob objects and the EtcdBackup status decided from its Jobs
(plugins/filter/etcd_backup_jobs.py), table-driven."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.filters import load_filter

bj = load_filter("etcd_backup_jobs")
IMAGE = "etcd-runbook-operator:dev"


def backup(schedule: str = "", **spec: Any) -> dict:
    body: dict[str, Any] = {
        "clusterName": "example",
        "destination": {
            "s3": {"endpoint": "http://s3:9000", "bucket": "etcd", "credentialsSecret": "creds"}
        },
        **spec,
    }
    if schedule:
        body["schedule"] = schedule
    return {
        "apiVersion": "etcd.runbook.io/v1alpha1",
        "kind": "EtcdBackup",
        "metadata": {"name": "nightly", "namespace": "prod", "uid": "u-1"},
        "spec": body,
    }


def kinds(result: dict) -> list[str]:
    return [o["kind"] for o in result["objects"]]


def pod_of(result: dict) -> dict:
    last = result["objects"][-1]
    spec = last["spec"]["jobTemplate"]["spec"] if last["kind"] == "CronJob" else last["spec"]
    return spec["template"]["spec"]


def test_a_one_off_backup_is_a_job_named_after_its_spec():
    first = bj.workload(backup(), IMAGE)
    assert kinds(first) == ["ServiceAccount", "RoleBinding", "Job"]
    assert first["job"].startswith("nightly-") and first["cronjob"] == ""
    assert bj.workload(backup(), IMAGE)["job"] == first["job"]  # same spec, same Job: once
    changed = bj.workload(backup(retention={"keep": 2}), IMAGE)
    assert changed["job"] != first["job"]  # a new spec takes a new snapshot


def test_a_one_off_backup_taken_is_not_taken_again_when_its_job_is_deleted():
    done = backup()
    done["metadata"]["generation"] = 2
    done["status"] = {"phase": "Succeeded", "observedGeneration": 2}
    assert kinds(bj.workload(done, IMAGE)) == ["ServiceAccount", "RoleBinding"]
    done["metadata"]["generation"] = 3  # a new spec: a new snapshot
    assert kinds(bj.workload(done, IMAGE))[-1] == "Job"


def test_a_schedule_is_a_cronjob_that_never_overlaps():
    result = bj.workload(backup("*/5 * * * *", suspend=True, timeZone="Europe/Berlin"), IMAGE)
    assert kinds(result) == ["ServiceAccount", "RoleBinding", "CronJob"]
    cron = result["objects"][-1]["spec"]
    assert cron["schedule"] == "*/5 * * * *"
    assert (cron["suspend"], cron["concurrencyPolicy"], cron["timeZone"]) == (
        True,
        "Forbid",
        "Europe/Berlin",
    )
    assert cron["jobTemplate"]["metadata"]["labels"][bj.LABEL_BACKUP] == "nightly"


def test_every_object_is_owned_by_the_backup_and_labelled_for_the_watcher():
    for obj in bj.workload(backup(), IMAGE)["objects"]:
        meta = obj["metadata"]
        assert meta["ownerReferences"][0]["uid"] == "u-1"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "etcd-runbook-operator"
        assert meta["labels"][bj.LABEL_BACKUP] == "nightly"


def test_the_pod_is_restricted_and_gets_credentials_only_from_the_secret():
    pod = pod_of(bj.workload(backup(), IMAGE))
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    env = {e["name"]: e for e in container["env"]}
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"] == {
        "name": "creds",
        "key": "accessKeyId",
    }
    assert "value" not in env["AWS_SECRET_ACCESS_KEY"]
    assert json.loads(container["command"][-1]) == {"backup": "nightly", "namespace": "prod"}
    assert pod["serviceAccountName"] == "etcd-backup-nightly"


def test_a_volume_destination_and_a_store_ca_are_mounted():
    spec = backup()
    spec["spec"]["destination"] = {"volume": {"claimName": "backups", "path": "/etcd"}}
    pod = pod_of(bj.workload(spec, IMAGE))
    assert {"name": "destination", "persistentVolumeClaim": {"claimName": "backups"}} in pod[
        "volumes"
    ]
    assert not [e for e in pod["containers"][0]["env"] if e["name"].startswith("AWS_")]
    with_ca = backup()
    with_ca["spec"]["destination"]["s3"]["caSecret"] = "store-ca"
    mounts = pod_of(bj.workload(with_ca, IMAGE))["containers"][0]["volumeMounts"]
    assert {"name": "s3-ca", "mountPath": bj.S3_CA_DIR, "readOnly": True} in mounts
    env = pod_of(bj.workload(with_ca, IMAGE))["containers"][0]["env"]
    assert {"name": "ETCD_BACKUP_CA_DIR", "value": bj.S3_CA_DIR} in env


@pytest.mark.parametrize(
    ("change", "image", "match"),
    [
        (lambda b: b["metadata"].update(name="x" * 53), IMAGE, "at most 52 characters"),
        (lambda b: b["metadata"].pop("uid"), IMAGE, "no uid"),
        (lambda b: None, "", "no image"),
    ],
)
def test_what_cannot_become_a_job_is_refused(change, image, match):
    obj = backup("@daily")
    change(obj)
    with pytest.raises(bj.BackupJobError, match=match):
        bj.workload(obj, image)


def job(name: str, state: str, start: str) -> dict:
    conditions = {
        "Active": [],
        "Succeeded": [{"type": "Complete", "status": "True"}],
        "Failed": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "too many",
            }
        ],
    }[state]
    return {
        "metadata": {"name": name, "labels": {bj.LABEL_BACKUP: "nightly"}},
        "status": {"startTime": start, "conditions": conditions},
    }


def pod(job_name: str, message: str, created: str) -> dict:
    return {
        "metadata": {"labels": {"job-name": job_name}, "creationTimestamp": created},
        "status": {"containerStatuses": [{"state": {"terminated": {"message": message}}}]},
    }


LAST = {"location": "s3://etcd/prod/example/x.db", "revision": 42}


@pytest.mark.parametrize(
    ("case", "schedule", "status", "jobs", "phase", "available", "progressing", "degraded"),
    [
        ("nothing yet", "", {}, [], "Pending", "False", "False", "False"),
        ("running", "", {}, [job("a", "Active", "t1")], "Running", "False", "True", "False"),
        (
            "done",
            "",
            {"lastSnapshot": LAST},
            [job("a", "Succeeded", "t1")],
            "Succeeded",
            "True",
            "False",
            "False",
        ),
        ("failed", "", {}, [job("a", "Failed", "t1")], "Failed", "False", "False", "True"),
        (
            "a schedule whose newest run failed stays Available on the older snapshot",
            "@daily",
            {"lastSnapshot": LAST},
            [job("a", "Succeeded", "t1"), job("b", "Failed", "t2")],
            "Scheduled",
            "True",
            "False",
            "True",
        ),
        (
            "a schedule recovered",
            "@daily",
            {"lastSnapshot": LAST},
            [job("a", "Failed", "t1"), job("b", "Succeeded", "t2")],
            "Scheduled",
            "True",
            "False",
            "False",
        ),
        (
            "a schedule running now",
            "@daily",
            {"lastSnapshot": LAST},
            [job("a", "Succeeded", "t1"), job("b", "Active", "t2")],
            "Running",
            "True",
            "True",
            "False",
        ),
    ],
)
def test_status_from_the_jobs(
    case, schedule, status, jobs, phase, available, progressing, degraded
):
    obj = backup(schedule)
    obj["status"] = status
    result = bj.report(obj, jobs, [], None)
    conds = result["conditions"]
    got = (
        result["status"]["phase"],
        conds["Available"]["status"],
        conds["Progressing"]["status"],
        conds["Degraded"]["status"],
    )
    assert got == (phase, available, progressing, degraded), case


def test_a_failed_job_is_explained_by_its_newest_pods_message():
    pods = [
        pod("a", "old message", "t1"),
        pod("a", "Snapshot | Save: S3AuthFailed: the store refused", "t2"),
    ]
    result = bj.report(backup(), [job("a", "Failed", "t1")], pods, None)
    assert (
        result["conditions"]["Degraded"]["message"]
        == "Job a: Snapshot | Save: S3AuthFailed: the store refused"
    )
    assert result["events"] == [
        {
            "type": "Warning",
            "reason": "BackupFailed",
            "message": result["conditions"]["Degraded"]["message"],
        }
    ]
    without_pods = bj.report(backup(), [job("a", "Failed", "t1")], [], None)
    assert "BackoffLimitExceeded" in without_pods["conditions"]["Degraded"]["message"]


def test_a_refused_spec_is_degraded_and_failed_but_keeps_its_snapshot():
    obj = backup()
    obj["status"] = {"lastSnapshot": LAST}
    refusal = {
        "reason": "ClusterNotFound",
        "field": "spec.clusterName",
        "message": "spec.clusterName: no EtcdCluster example",
    }
    result = bj.report(obj, [], [], None, [refusal])
    assert result["status"]["phase"] == "Failed"
    assert result["conditions"]["Degraded"] == {
        "status": "True",
        "reason": "ClusterNotFound",
        "message": refusal["message"],
    }
    assert result["conditions"]["Available"]["status"] == "True"


def test_events_only_when_the_phase_changes():
    obj = backup()
    obj["status"] = {"phase": "Running"}
    assert bj.report(obj, [job("a", "Active", "t1")], [], None)["events"] == []
    done = copy.deepcopy(obj)
    done["status"]["lastSnapshot"] = LAST
    assert [
        e["reason"] for e in bj.report(done, [job("a", "Succeeded", "t1")], [], None)["events"]
    ] == ["BackupSucceeded"]


def test_last_schedule_time_comes_from_the_cronjob():
    cron = {"status": {"lastScheduleTime": "2026-11-24T03:00:00Z"}}
    assert (
        bj.report(backup("@daily"), [], [], cron)["status"]["lastScheduleTime"]
        == "2026-11-24T03:00:00Z"
    )


def test_jobs_of_another_backup_are_not_counted():
    other = job("x", "Failed", "t9")
    other["metadata"]["labels"][bj.LABEL_BACKUP] = "other"
    assert bj.report(backup(), [other], [], None)["status"]["phase"] == "Pending"


def test_the_filter_reports_a_refusal_instead_of_raising():
    workload = bj.FilterModule().filters()["etcd_backup_workload"]
    assert workload(backup(), "")["refused"].startswith("no image for the backup Job")
    assert workload(backup(), IMAGE)["refused"] == ""


def test_a_job_listed_as_read_and_as_written_counts_once():
    done = job("a", "Succeeded", "t1")
    written = {"metadata": {"name": "a", "labels": {bj.LABEL_BACKUP: "nightly"}}}
    obj = backup()
    obj["status"] = {"lastSnapshot": LAST}
    assert bj.report(obj, [done, written], [], None)["status"]["phase"] == "Succeeded"
    assert bj.report(backup(), [written], [], None)["status"]["phase"] == "Running"
