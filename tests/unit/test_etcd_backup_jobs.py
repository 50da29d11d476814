"""The backup runbook's Job/CronJob objects and the EtcdBackup status decided from its Jobs
(plugins/filter/etcd_backup_jobs.py), table-driven."""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from etcd_runbook.rules import cron
from etcd_runbook.rules import etcd_backup_jobs as bj
from tests.filters import load_filter

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
    assert kinds(first) == ["ServiceAccount", "Role", "RoleBinding", "Job"]
    assert first["job"].startswith("nightly-") and first["cronjob"] == ""
    assert bj.workload(backup(), IMAGE)["job"] == first["job"]  # same spec, same Job: once
    changed = bj.workload(backup(retention={"keep": 2}), IMAGE)
    assert changed["job"] != first["job"]  # a new spec takes a new snapshot


def test_a_one_off_backup_taken_is_not_taken_again_when_its_job_is_deleted():
    done = backup()
    done["metadata"]["generation"] = 2
    done["status"] = {"phase": "Succeeded", "observedGeneration": 2}
    assert kinds(bj.workload(done, IMAGE)) == ["ServiceAccount", "Role", "RoleBinding"]
    done["metadata"]["generation"] = 3  # a new spec: a new snapshot
    assert kinds(bj.workload(done, IMAGE))[-1] == "Job"


def test_a_schedule_is_a_cronjob_that_never_overlaps():
    result = bj.workload(backup("*/5 * * * *", suspend=True, timeZone="Europe/Berlin"), IMAGE)
    assert kinds(result) == ["ServiceAccount", "Role", "RoleBinding", "CronJob"]
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
    ("change", "image", "match", "reason", "field"),
    [
        (
            lambda b: b["metadata"].update(name="x" * 53),
            IMAGE,
            "at most 52 characters",
            "InvalidSpec",
            "metadata.name",
        ),
        (lambda b: b["metadata"].pop("uid"), IMAGE, "no uid", "CannotRun", ""),
        # The operator's setup, not the user's spec.
        (lambda b: None, "", "no image", "CannotRun", ""),
        # What the CronJob controller would refuse is the user's spec, refused naming the field.
        (
            lambda b: b["spec"].update(schedule="0 3 * * 7"),
            IMAGE,
            r"spec.schedule .*0 or SUN",
            "InvalidSpec",
            "spec.schedule",
        ),
        (
            lambda b: b["spec"].update(schedule="0 3 * * 1-7"),
            IMAGE,
            r"days of the week 0-6",
            "InvalidSpec",
            "spec.schedule",
        ),
        (
            lambda b: b["spec"].update(schedule="0 3 * *"),
            IMAGE,
            r"spec.schedule .*not a cron",
            "InvalidSpec",
            "spec.schedule",
        ),
        (
            lambda b: b["spec"].update(schedule="61 * * * *"),
            IMAGE,
            r"not a cron line",
            "InvalidSpec",
            "spec.schedule",
        ),
    ],
)
def test_what_cannot_become_a_job_is_refused(change, image, match, reason, field):
    obj = backup("@daily")
    change(obj)
    with pytest.raises(bj.BackupJobError, match=match):
        bj.workload(obj, image)
    refused = (
        load_filter("etcd_backup_jobs").FilterModule().filters()["etcd_backup_workload"](obj, image)
    )
    assert (refused["reason"], refused["field"], refused["objects"]) == (reason, field, [])
    assert re.search(match, refused["refused"])


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
FOUND = {"time": "2026-11-24T03:00:10Z", "location": LAST["location"], "result": "Found"}
# What a snapshot Job records: the snapshot, and that its listing found it right after.
TAKEN = {"lastSnapshot": LAST, "lastCheck": FOUND}


@pytest.mark.parametrize(
    ("case", "schedule", "status", "jobs", "phase", "available", "progressing", "degraded"),
    [
        ("nothing yet", "", {}, [], "Pending", "False", "False", "False"),
        ("running", "", {}, [job("a", "Active", "t1")], "Running", "False", "True", "False"),
        (
            "done",
            "",
            TAKEN,
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
            TAKEN,
            [job("a", "Succeeded", "t1"), job("b", "Failed", "t2")],
            "Scheduled",
            "True",
            "False",
            "True",
        ),
        (
            "a schedule recovered",
            "@daily",
            TAKEN,
            [job("a", "Failed", "t1"), job("b", "Succeeded", "t2")],
            "Scheduled",
            "True",
            "False",
            "False",
        ),
        (
            "a schedule running now",
            "@daily",
            TAKEN,
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
    obj["status"] = dict(TAKEN)
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
    done["status"].update(TAKEN)
    assert [
        e["reason"] for e in bj.report(done, [job("a", "Succeeded", "t1")], [], None)["events"]
    ] == ["BackupSucceeded"]


FIRED = "2026-11-24T03:00:00Z"
EARLIER = "2026-11-23T03:00:00Z"


@pytest.mark.parametrize(
    ("case", "spec", "cronjob", "before", "expected"),
    [
        ("from the CronJob", {"schedule": "@daily"}, {"lastScheduleTime": FIRED}, None, FIRED),
        ("newer", {"schedule": "@daily"}, {"lastScheduleTime": FIRED}, EARLIER, FIRED),
        ("not fired yet", {"schedule": "@daily"}, {}, None, "absent"),
        # The CronJob is gone (deleted by hand): no time of its own to show.
        ("CronJob gone", {"schedule": "@daily"}, None, EARLIER, None),
        ("CronJob made again", {"schedule": "@daily"}, {}, EARLIER, None),
        # The schedule was removed: the CronJob passed is the one just deleted.
        ("no longer a schedule", {}, {"lastScheduleTime": FIRED}, EARLIER, None),
        ("never a schedule", {}, None, None, "absent"),
    ],
)
def test_last_schedule_time_follows_the_cronjob(case, spec, cronjob, before, expected):
    obj = backup(**spec)
    if before:
        obj["status"] = {"lastScheduleTime": before}
    cron = None if cronjob is None else {"status": cronjob}
    status = bj.report(obj, [], [], cron)["status"]
    assert status.get("lastScheduleTime", "absent") == expected, case


def test_jobs_of_another_backup_are_not_counted():
    other = job("x", "Failed", "t9")
    other["metadata"]["labels"][bj.LABEL_BACKUP] = "other"
    assert bj.report(backup(), [other], [], None)["status"]["phase"] == "Pending"


@pytest.mark.parametrize(
    "line", ["0 3 * * 0", "0 3 * * SUN", "0 3 * * 1-6", "@weekly", "*/5 * * * *"]
)
def test_what_the_cronjob_controller_takes_is_no_problem(line):
    assert cron.schedule_problem(line) == ""


def test_the_filter_reports_a_refusal_instead_of_raising():
    workload = load_filter("etcd_backup_jobs").FilterModule().filters()["etcd_backup_workload"]
    assert workload(backup(), "")["refused"].startswith("no image for the backup Job")
    taken = workload(backup(), IMAGE)
    assert (taken["refused"], taken["reason"], taken["field"]) == ("", "", "")


def test_a_job_listed_as_read_and_as_written_counts_once():
    done = job("a", "Succeeded", "t1")
    written = {"metadata": {"name": "a", "labels": {bj.LABEL_BACKUP: "nightly"}}}
    obj = backup()
    obj["status"] = dict(TAKEN)
    assert bj.report(obj, [done, written], [], None)["status"]["phase"] == "Succeeded"
    assert bj.report(backup(), [written], [], None)["status"]["phase"] == "Running"


# --- the Jobs' rights: a Role of each backup's own ----------------------------------------


def rules_of(result: dict) -> list[dict]:
    return next(o for o in result["objects"] if o["kind"] == "Role")["rules"]


def can(rules: list[dict], verb: str, resource: str, name: str = "", group: str = "") -> bool:
    """What the API server's RBAC would answer (list/get of a name the rule does not name
    is refused; a rule without resourceNames allows any name)."""
    return any(
        group in r["apiGroups"]
        and resource in r["resources"]
        and verb in r["verbs"]
        and ("resourceNames" not in r or (name and name in r["resourceNames"]))
        for r in rules
    )


G = bj.GROUP


@pytest.mark.parametrize(
    ("verb", "resource", "name", "group", "allowed"),
    [
        ("get", "etcdbackups", "nightly", G, True),
        ("patch", "etcdbackups/status", "nightly", G, True),
        ("patch", "etcdbackups/status", "other", G, False),
        ("patch", "etcdbackups/status", "", G, False),
        ("patch", "etcdbackups", "nightly", G, False),
        ("get", "etcdbackups", "other", G, False),
        ("list", "etcdbackups", "", G, False),
        ("get", "etcdclusters", "example", G, True),
        ("get", "etcdclusters", "other", G, False),
        ("get", "secrets", "example-server-tls", "", True),
        ("get", "secrets", "example-client-tls", "", True),
        ("get", "secrets", "example-ca", "", False),
        ("get", "secrets", "creds", "", False),
        ("list", "secrets", "", "", False),
        ("watch", "secrets", "", "", False),
        ("list", "pods", "", "", True),
        ("create", "pods", "", "", False),
        ("list", "poddisruptionbudgets", "", "policy", True),
    ],
)
def test_a_backup_job_may_read_only_what_it_names(verb, resource, name, group, allowed):
    secrets = bj.tls_secret_names({"metadata": {"name": "example"}, "spec": {}})
    rules = rules_of(bj.workload(backup(), IMAGE, {"secrets": secrets}))
    assert can(rules, verb, resource, name, group) is allowed


def test_the_role_is_bound_to_the_backups_account_only():
    objects = {o["kind"]: o for o in bj.workload(backup(), IMAGE)["objects"]}
    binding = objects["RoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": objects["Role"]["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "etcd-backup-nightly", "namespace": "prod"}
    ]


@pytest.mark.parametrize(
    ("cluster", "names"),
    [
        ({"metadata": {"name": "e"}, "spec": {}}, ["e-client-tls", "e-server-tls"]),
        (
            {
                "metadata": {"name": "e"},
                "spec": {"tls": {"secrets": {"server": "s", "client": "c"}}},
            },
            ["c", "s"],
        ),
        # Without TLS no Secret at all: an empty resourceNames would mean every Secret.
        ({"metadata": {"name": "e"}, "spec": {"tls": {"enabled": False}}}, []),
        (None, []),
    ],
)
def test_the_tls_secrets_a_job_reads(cluster, names):
    assert bj.tls_secret_names(cluster) == names
    rules = rules_of(bj.workload(backup(), IMAGE, {"secrets": names}))
    assert [r for r in rules if "secrets" in r["resources"]] == (
        [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": names}]
        if names
        else []
    )


def owned_by(uid: str, kind: str = "ClusterRole") -> dict:
    return {
        "metadata": {"ownerReferences": [{"uid": uid, "controller": True}]},
        "roleRef": {"kind": kind, "name": "etcd-runbook-backup"},
    }


@pytest.mark.parametrize(
    ("binding", "stale"),
    [
        (owned_by("u-1"), True),  # an earlier release's, to the shared ClusterRole
        (owned_by("u-1", "Role"), False),  # this release's
        (owned_by("someone-else"), False),  # not the backup's: never touched
        ({"roleRef": {"kind": "ClusterRole"}}, False),
        (None, False),
    ],
)
def test_an_earlier_releases_binding_is_replaced_only_when_the_backup_owns_it(binding, stale):
    assert bj.stale_binding(binding, backup()) is stale


# --- what cannot be used: the claim's mark -------------------------------------------------------

S3_TARGET = {"kind": "s3", "cluster": "example", "credentials_secret": "creds", "refused": ""}
VOLUME_TARGET = {"kind": "volume", "cluster": "example", "claim": "backups", "refused": ""}
SEEN = {"cluster_found": True, "secret_keys": ["accessKeyId", "secretAccessKey"]}
MARKED = {**SEEN, "claim_found": True, "claim_labels": {bj.LABEL_DESTINATION: "true"}}
NO_WORK: dict = {"refused": ""}


@pytest.mark.parametrize(
    ("case", "target", "seen", "reasons"),
    [
        ("s3, all there", S3_TARGET, SEEN, []),
        ("a marked claim", VOLUME_TARGET, MARKED, []),
        (
            "a claim without the mark",
            VOLUME_TARGET,
            {**MARKED, "claim_labels": {"app": "db"}},
            ["ClaimNotMarked"],
        ),
        (
            "a claim without labels",
            VOLUME_TARGET,
            {**MARKED, "claim_labels": None},
            ["ClaimNotMarked"],
        ),
        (
            "a mark that says no",
            VOLUME_TARGET,
            {**MARKED, "claim_labels": {bj.LABEL_DESTINATION: "false"}},
            ["ClaimNotMarked"],
        ),
        ("no claim", VOLUME_TARGET, {**MARKED, "claim_found": False}, ["ClaimNotFound"]),
        ("no cluster", S3_TARGET, {**SEEN, "cluster_found": False}, ["ClusterNotFound"]),
        (
            "credentials lack a key",
            S3_TARGET,
            {**SEEN, "secret_keys": ["accessKeyId"]},
            ["CredentialsInvalid"],
        ),
        ("no credentials", S3_TARGET, {**SEEN, "secret_keys": None}, ["CredentialsInvalid"]),
        ("a bad spec says only that", {"refused": "spec.x: no"}, {}, ["InvalidSpec"]),
    ],
)
def test_what_cannot_be_used_is_refused_naming_the_field(case, target, seen, reasons):
    found = bj.refusals(target, seen, NO_WORK, "prod")
    assert [r["reason"] for r in found] == reasons, case
    for refusal in found:
        assert refusal["message"].startswith(refusal["field"]), refusal


def test_the_claim_refusal_says_how_to_mark_it():
    (refusal,) = bj.refusals(VOLUME_TARGET, {**MARKED, "claim_labels": {}}, NO_WORK, "prod")
    assert refusal["field"] == "spec.destination.volume.claimName"
    assert f"{bj.LABEL_DESTINATION}=true" in refusal["message"]
    assert "Nothing was mounted" in refusal["message"]


def test_a_workload_refusal_is_one_of_them():
    work = {"refused": "no image", "reason": "CannotRun", "field": ""}
    assert bj.refusals(S3_TARGET, SEEN, work, "prod")[-1]["reason"] == "CannotRun"


# --- is status.lastSnapshot still there ------------------------------------------------------

NOW = "2026-11-24T06:00:00Z"
HOUR = 3600


def checked(
    time: str, result: str = "Found", location: str = str(LAST["location"]), request: str = ""
) -> dict:
    return {"time": time, "location": location, "result": result, "request": request}


def with_status(status: dict, annotation: str = "") -> dict:
    obj = backup()
    obj["status"] = status
    if annotation:
        obj["metadata"]["annotations"] = {bj.ANN_CHECK_REQUESTED: annotation}
    return obj


@pytest.mark.parametrize(
    ("case", "obj", "jobs", "due", "after"),
    [
        ("no snapshot, nothing to check", with_status({}), [], False, 0),
        (
            "checked 10 minutes ago",
            with_status({"lastSnapshot": LAST, "lastCheck": checked("2026-11-24T05:50:00Z")}),
            [],
            False,
            3001,
        ),
        (
            "checked an hour ago",
            with_status({"lastSnapshot": LAST, "lastCheck": checked("2026-11-24T05:00:00Z")}),
            [],
            True,
            0,
        ),
        (
            "never checked (status of an earlier release)",
            with_status({"lastSnapshot": LAST}),
            [],
            True,
            0,
        ),
        (
            "a check of another snapshot",
            with_status(
                {"lastSnapshot": LAST, "lastCheck": checked("2026-11-24T05:59:00Z", location="x")}
            ),
            [],
            True,
            0,
        ),
        (
            "asked for by the annotation",
            with_status(
                {"lastSnapshot": LAST, "lastCheck": checked("2026-11-24T05:59:00Z")}, "now-1"
            ),
            [],
            True,
            0,
        ),
        (
            "the request already answered",
            with_status(
                {
                    "lastSnapshot": LAST,
                    "lastCheck": checked("2026-11-24T05:59:00Z", request="now-1"),
                },
                "now-1",
            ),
            [],
            False,
            3541,
        ),
        (
            "never while a Job of the backup runs",
            with_status({"lastSnapshot": LAST}),
            [job("a", "Active", "t1")],
            False,
            0,
        ),
    ],
)
def test_when_the_last_snapshot_is_checked(case, obj, jobs, due, after):
    plan = bj.check_plan(obj, jobs, NOW, HOUR)
    assert (plan["due"], plan["after"]) == (due, after), case
    assert bool(plan["name"]) is due and bool(plan["why"]) is due
    if due:
        assert plan["name"].startswith("nightly-") and len(plan["name"]) == len("nightly-") + 10


def test_one_check_job_per_reason_and_interval():
    obj = with_status({"lastSnapshot": LAST})
    name = bj.check_plan(obj, [], NOW, HOUR)["name"]
    assert bj.check_plan(obj, [], "2026-11-24T06:59:59Z", HOUR)["name"] == name
    assert bj.check_plan(obj, [], "2026-11-24T07:00:00Z", HOUR)["name"] != name
    asked = with_status({"lastSnapshot": LAST}, "again")
    assert bj.check_plan(asked, [], NOW, HOUR)["name"] != name
    assert name != bj.job_name(obj), "never the one-off snapshot Job's name"


def test_a_check_job_only_reads_and_is_collected():
    spec = backup()
    spec["spec"]["destination"] = {"volume": {"claimName": "backups", "path": "/etcd"}}
    result = bj.workload(spec, IMAGE, {"check_job": "nightly-0123456789"})
    check = result["objects"][-1]
    assert (check["kind"], check["metadata"]["name"]) == ("Job", "nightly-0123456789")
    assert check["metadata"]["labels"][bj.LABEL_JOB] == bj.CHECK
    assert check["spec"]["ttlSecondsAfterFinished"] == bj.CHECK_TTL_SECONDS
    pod = check["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert json.loads(container["command"][-1]) == {
        "backup": "nightly",
        "namespace": "prod",
        "check": True,
    }
    assert {"name": "destination", "mountPath": bj.VOLUME_ROOT, "readOnly": True} in container[
        "volumeMounts"
    ]
    assert pod["serviceAccountName"] == "etcd-backup-nightly"
    taken = copy.deepcopy(spec)
    taken["metadata"]["generation"] = 1
    taken["status"] = {"phase": "Succeeded", "observedGeneration": 1}
    assert kinds(bj.workload(taken, IMAGE, {"check_job": "n-1"}))[-1] == "Job"


def check_job(name: str, state: str, start: str) -> dict:
    made = job(name, state, start)
    made["metadata"]["labels"][bj.LABEL_JOB] = bj.CHECK
    return made


@pytest.mark.parametrize(
    ("case", "status", "jobs", "available", "reason"),
    [
        ("no snapshot", {}, [], "False", "NoSnapshot"),
        ("taken and found", TAKEN, [], "True", "SnapshotTaken"),
        ("not checked yet", {"lastSnapshot": LAST}, [], "Unknown", "SnapshotUnchecked"),
        (
            "a check of an older snapshot",
            {"lastSnapshot": LAST, "lastCheck": {**FOUND, "location": "s3://etcd/old.db"}},
            [],
            "Unknown",
            "SnapshotUnchecked",
        ),
        (
            "found gone",
            {"lastSnapshot": LAST, "lastCheck": {**FOUND, "result": "Missing", "message": "gone"}},
            [],
            "False",
            "SnapshotMissing",
        ),
        (
            "the store did not answer",
            {
                "lastSnapshot": LAST,
                "lastCheck": {**FOUND, "result": "Failed", "message": "S3Unreachable"},
            },
            [],
            "Unknown",
            "CheckFailed",
        ),
        (
            "a check Job that failed before it could say",
            {"lastSnapshot": LAST},
            [check_job("c", "Failed", "2026-11-24T04:00:00Z")],
            "Unknown",
            "CheckFailed",
        ),
    ],
)
def test_available_only_while_the_last_check_found_the_snapshot(
    case, status, jobs, available, reason
):
    result = bj.report(with_status(status), jobs, [], None)
    got = result["conditions"]["Available"]
    assert (got["status"], got["reason"]) == (available, reason), case


def test_check_jobs_are_no_snapshot_jobs():
    obj = with_status({**TAKEN, "phase": "Succeeded"})
    result = bj.report(obj, [job("a", "Succeeded", "t1"), check_job("c", "Active", "t2")], [], None)
    assert result["status"]["phase"] == "Succeeded"
    assert result["conditions"]["Progressing"]["status"] == "False"
    failed = bj.report(obj, [job("a", "Succeeded", "t1"), check_job("c", "Failed", "t2")], [], None)
    assert failed["conditions"]["Degraded"]["status"] == "False"


def test_a_snapshot_found_gone_is_said_once():
    gone = {
        **TAKEN,
        "phase": "Succeeded",
        "lastCheck": {**FOUND, "result": "Missing", "message": "x"},
    }
    first = bj.report(with_status(gone), [job("a", "Succeeded", "t1")], [], None)
    assert [e["reason"] for e in first["events"]] == ["SnapshotMissing"]
    assert first["events"][0]["type"] == "Warning"
    said = {**gone, "conditions": [{"type": "Available", "reason": "SnapshotMissing"}]}
    assert bj.report(with_status(said), [job("a", "Succeeded", "t1")], [], None)["events"] == []


def test_objects_that_are_not_the_backups_are_said_when_its_job_is_done():
    foreign = {
        "count": 2,
        "location": "s3://etcd/p/prod/example/nightly/",
        "examples": [{"key": "k1", "why": "no manifest that verifies it"}],
    }
    obj = with_status({**TAKEN, "phase": "Running", "foreignObjects": foreign})
    events = bj.report(obj, [job("a", "Succeeded", "t1")], [], None)["events"]
    assert [e["reason"] for e in events] == ["BackupSucceeded", "ForeignObjects"]
    assert "2 objects under s3://etcd/p/prod/example/nightly/" in events[1]["message"]
    assert "k1 (no manifest that verifies it)" in events[1]["message"]
    running = with_status({**TAKEN, "phase": "Scheduled", "foreignObjects": foreign})
    events = bj.report(running, [job("a", "Active", "t1")], [], None)["events"]
    assert [e["reason"] for e in events] == ["BackupRunning"]


# --- nextScheduleTime ------------------------------------------------------------------------
# Each row: the line, its timeZone ("" is UTC), now, and the next time it fires after now
# ("" for none). Days of the week used: 2026-11-24 is a Tuesday, 2026-11-30 a Monday.


@pytest.mark.parametrize(
    ("line", "zone", "now", "expected"),
    [
        # numbers, *, ranges, steps and lists
        ("7 * * * *", "", "2026-11-24T10:00:00Z", "2026-11-24T10:07:00Z"),
        ("7 * * * *", "", "2026-11-24T10:07:00Z", "2026-11-24T11:07:00Z"),  # after, not at
        ("* * * * *", "", "2026-11-24T23:59:30Z", "2026-11-25T00:00:00Z"),
        ("*/5 * * * *", "", "2026-11-24T10:02:00Z", "2026-11-24T10:05:00Z"),
        ("0 */6 * * *", "", "2026-11-24T13:00:00Z", "2026-11-24T18:00:00Z"),
        ("0 9-17 * * *", "", "2026-11-24T17:30:00Z", "2026-11-25T09:00:00Z"),
        ("10-20/5 3 * * *", "", "2026-11-24T03:16:00Z", "2026-11-24T03:20:00Z"),
        ("10-20/5 3 * * *", "", "2026-11-24T03:21:00Z", "2026-11-25T03:10:00Z"),
        ("5/20 * * * *", "", "2026-11-24T10:46:00Z", "2026-11-24T11:05:00Z"),  # 5-59/20
        ("0 1,13,22 * * *", "", "2026-11-24T13:00:00Z", "2026-11-24T22:00:00Z"),
        ("0 1-2,20-21/1 * * *", "", "2026-11-24T02:00:00Z", "2026-11-24T20:00:00Z"),
        ("0 0 1,,15 * *", "", "2026-11-24T00:00:00Z", "2026-12-01T00:00:00Z"),  # empty item
        ("0 0 ? * *", "", "2026-11-24T00:00:00Z", "2026-11-25T00:00:00Z"),
        # month and weekday names, any case
        ("0 0 1 jan,Jul *", "", "2026-11-24T00:00:00Z", "2027-01-01T00:00:00Z"),
        ("0 0 1 FEB-mar *", "", "2027-02-01T00:00:00Z", "2027-03-01T00:00:00Z"),
        ("0 12 * * MON-fri", "", "2026-11-27T12:00:00Z", "2026-11-30T12:00:00Z"),
        ("0 12 * * sun", "", "2026-11-24T00:00:00Z", "2026-11-29T12:00:00Z"),
        ("0 12 * * Sat/7", "", "2026-11-24T00:00:00Z", "2026-11-28T12:00:00Z"),
        # weekday 7 is Sunday; `*` and steps over weekdays stop at 6
        ("0 12 * * 7", "", "2026-11-24T00:00:00Z", "2026-11-29T12:00:00Z"),
        ("0 12 * * 6-7", "", "2026-11-28T12:00:00Z", "2026-11-29T12:00:00Z"),
        ("0 12 * * */3", "", "2026-11-26T12:00:00Z", "2026-11-28T12:00:00Z"),  # 0,3,6
        ("0 12 * * */3", "", "2026-11-28T12:00:00Z", "2026-11-29T12:00:00Z"),
        # macros
        ("@yearly", "", "2026-11-24T00:00:00Z", "2027-01-01T00:00:00Z"),
        ("@annually", "", "2026-11-24T00:00:00Z", "2027-01-01T00:00:00Z"),
        ("@monthly", "", "2026-11-24T00:00:00Z", "2026-12-01T00:00:00Z"),
        ("@weekly", "", "2026-11-24T00:00:00Z", "2026-11-29T00:00:00Z"),
        ("@daily", "", "2026-11-24T00:00:00Z", "2026-11-25T00:00:00Z"),
        ("@midnight", "", "2026-11-24T10:00:00Z", "2026-11-25T00:00:00Z"),
        ("@hourly", "", "2026-11-24T10:00:00Z", "2026-11-24T11:00:00Z"),
        # both day fields restricted: either one; one of them `*`: both
        ("0 0 13 * FRI", "", "2026-11-24T00:00:00Z", "2026-11-27T00:00:00Z"),
        ("0 0 13 * FRI", "", "2026-12-11T00:00:00Z", "2026-12-13T00:00:00Z"),
        ("0 0 13 * *", "", "2026-11-24T00:00:00Z", "2026-12-13T00:00:00Z"),
        ("0 0 * * FRI", "", "2026-12-11T00:00:00Z", "2026-12-18T00:00:00Z"),
        ("0 0 */2 * MON", "", "2026-11-29T00:00:00Z", "2026-11-30T00:00:00Z"),  # */2 restricts
        ("0 0 */1 * MON", "", "2026-11-24T00:00:00Z", "2026-11-30T00:00:00Z"),  # */1 does not
        ("0 0 ? * MON", "", "2026-11-24T00:00:00Z", "2026-11-30T00:00:00Z"),
        # Feb 30 never comes, but a Monday of February does (2027-02-01 is one)
        ("0 0 30 2 MON", "", "2026-11-24T00:00:00Z", "2027-02-01T00:00:00Z"),
        ("0 0 30 2 MON", "", "2027-02-01T00:00:00Z", "2027-02-08T00:00:00Z"),
        # month ends and the year's end
        ("0 0 31 * *", "", "2026-11-24T00:00:00Z", "2026-12-31T00:00:00Z"),
        ("0 0 31 * *", "", "2027-01-31T00:00:00Z", "2027-03-31T00:00:00Z"),
        ("0 0 30 * *", "", "2027-01-30T00:00:00Z", "2027-03-30T00:00:00Z"),
        ("59 23 31 12 *", "", "2026-12-31T23:59:00Z", "2027-12-31T23:59:00Z"),
        ("0 0 1 * *", "", "2026-12-31T23:59:59Z", "2027-01-01T00:00:00Z"),
        # leap years: 2100 is not one, 2400 is
        ("0 0 29 2 *", "", "2026-11-24T00:00:00Z", "2028-02-29T00:00:00Z"),
        ("0 0 29 2 *", "", "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z"),
        ("0 0 29 2 *", "", "2399-03-01T00:00:00Z", "2400-02-29T00:00:00Z"),
        # time zones: unset is UTC
        ("0 3 * * *", "UTC", "2026-11-24T10:00:00Z", "2026-11-25T03:00:00Z"),
        ("0 3 * * *", "", "2026-11-24T10:00:00Z", "2026-11-25T03:00:00Z"),
        ("0 9 * * *", "America/New_York", "2026-11-24T12:00:00Z", "2026-11-24T14:00:00Z"),
        ("0 9 * * *", "Asia/Kolkata", "2026-11-24T00:00:00Z", "2026-11-24T03:30:00Z"),
        ("0 0 * * *", "Pacific/Kiritimati", "2026-11-24T12:00:00Z", "2026-11-25T10:00:00Z"),
        ("0 0 * * TUE", "Pacific/Kiritimati", "2026-11-24T09:00:00Z", "2026-11-30T10:00:00Z"),
        # Berlin springs forward on 2026-03-29 (02:00 CET -> 03:00 CEST): 02:30 does not exist
        ("30 2 * * *", "Europe/Berlin", "2026-03-27T12:00:00Z", "2026-03-28T01:30:00Z"),
        ("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-30T00:30:00Z"),
        ("0 * * * *", "Europe/Berlin", "2026-03-29T00:30:00Z", "2026-03-29T01:00:00Z"),
        # and falls back on 2026-10-25 (03:00 CEST -> 02:00 CET): 02:30 fires once, first pass
        ("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", "2026-10-25T00:30:00Z"),
        ("30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"),
        ("*/30 * * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-25T02:00:00Z"),
        # Santiago springs forward at midnight on 2026-09-06: that day has no 00:00
        ("0 0 * * *", "America/Santiago", "2026-09-05T12:00:00Z", "2026-09-07T03:00:00Z"),
        # dates that never come
        ("0 0 30 2 *", "", "2026-11-24T00:00:00Z", ""),
        ("0 0 31 4,6,9,11 *", "", "2026-11-24T00:00:00Z", ""),
        ("0 0 31 feb *", "Europe/Berlin", "2026-11-24T00:00:00Z", ""),
    ],
)
def test_next_schedule_time(line, zone, now, expected):
    assert cron.next_schedule_time(line, zone, now) == expected


@pytest.mark.parametrize(
    "line",
    [
        "",
        "   ",
        "* * * *",
        "* * * * * *",
        "TZ=UTC 0 0 * * *",
        "60 * * * *",
        "* 24 * * *",
        "* * 0 * *",
        "* * 32 * *",
        "* * * 0 *",
        "* * * 13 *",
        "* * * * 8",
        "* * * * 7/1",
        "*/0 * * * *",
        "5-1 * * * *",
        "1-2-3 * * * *",
        "*/5/2 * * * *",
        "1- * * * *",
        "-1 * * * *",
        ", * * * *",
        "+5 * * * *",
        "a * * * *",
        "* * * JANUARY *",
        "* * * * MONDAY",
        "* * * * MON-JAN",
        "@every 1h",
        "@reboot",
        "@DAILY",
    ],
)
def test_a_line_that_cannot_be_read_has_no_next_time(line):
    assert cron.parse_cron(line) is None
    assert cron.next_schedule_time(line, "", "2026-11-24T00:00:00Z") == ""


@pytest.mark.parametrize(
    ("zone", "now"),
    [
        ("Mars/Olympus_Mons", "2026-11-24T00:00:00Z"),
        ("Europe", "2026-11-24T00:00:00Z"),  # a directory of the zone database
        ("../../etc/passwd", "2026-11-24T00:00:00Z"),
        ("utc", "2026-11-24T00:00:00Z"),  # names are case-sensitive
        ("", ""),
        ("", "2026-11-24 00:00:00"),
    ],
)
def test_no_next_time_for_an_unknown_zone_or_no_now(zone, now):
    assert cron.next_schedule_time("0 0 * * *", zone, now) == ""


@pytest.mark.parametrize(
    ("case", "spec", "jobs", "refused", "expected"),
    [
        ("a schedule", {"schedule": "0 3 * * *"}, [], False, "2026-11-25T03:00:00Z"),
        (
            "a schedule in a zone",
            {"schedule": "0 3 * * *", "timeZone": "Europe/Berlin"},
            [],
            False,
            "2026-11-25T02:00:00Z",
        ),
        (
            "a schedule taking a snapshot now",
            {"schedule": "0 3 * * *"},
            [job("a", "Active", "t1")],
            False,
            "2026-11-25T03:00:00Z",
        ),
        ("suspended", {"schedule": "0 3 * * *", "suspend": True}, [], False, None),
        (
            "suspended while a snapshot runs",
            {"schedule": "0 3 * * *", "suspend": True},
            [job("a", "Active", "t1")],
            False,
            None,
        ),
        ("refused", {"schedule": "0 3 * * *"}, [], True, None),
        ("a one-off", {}, [], False, None),
        ("a line that cannot be read", {"schedule": "0 3 * * 8"}, [], False, None),
        ("a line that never fires", {"schedule": "0 0 30 2 *"}, [], False, None),
    ],
)
def test_next_schedule_time_in_the_report(case, spec, jobs, refused, expected):
    refusals = [{"reason": "ClusterNotFound", "message": "no cluster"}] if refused else []
    status = bj.report(backup(**spec), jobs, [], None, refusals, "2026-11-24T10:00:00Z")["status"]
    assert status.get("nextScheduleTime") == expected, case


def test_without_now_the_report_has_no_next_time():
    assert "nextScheduleTime" not in bj.report(backup("0 3 * * *"), [], [], None)["status"]


def test_the_schedule_times_are_what_the_crd_accepts_as_status():
    from tests import crd_schema as cs

    schema = cs.schema_of(cs.load("etcdbackups"))["properties"]["status"]
    cron = {"status": {"lastScheduleTime": "2026-11-24T03:00:00Z"}}
    status = bj.report(backup("0 3 * * *"), [], [], cron, [], "2026-11-24T10:00:00Z")["status"]
    assert status["nextScheduleTime"] == "2026-11-25T03:00:00Z"
    assert cs.validate(schema, status) == []
    # The schema's date-time is not checked by the validator: the format is checked here.
    for key in ("lastScheduleTime", "nextScheduleTime"):
        assert schema["properties"][key] == {"type": "string", "format": "date-time"}
        assert datetime.strptime(status[key], "%Y-%m-%dT%H:%M:%S%z").tzinfo == UTC


@pytest.mark.parametrize(
    ("case", "spec", "refused"),
    [
        ("suspended", {"schedule": "0 3 * * *", "suspend": True}, False),
        ("refused", {"schedule": "0 3 * * *"}, True),
        ("no longer a schedule", {}, False),
    ],
)
def test_a_next_time_that_no_longer_holds_is_reported_null(case, spec, refused):
    obj = backup(**spec)
    obj["status"] = {"nextScheduleTime": "2026-11-25T03:00:00Z"}
    refusals = [{"reason": "ClusterNotFound", "message": "no cluster"}] if refused else []
    status = bj.report(obj, [], [], None, refusals, "2026-11-24T10:00:00Z")["status"]
    assert "nextScheduleTime" in status and status["nextScheduleTime"] is None, case


@pytest.mark.parametrize(
    "options, domain", [({}, "cluster.local"), ({"domain": "corp.internal"}, "corp.internal")]
)
def test_the_job_reaches_the_members_under_the_operator_s_cluster_domain(options, domain):
    env = pod_of(bj.workload(backup(), IMAGE, options))["containers"][0]["env"]
    assert {"name": "ETCD_RUNBOOK_CLUSTER_DOMAIN", "value": domain} in env
