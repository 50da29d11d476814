"""The backup runbook's side of the operator: the Kubernetes objects that take an EtcdBackup's
snapshots (a Job, or a CronJob for a schedule, under a ServiceAccount of its own) and what the
EtcdBackup's status says about them.

The snapshot itself is taken inside the Job, by `playbooks/etcd-backup.yml` from the
operator's image: the bytes go member -> Job -> destination and never through the operator,
a volume destination mounts into the Job, and a schedule goes on while the operator is down
(docs/design-decisions.md, "Backups run as Jobs"). The Job records each verified snapshot in
the EtcdBackup's status itself (`lastSnapshot`, `retainedSnapshots`, `foreignObjects`,
`lastCheck`); a check Job (the same playbook with `check`) looks again, every check interval,
that `lastSnapshot` and its manifest are still there. The operator owns `phase`, the
conditions and the schedule times, decided here from the Jobs it reads: Available only while
the last check found the snapshot.

Each backup's Jobs run under a ServiceAccount bound to a Role of the backup's own, whose
rules name exactly the EtcdBackup, the EtcdCluster and the cluster's two TLS Secrets it
reads (`job_role`): no Secret of the namespace is listed, no other EtcdBackup is written.

Pure functions over plain dicts, tested in tests/unit/test_etcd_backup_jobs.py. Objects are
built as data (never rendered from YAML templates), so no value a user wrote can become
structure.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

from etcd_runbook.names import (
    ANN_CHECK_REQUESTED,
    GROUP,
    LABEL_BACKUP,
    LABEL_DESTINATION,
    LABEL_JOB,
    MANAGED_BY,
)
from etcd_runbook.rules.cluster.spec import (
    cluster_domain,
    image_pull_secrets,
    pod_security_context,
)
from etcd_runbook.rules.cron import RFC3339, next_schedule_time, schedule_problem
from etcd_runbook.rules.etcd_conditions import Condition, conditions
from etcd_runbook.rules.etcd_s3_store import ca_mount, ca_volume, credentials_env
from etcd_runbook.rules.etcd_tls_secrets import secret_names

CHECK = "check"
# A finished check Job is collected after this long: one is made every check interval.
CHECK_TTL_SECONDS = 600
WORKDIR = "/opt/etcd-runbook-operator"
VOLUME_ROOT = "/backup"
S3_CA_DIR = "/etc/etcd-backup/s3-ca"
TERMINATION_LOG = "/dev/termination-log"
# A Job's name goes into its Pods' job-name label (at most 63); a CronJob appends 11
# characters to its own for each Job.
MAX_JOB_NAME = 63
MAX_CRONJOB_NAME = 52
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class BackupJobError(ValueError):
    """An EtcdBackup that cannot be turned into a Job; the message names the field. The
    reason word says whose mistake it is: the user's spec (InvalidSpec) or the operator's
    setup (CannotRun)."""

    def __init__(self, message: str, reason: str = "InvalidSpec", field: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.field = field


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("spec") or {}


def _s3(obj: dict[str, Any]) -> dict[str, Any]:
    return (_spec(obj).get("destination") or {}).get("s3") or {}


def _volume(obj: dict[str, Any]) -> dict[str, Any]:
    return (_spec(obj).get("destination") or {}).get("volume") or {}


def labels(backup: dict[str, Any]) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "etcd-backup",
        "app.kubernetes.io/instance": str(_meta(backup).get("name")),
        LABEL_BACKUP: str(_meta(backup).get("name")),
        **MANAGED_BY,
    }


def account_name(backup: dict[str, Any]) -> str:
    return f"etcd-backup-{_meta(backup)['name']}"[:253]


def spec_hash(backup: dict[str, Any]) -> str:
    """Ten hex digits over the spec: a one-off Job is named by it, so a changed spec takes a
    new snapshot and an unchanged one never a second."""
    text = json.dumps(_spec(backup), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def job_name(backup: dict[str, Any]) -> str:
    return f"{_meta(backup)['name']}-{spec_hash(backup)}"


def _owner(backup: dict[str, Any]) -> list[dict[str, Any]]:
    meta = _meta(backup)
    return [
        {
            "apiVersion": f"{GROUP}/v1alpha1",
            "kind": "EtcdBackup",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def pod_spec(
    backup: dict[str, Any], image: str, options: dict[str, Any], check: bool = False
) -> dict[str, Any]:
    """The backup Pod: the operator's image running playbooks/etcd-backup.yml for this
    EtcdBackup, non-root with a read-only root, S3 credentials as environment variables from
    their Secret (never in an argument, a file of the run or a log). `check`: the Pod of a
    check Job, which only reads (a volume destination is mounted read-only)."""
    meta = _meta(backup)
    env: list[dict[str, Any]] = [
        # The playbook writes why it failed here, for the operator to put into a condition.
        {"name": "ETCD_BACKUP_RESULT_FILE", "value": TERMINATION_LOG},
        # The members' names end in the cluster's domain, as the operator was told it.
        {"name": "ETCD_RUNBOOK_CLUSTER_DOMAIN", "value": cluster_domain(options)},
    ]
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}]
    s3 = _s3(backup)
    if s3:
        env.extend(credentials_env(s3["credentialsSecret"]))
        if s3.get("caSecret"):
            mounts.append(ca_mount(S3_CA_DIR))
            # Where the playbook finds it: the mount path is said once, here.
            env.append({"name": "ETCD_BACKUP_CA_DIR", "value": S3_CA_DIR})
            volumes.append(ca_volume(s3["caSecret"]))
    volume = _volume(backup)
    if volume:
        mount: dict[str, Any] = {"name": "destination", "mountPath": VOLUME_ROOT}
        if check:
            mount["readOnly"] = True
        mounts.append(mount)
        env.append({"name": "ETCD_BACKUP_VOLUME_DIR", "value": VOLUME_ROOT})
        volumes.append(
            {"name": "destination", "persistentVolumeClaim": {"claimName": volume["claimName"]}}
        )
    extra: dict[str, Any] = {"backup": meta["name"], "namespace": meta["namespace"]}
    if check:
        extra["check"] = True
    pod: dict[str, Any] = {
        "serviceAccountName": account_name(backup),
        "restartPolicy": "Never",
        "enableServiceLinks": False,
        # The operator's defaults: a backup Pod mounts no member's data.
        "securityContext": pod_security_context({}),
        "containers": [
            {
                "name": "backup",
                "image": image,
                "imagePullPolicy": options.get("image_pull_policy", "IfNotPresent"),
                "workingDir": WORKDIR,
                # JSON extra vars: the names are values, never parsed as key=value pairs.
                "command": [
                    "/opt/venv/bin/ansible-playbook",
                    "playbooks/etcd-backup.yml",
                    "-e",
                    json.dumps(extra, sort_keys=True),
                ],
                "env": env,
                "volumeMounts": mounts,
                "terminationMessagePath": TERMINATION_LOG,
                "terminationMessagePolicy": "File",
                "resources": {
                    "requests": {"cpu": "100m", "memory": "128Mi"},
                    "limits": {
                        "memory": "256Mi" if check else options.get("memory_limit", "512Mi")
                    },
                },
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
        "volumes": volumes,
    }
    if options.get("image_pull_secrets"):
        pod["imagePullSecrets"] = options["image_pull_secrets"]
    return pod


def _job_spec(backup: dict[str, Any], image: str, options: dict[str, Any]) -> dict[str, Any]:
    return {
        # A second attempt for what passes (a member restarting); more would only repeat a
        # refusal. Each attempt is bounded: a stuck stream never holds the schedule.
        "backoffLimit": int(options.get("backoff_limit", 1)),
        "activeDeadlineSeconds": int(options.get("deadline_seconds", 3600)),
        "template": {
            "metadata": {"labels": labels(backup)},
            "spec": pod_spec(backup, image, options),
        },
    }


def _check(backup: dict[str, Any], image: str) -> None:
    meta = _meta(backup)
    name = meta.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise BackupJobError(f"metadata.name {name!r} is not a DNS label", field="metadata.name")
    limit = MAX_CRONJOB_NAME if _spec(backup).get("schedule") else MAX_JOB_NAME - 11
    if len(name) > limit:
        raise BackupJobError(
            f"metadata.name must be at most {limit} characters for a backup "
            f"{'with' if _spec(backup).get('schedule') else 'without'} a schedule "
            f"(its Jobs are named after it), not {len(name)}",
            field="metadata.name",
        )
    if not meta.get("uid") or not meta.get("namespace"):
        raise BackupJobError(
            "the EtcdBackup has no uid or namespace: pass it as read from the API", "CannotRun"
        )
    schedule = _spec(backup).get("schedule")
    if schedule and (problem := schedule_problem(str(schedule))):
        raise BackupJobError(problem, field="spec.schedule")
    if not isinstance(image, str) or not image.strip():
        raise BackupJobError(
            "no image for the backup Job: set etcd_backup_image (the operator's own image)",
            "CannotRun",
        )


def tls_secret_names(cluster: dict[str, Any] | None) -> list[str]:
    """The TLS Secrets a backup Job reads to reach the cluster's members: the server Secret
    (its ca.crt) and the client Secret (its pair); none when the cluster runs without TLS."""
    if not cluster:
        return []
    tls = _spec(cluster).get("tls") or {}
    if not tls.get("enabled", True):
        return []
    names = secret_names(str(_meta(cluster).get("name") or ""), tls)
    return sorted({names["server"], names["client"]})


def pull_secrets(cluster: dict[str, Any] | None) -> list[dict[str, str]]:
    """The registry credentials the cluster's spec.pod.imagePullSecrets names: in its
    namespace, they pull the operator's image for its backup Jobs as they pull etcd's."""
    return image_pull_secrets((_spec(cluster).get("pod") if cluster else None) or {})


def job_role(backup: dict[str, Any], secrets: list[str]) -> list[dict[str, Any]]:
    """The rules of the Role a backup's Jobs run under: what playbooks/etcd-backup.yml does,
    by name wherever the API server allows it. It reads this EtcdBackup and writes its status
    (no other's), reads the EtcdCluster, lists the cluster's Pods, claims, Services and budget
    (the etcd_common look; a list cannot be narrowed by name), and reads the two TLS Secrets
    of `secrets` by name: it cannot list the namespace's Secrets (S3 keys, CA keys). Its S3
    credentials come from the Pod's environment, never from the API."""
    name, cluster = _meta(backup)["name"], _spec(backup).get("clusterName")
    rules: list[dict[str, Any]] = [
        {
            "apiGroups": [GROUP],
            "resources": ["etcdbackups"],
            "verbs": ["get"],
            "resourceNames": [name],
        },
        {
            "apiGroups": [GROUP],
            "resources": ["etcdbackups/status"],
            "verbs": ["get", "patch"],
            "resourceNames": [name],
        },
        {
            "apiGroups": [GROUP],
            "resources": ["etcdclusters"],
            "verbs": ["get"],
            "resourceNames": [str(cluster)],
        },
        {
            "apiGroups": [""],
            "resources": ["pods", "persistentvolumeclaims", "services"],
            "verbs": ["list"],
        },
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list"]},
    ]
    # Empty resourceNames would mean every Secret: no rule at all without TLS.
    if secrets:
        rules.append(
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "verbs": ["get"],
                "resourceNames": sorted(secrets),
            }
        )
    return rules


def check_job(
    backup: dict[str, Any], image: str, options: dict[str, Any], name: str
) -> dict[str, Any]:
    """A Job that checks, read-only, that status.lastSnapshot and its manifest are still
    there and records the answer in status.lastCheck; collected CHECK_TTL_SECONDS after."""
    meta = _meta(backup)
    job_labels = {**labels(backup), LABEL_JOB: CHECK}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": job_labels,
            "ownerReferences": _owner(backup),
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": 300,
            "ttlSecondsAfterFinished": CHECK_TTL_SECONDS,
            "template": {
                "metadata": {"labels": job_labels},
                "spec": pod_spec(backup, image, options, check=True),
            },
        },
    }


def workload(
    backup: dict[str, Any], image: str, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The objects that take this EtcdBackup's snapshots, in the order to write them: its
    ServiceAccount, its Role (`job_role`, with `options["secrets"]`, the cluster's TLS
    Secrets) and a RoleBinding of the one to the other, then the Job (one-off: named after
    the spec, so written once, and not again once its snapshot was taken) or the CronJob (a
    schedule), then the check Job `options["check_job"]` names (`check_plan`), if any.

    Returns {"objects": [...], "job": name of the one-off Job or "", "cronjob": name or ""}."""
    options = options or {}
    _check(backup, image)
    meta, spec = _meta(backup), _spec(backup)
    common = {
        "namespace": meta["namespace"],
        "labels": labels(backup),
        "ownerReferences": _owner(backup),
    }
    objects = _job_access(backup, options, common)
    checking = (
        [check_job(backup, image, options, options["check_job"])]
        if options.get("check_job")
        else []
    )
    job_spec = _job_spec(backup, image, options)
    if spec.get("schedule"):
        objects.append(_cronjob(backup, job_spec, options, common))
        return {"objects": objects + checking, "job": "", "cronjob": meta["name"]}
    name = job_name(backup)
    status = backup.get("status") or {}
    if status.get("phase") == "Succeeded" and status.get("observedGeneration") == meta.get(
        "generation"
    ):
        # Taken: a Job deleted afterwards is not a request for another snapshot.
        return {"objects": objects + checking, "job": name, "cronjob": ""}
    objects.append(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, **common},
            "spec": job_spec,
        }
    )
    return {"objects": objects + checking, "job": name, "cronjob": ""}


def _job_access(
    backup: dict[str, Any], options: dict[str, Any], common: dict[str, Any]
) -> list[dict[str, Any]]:
    """The backup's own ServiceAccount, Role and RoleBinding: its Pods may read only what
    one backup needs (job_role), never the operator's wider rights."""
    account = account_name(backup)
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, **common},
            "automountServiceAccountToken": True,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": account, **common},
            "rules": job_role(backup, list(options.get("secrets") or [])),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": account, **common},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
            "subjects": [
                {"kind": "ServiceAccount", "name": account, "namespace": common["namespace"]}
            ],
        },
    ]


def _cronjob(
    backup: dict[str, Any],
    job_spec: dict[str, Any],
    options: dict[str, Any],
    common: dict[str, Any],
) -> dict[str, Any]:
    """A scheduled backup's CronJob: one snapshot at a time, and missed runs skipped rather
    than caught up."""
    spec = _spec(backup)
    cron_spec: dict[str, Any] = {
        "schedule": spec["schedule"],
        "suspend": bool(spec.get("suspend", False)),
        # One snapshot at a time: a slow one is not raced by the next.
        "concurrencyPolicy": "Forbid",
        # A run missed by more than this (the controller was down) is skipped, not
        # caught up in a burst.
        "startingDeadlineSeconds": int(options.get("starting_deadline_seconds", 300)),
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 3,
        "jobTemplate": {"metadata": {"labels": labels(backup)}, "spec": job_spec},
    }
    if spec.get("timeZone"):
        cron_spec["timeZone"] = spec["timeZone"]
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": _meta(backup)["name"], **common},
        "spec": cron_spec,
    }


def owned(obj: dict[str, Any] | None, backup: dict[str, Any]) -> bool:
    """Whether this backup is `obj`'s controller owner (by uid): the only objects the
    runbook patches or deletes."""
    return any(
        ref.get("controller") and ref.get("uid") == _meta(backup).get("uid")
        for ref in _meta(obj or {}).get("ownerReferences") or []
    )


def stale_binding(binding: dict[str, Any] | None, backup: dict[str, Any]) -> bool:
    """Whether the backup's RoleBinding is one an earlier release made (to the shared
    ClusterRole etcd-runbook-backup, which lists every Secret of the namespace) and this
    backup owns: it is deleted before the binding to the backup's own Role is written (a
    RoleBinding's roleRef cannot change)."""
    kind = ((binding or {}).get("roleRef") or {}).get("kind")
    return kind == "ClusterRole" and owned(binding, backup)


# --- is status.lastSnapshot still there ------------------------------------------------------


def _parse(text: Any) -> datetime | None:
    try:
        return datetime.strptime(str(text or ""), RFC3339).replace(tzinfo=UTC)
    except ValueError:
        return None


def check_plan(
    backup: dict[str, Any], jobs: list[dict[str, Any]], now: str, interval: int
) -> dict[str, Any]:
    """Whether a check Job should look now that status.lastSnapshot is still there (the
    object and its manifest), and if not, in how many seconds.

    Due when the snapshot was never checked (its lastCheck is of another location), when the
    annotation etcd.runbook.io/check-requested has a value no check has answered yet, or
    when the last check is `interval` seconds old; never while a Job of the backup runs (a
    snapshot Job checks its own). The Job's name is made from the location, the request and
    the interval the time falls in: one check per reason and interval, not one per run.

    Returns {"due": bool, "name": the check Job's name or "", "after": seconds until the
    next check is due (0: none to wait for), "why": str}."""
    status = backup.get("status") or {}
    last, checked = status.get("lastSnapshot") or {}, status.get("lastCheck") or {}
    idle = {"due": False, "name": "", "after": 0, "why": ""}
    moment = _parse(now)
    if not last.get("location") or moment is None or interval < 1:
        return idle
    name = _meta(backup).get("name")
    if any(
        _job_state(j) == "Active"
        for j in jobs
        if (_meta(j).get("labels") or {}).get(LABEL_BACKUP) == name
    ):
        return idle
    request = str((_meta(backup).get("annotations") or {}).get(ANN_CHECK_REQUESTED) or "")
    checked_at = _parse(checked.get("time"))
    why = ""
    if checked.get("location") != last["location"] or checked_at is None:
        why = f"{last['location']} was not checked yet"
    elif request and request != checked.get("request"):
        why = f"{ANN_CHECK_REQUESTED} asks for a check ({request})"
    else:
        age = (moment - checked_at).total_seconds()
        if age < interval:
            return {**idle, "after": max(1, min(3600, int(interval - age) + 1))}
        why = f"last checked at {checked.get('time')}"
    slot = int(moment.timestamp()) // interval
    digest = hashlib.sha256(f"check\0{last['location']}\0{request}\0{slot}".encode()).hexdigest()
    return {"due": True, "name": f"{name}-{digest[:10]}", "after": 0, "why": why}


def refusals(
    target: dict[str, Any], seen: dict[str, Any], work: dict[str, Any], namespace: str
) -> list[dict[str, str]]:
    """Why the backup cannot run, each naming its field; empty when it can. `target` is
    etcd_backup_target's, `seen` etcd_backup_observe's, `work` workload_or_refusal's."""
    if target.get("refused"):
        return [{"reason": "InvalidSpec", "field": "spec", "message": target["refused"]}]
    found: list[dict[str, str]] = []
    if not seen.get("cluster_found"):
        found.append(
            {
                "reason": "ClusterNotFound",
                "field": "spec.clusterName",
                "message": f"spec.clusterName: no EtcdCluster {target.get('cluster')} in "
                f"namespace {namespace}",
            }
        )
    keys = set(seen.get("secret_keys") or [])
    if target.get("kind") == "s3" and not {"accessKeyId", "secretAccessKey"} <= keys:
        field = "spec.destination.s3.credentialsSecret"
        found.append(
            {
                "reason": "CredentialsInvalid",
                "field": field,
                "message": f"{field}: Secret {target.get('credentials_secret')} must exist in "
                f"namespace {namespace} and hold accessKeyId and secretAccessKey",
            }
        )
    field = "spec.destination.volume.claimName"
    if target.get("kind") == "volume" and not seen.get("claim_found"):
        found.append(
            {
                "reason": "ClaimNotFound",
                "field": field,
                "message": f"{field}: no PersistentVolumeClaim {target.get('claim')} in namespace "
                f"{namespace} (create it first: the operator never makes or deletes it)",
            }
        )
    elif (
        target.get("kind") == "volume"
        and (seen.get("claim_labels") or {}).get(LABEL_DESTINATION) != "true"
    ):
        found.append(
            {
                "reason": "ClaimNotMarked",
                "field": field,
                "message": f"{field}: PersistentVolumeClaim {target.get('claim')} is not marked "
                f"for etcd backups: a backup Job mounts only a claim labelled "
                f"{LABEL_DESTINATION}=true (it writes there and makes it group-writable); "
                "label it if it is meant for them. Nothing was mounted",
            }
        )
    if work.get("refused"):
        found.append({"reason": work["reason"], "field": work["field"], "message": work["refused"]})
    return found


# --- status --------------------------------------------------------------------------------


def _job_state(job: dict[str, Any]) -> str:
    """Active, Succeeded or Failed, from the Job's conditions (then its counters)."""
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return "Succeeded" if condition["type"] == "Complete" else "Failed"
    return "Active"


def _started(job: dict[str, Any]) -> str:
    return str(
        (job.get("status") or {}).get("startTime") or _meta(job).get("creationTimestamp") or ""
    )


def failure_message(job: dict[str, Any], pods: list[dict[str, Any]]) -> str:
    """Why a Job failed: the termination message its newest Pod left (the playbook writes
    the failed step and its message there), else the Job's own reason."""
    mine = [
        p for p in pods if (_meta(p).get("labels") or {}).get("job-name") == _meta(job).get("name")
    ]
    mine.sort(key=lambda p: str(_meta(p).get("creationTimestamp") or ""), reverse=True)
    for pod in mine:
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (container.get("state") or {}).get("terminated") or {}
            message = str(terminated.get("message") or "").strip()
            if message:
                return message[:1000]
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            return f"{condition.get('reason', 'Failed')}: {condition.get('message', '')}".strip()
    return "the backup Job failed"


def _is_check(job: dict[str, Any]) -> bool:
    return (_meta(job).get("labels") or {}).get(LABEL_JOB) == CHECK


def availability(
    backup: dict[str, Any], check_jobs: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> tuple[str, str, str]:
    """Available as (status, reason, message): True only while the last check of
    status.lastSnapshot (the snapshot Job's listing right after it saved, or a check Job
    since) found the snapshot and its manifest. Missing: False, saying what is gone. Not
    checked yet, or the check could not be made: Unknown."""
    status = backup.get("status") or {}
    last, checked = status.get("lastSnapshot") or {}, status.get("lastCheck") or {}
    if not last.get("location"):
        return ("False", "NoSnapshot", "no verified snapshot yet")
    where = last["location"]
    failed = [
        j
        for j in check_jobs
        if _job_state(j) == "Failed" and _started(j) > str(checked.get("time") or "")
    ]
    if checked.get("location") != where:
        if failed:
            return (
                "Unknown",
                "CheckFailed",
                f"cannot check that {where} is still there: Job {_meta(failed[0])['name']}: "
                f"{failure_message(failed[0], pods)}",
            )
        return ("Unknown", "SnapshotUnchecked", f"checking that {where} is still there")
    at = checked.get("time", "?")
    result = checked.get("result")
    if result == "Found":
        return (
            "True",
            "SnapshotTaken",
            f"newest verified snapshot: {where} (revision {last.get('revision', '?')}), "
            f"there with its manifest at {at}",
        )
    if result == "Missing":
        return (
            "False",
            "SnapshotMissing",
            f"status.lastSnapshot is gone (checked at {at}): {checked.get('message', '')}. "
            "It cannot be restored from; take a new snapshot (a one-off EtcdBackup: create "
            "it again)",
        )
    return (
        "Unknown",
        "CheckFailed",
        f"cannot check that {where} is still there (at {at}): {checked.get('message', '')}",
    )


def _foreign_event(status: dict[str, Any]) -> list[dict[str, str]]:
    foreign = status.get("foreignObjects") or {}
    if not foreign.get("count"):
        return []
    named = "; ".join(f"{e.get('key')} ({e.get('why')})" for e in foreign.get("examples") or [])
    return [
        {
            "type": "Warning",
            "reason": "ForeignObjects",
            "message": f"{foreign['count']} objects under {foreign.get('location')} are not this "
            f"backup's snapshots and are left alone, never pruned: {named}",
        }
    ]


def report(
    backup: dict[str, Any],
    jobs: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    cronjob: dict[str, Any] | None,
    refusals: list[dict[str, str]] | None = None,
    now: str = "",
) -> dict[str, Any]:
    """What the operator writes into the EtcdBackup's status after looking at its Jobs:
    {"status": {...}, "conditions": {type: {status, reason, message}}, "events": [...]}.
    `now` (RFC 3339 UTC, from the task) is what nextScheduleTime is counted from.

    Available: `availability` (the last check found status.lastSnapshot). Progressing: a Job
    is taking a snapshot. Degraded: the spec was refused, or the newest finished snapshot
    Job failed (its message says why). Events for a change of phase (with the objects under
    the backup's prefix that are not its own, once a Job is done), and when the snapshot is
    found gone, so a resync says nothing twice."""
    spec, status = _spec(backup), backup.get("status") or {}
    ordered = _own_jobs(backup, jobs)
    mine = [j for j in ordered if not _is_check(j)]
    active = [j for j in mine if _job_state(j) == "Active"]
    finished = [j for j in mine if _job_state(j) != "Active"]
    newest_done = finished[0] if finished else None

    available = availability(backup, [j for j in ordered if _is_check(j)], pods)
    degraded = _degraded(newest_done, pods, refusals)
    phase = _backup_phase(spec, active, newest_done, refusals)
    progressing = (
        ("True", "SnapshotRunning", f"Job {_meta(active[0])['name']} is taking a snapshot")
        if active
        else ("False", "Idle", "no snapshot is being taken")
    )
    new_status: dict[str, Any] = {
        "phase": phase,
        **_schedule_times(spec, status, cronjob, refusals, now),
    }
    return {
        "status": new_status,
        "conditions": conditions(available, progressing, degraded),
        "events": _backup_events(spec, status, phase, progressing, degraded, available),
    }


def _own_jobs(backup: dict[str, Any], jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """This backup's Jobs, newest first, each once: a Job just written may be listed twice
    (as read, and as written), and the first counts."""
    unique: dict[str, dict[str, Any]] = {}
    for job in jobs:
        if (_meta(job).get("labels") or {}).get(LABEL_BACKUP) == _meta(backup).get("name"):
            unique.setdefault(str(_meta(job).get("name")), job)
    return sorted(unique.values(), key=_started, reverse=True)


def _degraded(
    newest_done: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    refusals: list[dict[str, str]] | None,
) -> Condition:
    """Degraded: a refused spec says so first (nothing runs until it is fixed), then the
    newest finished snapshot Job's failure; an older failure no longer counts."""
    degraded = (
        "False",
        "AsExpected",
        "the last backup succeeded" if newest_done else "no backup has finished yet",
    )
    if newest_done is not None and _job_state(newest_done) == "Failed":
        degraded = (
            "True",
            "BackupFailed",
            f"Job {_meta(newest_done)['name']}: {failure_message(newest_done, pods)}",
        )
    if refusals:
        first = refusals[0]
        degraded = (
            "True",
            first.get("reason", "InvalidSpec"),
            "; ".join(r["message"] for r in refusals),
        )
    return degraded


def _backup_phase(
    spec: dict[str, Any],
    active: list[dict[str, Any]],
    newest_done: dict[str, Any] | None,
    refusals: list[dict[str, str]] | None,
) -> str:
    """The phase: a refusal, then a running Job, then a schedule's state, then the newest
    one-off Job's end."""
    if refusals:
        return "Failed"
    if active:
        return "Running"
    if spec.get("schedule"):
        return "Suspended" if spec.get("suspend") else "Scheduled"
    if newest_done is None:
        return "Pending"
    return _job_state(newest_done)


def _schedule_times(
    spec: dict[str, Any],
    status: dict[str, Any],
    cronjob: dict[str, Any] | None,
    refusals: list[dict[str, str]] | None,
    now: str,
) -> dict[str, Any]:
    """lastScheduleTime and nextScheduleTime while a schedule runs; null for a time that no
    longer holds, so it goes out of status rather than misleading."""
    times: dict[str, Any] = {}
    scheduled = bool(spec.get("schedule"))
    # The CronJob passed may be the one just deleted because the schedule was removed.
    last_schedule = ((cronjob or {}).get("status") or {}).get("lastScheduleTime")
    if scheduled and last_schedule:
        times["lastScheduleTime"] = last_schedule
    elif status.get("lastScheduleTime"):
        # No schedule, or no CronJob to have fired: null takes the old time out of status.
        times["lastScheduleTime"] = None
    if scheduled and not spec.get("suspend") and not refusals:
        upcoming = next_schedule_time(spec["schedule"], spec.get("timeZone") or "", now)
        if upcoming:
            times["nextScheduleTime"] = upcoming
    if "nextScheduleTime" not in times and status.get("nextScheduleTime"):
        # Suspended, refused, no longer a schedule: null takes the old time out of status.
        times["nextScheduleTime"] = None
    return times


def _backup_events(
    spec: dict[str, Any],
    status: dict[str, Any],
    phase: str,
    progressing: Condition,
    degraded: Condition,
    available: Condition,
) -> list[dict[str, str]]:
    """Events only for a change (of phase, or the snapshot found gone), so a resync says
    nothing twice."""
    events: list[dict[str, str]] = []
    if phase != status.get("phase"):
        kind = "Warning" if phase == "Failed" else "Normal"
        message = (
            degraded[2]
            if phase == "Failed"
            else {
                "Running": progressing[2],
                "Succeeded": available[2],
                "Scheduled": f"snapshots scheduled at '{spec.get('schedule')}'",
                "Suspended": "scheduled snapshots are suspended",
                "Pending": "waiting for the backup Job",
            }[phase]
        )
        events.append({"type": kind, "reason": f"Backup{phase}", "message": message})
        if phase in ("Succeeded", "Scheduled", "Suspended"):
            events += _foreign_event(status)
    was: dict[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "Available"), {}
    )
    if available[1] == "SnapshotMissing" and was.get("reason") != "SnapshotMissing":
        events.append({"type": "Warning", "reason": "SnapshotMissing", "message": available[2]})
    return events


def workload_or_refusal(
    backup: dict[str, Any], image: str, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The filter form of `workload`: a refusal comes back as {"refused": message} with its
    `reason` and `field`."""
    try:
        return {"refused": "", "reason": "", "field": "", **workload(backup, image, options)}
    except BackupJobError as error:
        return {
            "refused": str(error),
            "reason": error.reason,
            "field": error.field,
            "objects": [],
            "job": "",
            "cronjob": "",
        }
