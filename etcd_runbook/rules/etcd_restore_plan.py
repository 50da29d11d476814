"""The restore runbook's decisions: where an EtcdRestore's snapshot is, what may be created
from it, the restore Job that writes the first member's data, and what the EtcdRestore's
status says.

A restore makes a new EtcdCluster, annotated with the EtcdRestore that feeds it (the cluster
runbook never starts an empty first member for such a cluster), then the first member's claim,
marked `restore-pending` (the cluster runbook never starts a Pod on such a claim), then a Job
on that claim:

1. `fetch` (the operator's image, `playbooks/etcd-restore-fetch.yml`): downloads the object,
   checking its sha256 against the one expected and etcd's own hash, into an emptyDir; a
   corrupt or truncated object fails here and nothing is written to the claim;
2. `restore` (the etcd image of the new cluster's version): etcd's own tool writes the data
   dir with the first member's name and peer URL, a new cluster token, revisions bumped by a
   billion and the old ones marked compacted, so a watcher resuming from an old revision is
   told it was compacted and is never served older data.

Only once the Job has succeeded is the claim released; the cluster runbook then starts the
first member on it (its heal path) and the others join as learners, as in every bootstrap.
A failed Job leaves the claim marked, for inspection, and the restore Failed.

Pure functions over plain dicts, tested in tests/unit/test_etcd_restore_plan.py. Objects are
built as data, so no value a user wrote can become structure or a template.
"""

from __future__ import annotations

import re
from typing import Any

from etcd_runbook.names import (
    ANN_RESTORE,
    ANN_RESTORE_PENDING,
    ANN_RESTORE_UID,
    ANN_RESTORED_FROM,
    GROUP,
    LABEL_CLUSTER,
    LABEL_RECOVERY,
    LABEL_RESTORE,
    MANAGED_BY,
    MEMBER_DATA_DIR,
    MEMBER_DATA_MOUNT,
    MEMBER_DATA_SUBDIR,
    RECOVERY_APP,
)
from etcd_runbook.rules.cluster.spec import member_image, pod_security_context
from etcd_runbook.rules.etcd_conditions import Condition, conditions
from etcd_runbook.rules.etcd_s3_store import (
    StoreSpecError,
    ca_mount,
    ca_volume,
    credentials_env,
    store,
)

# etcd's documented advice: far above any revision the old cluster reached after the snapshot.
BUMP_REVISION = 1_000_000_000
SNAPSHOT_DIR = "/restore"
SNAPSHOT_FILE = f"{SNAPSHOT_DIR}/snapshot.db"
DATA_MOUNT = MEMBER_DATA_MOUNT
DATA_DIR = MEMBER_DATA_DIR
S3_CA_DIR = "/etc/etcd-restore/s3-ca"
SOURCE_DIR = "/source"  # where a volume source's claim is mounted
# Where a person's upload (etcd_snapshot_upload) lands in the fetch step, which waits for it.
UPLOAD_DIR = f"{SNAPSHOT_DIR}/upload"
UPLOAD_NAME = "snapshot.db"
FETCH_CONTAINER = "fetch"
WORKDIR = "/opt/etcd-runbook-operator"
TERMINATION_LOG = "/dev/termination-log"
MAX_JOB_NAME = 63
SOURCE_FIELD = "spec.source"
_S3_LOCATION = re.compile(r"^s3://([^/]+)/(.+)$")
_PVC_LOCATION = re.compile(r"^pvc://([^/]+)/(.+)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# The reason words the fetch step's modules give (its line reads "<step>: <Reason>: <why>").
FETCH_REASONS = (
    "SnapshotCorrupt",
    "S3AuthFailed",
    "S3BucketMissing",
    "S3ObjectMissing",
    "S3WrongRegion",
    "S3TLSError",
    "S3Unreachable",
    "S3Error",
    "SnapshotMissing",
    "VolumeMissing",
    "VolumeError",
    "UploadTimeout",
)
_FETCH_REASON = re.compile(r"\b(" + "|".join(FETCH_REASONS) + r"):")
# What etcd's restore tool says of a snapshot whose own hash does not match.
CORRUPT_SIGNS = ("missing hash", "hash mismatch", "checksum", "corrupt", "truncated")


class RestoreRefused(ValueError):
    """A restore that must not go on; it names the field and says why."""

    def __init__(self, reason: str, field: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.field, self.message = reason, field, message

    def as_dict(self) -> dict[str, str]:
        return _refusal(self.reason, self.field, self.message)


def _refusal(reason: str, field: str, message: str) -> dict[str, str]:
    return {"reason": reason, "field": field, "message": message}


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def _annotations(obj: dict[str, Any] | None) -> dict[str, str]:
    return _meta(obj).get("annotations") or {}


def _labels(obj: dict[str, Any] | None) -> dict[str, str]:
    return _meta(obj).get("labels") or {}


def _store(s3: dict[str, Any], field: str) -> dict[str, Any]:
    """The store as etcd_snapshot takes it, checked (a run by hand has no schema)."""
    try:
        return {**store(s3, field), "field": field}
    except StoreSpecError as error:
        raise RestoreRefused("InvalidSpec", error.field, str(error)) from None


def restore_source(restore: dict[str, Any], backup: dict[str, Any] | None) -> dict[str, Any]:
    """The snapshot to restore: its store, key, expected sha256 and what is known of it.
    `backup` is the EtcdBackup that `spec.source.backupName` names (None when it is missing
    or not asked for). Raises RestoreRefused naming the field."""
    source = (restore.get("spec") or {}).get("source") or {}
    kind = _source_kind(source)
    if kind == "backupName":
        return _backup_source(source["backupName"], backup)
    sha256 = _given_sha256(source)
    if kind == "volume":
        return _volume_source(source["volume"], sha256)
    if kind == "upload":
        return {
            "kind": "upload",
            "key": UPLOAD_NAME,
            "sha256": sha256,
            "location": f"upload:sha256:{sha256}",
            **_UNKNOWN,
        }
    return _s3_source(source["s3"], sha256)


# What a snapshot given by hand does not say of itself (a backup's status does).
_UNKNOWN: dict[str, Any] = {"revision": None, "size": None, "etcd_version": ""}


def _source_kind(source: dict[str, Any]) -> str:
    """The one place `spec.source` names: with two, the restore would have to guess which
    snapshot is meant."""
    given = [k for k in ("backupName", "volume", "s3") if source.get(k)]
    # `upload: {}` is set, though empty.
    if isinstance(source.get("upload"), dict):
        given.append("upload")
    if len(given) != 1:
        raise RestoreRefused(
            "InvalidSpec",
            SOURCE_FIELD,
            "spec.source must set exactly one of backupName, volume, s3 or upload",
        )
    return given[0]


def _given_sha256(source: dict[str, Any]) -> str:
    """The sha256 a snapshot given by hand must come with: the fetch step checks the
    object against it, so a wrong or swapped object is never restored."""
    sha256 = source.get("sha256")
    if not isinstance(sha256, str) or not _SHA256.match(sha256):
        raise RestoreRefused(
            "InvalidSpec",
            f"{SOURCE_FIELD}.sha256",
            "spec.source.sha256 must be the snapshot's sha256 (64 hex digits)",
        )
    return sha256


def _volume_source(volume: dict[str, Any], sha256: str) -> dict[str, Any]:
    """A snapshot file on a claim: the claim must be a name and the path a plain absolute
    one, so the fetch step never reads outside the claim."""
    field = f"{SOURCE_FIELD}.volume"
    claim, path = volume.get("claimName"), volume.get("path")
    if not isinstance(claim, str) or not _NAME.match(claim):
        raise RestoreRefused(
            "InvalidSpec", f"{field}.claimName", f"{field}.claimName must name a claim"
        )
    key = _volume_key(path)
    if not key:
        raise RestoreRefused(
            "InvalidSpec",
            f"{field}.path",
            f"{field}.path must be the snapshot file's absolute path inside the claim, "
            f"without . or .. parts, not {path!r}",
        )
    return {
        "kind": "volume",
        "claim": claim,
        "field": f"{field}.claimName",
        "key": key,
        "sha256": sha256,
        "location": f"pvc://{claim}/{key}",
        **_UNKNOWN,
    }


def _s3_source(s3: dict[str, Any], sha256: str) -> dict[str, Any]:
    """An object in a store given by hand: its key and the store, checked (a run by hand
    has no schema)."""
    key = s3.get("key")
    if not isinstance(key, str) or not key:
        raise RestoreRefused(
            "InvalidSpec", f"{SOURCE_FIELD}.s3.key", "spec.source.s3.key is required"
        )
    store = _store(s3, f"{SOURCE_FIELD}.s3")
    return {
        "kind": "s3",
        "store": store,
        "key": key,
        "sha256": sha256,
        "location": f"s3://{store['bucket']}/{key}",
        **_UNKNOWN,
    }


def _backup_source(name: str, backup: dict[str, Any] | None) -> dict[str, Any]:
    """An EtcdBackup's newest verified snapshot, and only while it is still where the
    backup's destination says: anything else would restore nothing, or something else."""
    field = f"{SOURCE_FIELD}.backupName"
    if not backup:
        raise RestoreRefused(
            "SourceNotFound", field, f"{field}: no EtcdBackup {name} in this namespace"
        )
    destination = (backup.get("spec") or {}).get("destination") or {}
    s3 = destination.get("s3") or {}
    claim = str((destination.get("volume") or {}).get("claimName") or "")
    last = (backup.get("status") or {}).get("lastSnapshot") or {}
    match = (_S3_LOCATION if s3 else _PVC_LOCATION).match(str(last.get("location") or ""))
    if not match or not _SHA256.match(str(last.get("sha256") or "")):
        raise RestoreRefused(
            "SourceNotFound",
            field,
            f"{field}: EtcdBackup {name} has no verified snapshot yet",
        )
    _refuse_missing_snapshot(backup, name, field, last)
    known = {
        "key": match.group(2),
        "sha256": last["sha256"],
        "location": last["location"],
        "revision": last.get("revision"),
        "size": last.get("size"),
        "etcd_version": str(last.get("etcdVersion") or ""),
    }
    store = _store(s3, f"EtcdBackup {name} spec.destination.s3") if s3 else {}
    where = store["bucket"] if store else claim
    if match.group(1) != where:
        raise RestoreRefused(
            "SourceNotFound",
            field,
            f"{field}: EtcdBackup {name}'s newest snapshot {last['location']} is not in its "
            f"{'bucket' if s3 else 'claim'} {where} (its destination changed since)",
        )
    if store:
        return {"kind": "s3", "store": store, **known}
    return {"kind": "volume", "claim": claim, "field": field, **known}


def _refuse_missing_snapshot(
    backup: dict[str, Any], name: str, field: str, last: dict[str, Any]
) -> None:
    """The backup's check found its newest snapshot gone (or replaced): restoring from it
    would fail in the Job, or restore something else. Said here, before anything is made."""
    available = next(
        (
            c
            for c in (backup.get("status") or {}).get("conditions") or []
            if isinstance(c, dict) and c.get("type") == "Available"
        ),
        {},
    )
    if available.get("reason") == "SnapshotMissing":
        raise RestoreRefused(
            "SourceNotFound",
            field,
            f"{field}: EtcdBackup {name}'s newest snapshot {last['location']} is missing "
            f"({available.get('message') or 'see its Available condition'}); restore from "
            "spec.source.s3 or spec.source.volume with another snapshot's key and sha256 "
            "(its retainedSnapshots)",
        )


def _volume_key(path: Any) -> str:
    """The key of a file given by its absolute path inside a claim; empty when the path is
    not one."""
    if not isinstance(path, str) or not path.startswith("/"):
        return ""
    parts = path.split("/")[1:]
    if not parts or any(p in ("", ".", "..") for p in parts):
        return ""
    return "/".join(parts)


def _minor(version: str) -> tuple[int, int] | None:
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def version_refusal(snapshot_version: str, target_version: str) -> dict[str, str] | None:
    """etcd reads data of its own minor or the one before: a newer snapshot, or one more
    than a minor older, is refused before anything is written."""
    snap, target = _minor(snapshot_version), _minor(target_version)
    if snap is None or target is None or target in (snap, (snap[0], snap[1] + 1)):
        return None
    return _refusal(
        "UnsafeVersionChange",
        "spec.cluster.spec.version",
        f"spec.cluster.spec.version {target_version} cannot start on a snapshot "
        f"taken from etcd {snapshot_version}: use {snap[0]}.{snap[1]} or {snap[0]}.{snap[1] + 1}",
    )


def job_name(restore: dict[str, Any]) -> str:
    return f"{_meta(restore).get('name')}-restore"


def restore_tool(version: str) -> list[str]:
    """etcd's restore tool of that version: etcdutl from 3.5, etcdctl before."""
    minor = _minor(version) or (3, 6)
    return ["/usr/local/bin/etcdutl" if minor >= (3, 5) else "/usr/local/bin/etcdctl"]


def _fetch_from_s3(
    s3_store: dict[str, Any],
    env: list[dict[str, Any]],
    mounts: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
) -> None:
    """What the fetch step needs to read from a store: where it is, the credentials from
    their Secret (never in a value of the Job), its CA."""
    env.extend(
        [
            {"name": "ETCD_RESTORE_S3_ENDPOINT", "value": s3_store["endpoint"]},
            {"name": "ETCD_RESTORE_S3_BUCKET", "value": s3_store["bucket"]},
            {"name": "ETCD_RESTORE_S3_REGION", "value": s3_store["region"]},
            {"name": "ETCD_RESTORE_S3_PATH_STYLE", "value": str(s3_store["path_style"]).lower()},
        ]
    )
    env.extend(credentials_env(s3_store["credentials_secret"]))
    if s3_store["ca_secret"]:
        mounts.append(ca_mount(S3_CA_DIR))
        env.append({"name": "ETCD_RESTORE_CA_FILE", "value": f"{S3_CA_DIR}/ca.crt"})
        volumes.append(ca_volume(s3_store["ca_secret"]))


def upload_wait(options: dict[str, Any]) -> int:
    """Seconds the fetch step waits for an upload: the Job's deadline less ten minutes for
    the checks and etcd's tool, so a missing upload fails with its own message, not the
    Job's deadline."""
    return max(60, int(options.get("deadline_seconds", 3600)) - 600)


def fetching_pod(pods: list[dict[str, Any]]) -> str:
    """The restore Pod whose fetch step is running (the one that can take an upload), or
    empty."""
    for pod in pods:
        if _meta(pod).get("deletionTimestamp"):
            continue
        for status in (pod.get("status") or {}).get("initContainerStatuses") or []:
            if status.get("name") == FETCH_CONTAINER and (status.get("state") or {}).get("running"):
                return str(_meta(pod).get("name") or "")
    return ""


def restore_job(
    restore: dict[str, Any],
    source: dict[str, Any],
    target: dict[str, Any],
    image: str,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The Job that writes the first member's data: `fetch` then `restore` (module doc).
    Runs once (a second attempt would find a half-written data dir); needs no API access."""
    meta = _meta(restore)
    labels = {
        "app.kubernetes.io/name": "etcd-restore",
        "app.kubernetes.io/instance": str(meta.get("name")),
        LABEL_RESTORE: str(meta.get("name")),
        **MANAGED_BY,
    }
    owner = {"kind": "EtcdRestore", "name": meta["name"], "uid": meta["uid"]}
    return _seed_job(
        job_name(restore), meta["namespace"], labels, owner, source, target, image, options or {}
    )


def recovery_job(
    cluster: dict[str, Any],
    fingerprint: str,
    source: dict[str, Any],
    target: dict[str, Any],
    image: str,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The Job of a quorum recovery (recover_steps.py). From a survivor (`source` kind
    member, its `claim`): the claim, its etcd stopped, mounted read-only in the fetch step
    alone, which copies the member's database out (etcd_snapshot state=fetched,
    member_data_dir). The copied database has no hash trailer, hence --skip-hash-check; the
    fetch step walked the whole file first. From an EtcdBackup (`source` as _backup_source
    reads it): its snapshot fetched and checked as a restore's Job does. etcd's own tool
    then restores it into the new first member's claim, with revisions bumped and marked
    compacted. Owned by the EtcdCluster, named and labelled for the request's fingerprint."""
    meta = _meta(cluster)
    name = str(meta["name"])
    labels = {
        "app.kubernetes.io/name": RECOVERY_APP,
        "app.kubernetes.io/instance": name,
        LABEL_CLUSTER: name,
        LABEL_RECOVERY: fingerprint,
        **MANAGED_BY,
    }
    owner = {"kind": "EtcdCluster", "name": name, "uid": meta["uid"]}
    return _seed_job(
        recovery_job_name(name, fingerprint),
        meta["namespace"],
        labels,
        owner,
        source,
        target,
        image,
        options or {},
    )


def recovery_job_name(cluster: str, fingerprint: str) -> str:
    """`<cluster>-recover-<fingerprint, first ten>`: one Job per request, so a Job of an
    earlier request is never taken for this one's."""
    return f"{cluster}-recover-{fingerprint[:10]}"


def _seed_job(
    name: str,
    namespace: str,
    labels: dict[str, str],
    owner: dict[str, Any],
    source: dict[str, Any],
    target: dict[str, Any],
    image: str,
    options: dict[str, Any],
) -> dict[str, Any]:
    """A Job that writes a first member's claim once: the fetch step, then etcd's tool."""
    pod = _restore_pod(source, target, image, options)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/v1alpha1",
                    **owner,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": int(options.get("deadline_seconds", 3600)),
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def _fetch_inputs(
    source: dict[str, Any], target: dict[str, Any], options: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The fetch step's env, mounts and the Pod's volumes: what it checks the snapshot
    against, and where the snapshot comes from (an upload, a claim or a store)."""
    env: list[dict[str, Any]] = [
        {"name": "ETCD_RESTORE_RESULT_FILE", "value": TERMINATION_LOG},
        {"name": "ETCD_RESTORE_FETCH_TO", "value": SNAPSHOT_FILE},
    ]
    if source.get("kind") != "member":
        env.append({"name": "ETCD_RESTORE_KEY", "value": source["key"]})
        env.append({"name": "ETCD_RESTORE_SHA256", "value": source["sha256"]})
    fetch_mounts: list[dict[str, Any]] = [
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "snapshot", "mountPath": SNAPSHOT_DIR},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
        {"name": "snapshot", "emptyDir": {}},
        {"name": "data", "persistentVolumeClaim": {"claimName": target["claim_name"]}},
    ]
    if source.get("kind") == "member":
        # A survivor's claim: read-only, its data left as it was for another try or a person.
        env.append(
            {"name": "ETCD_RESTORE_MEMBER_DIR", "value": f"{SOURCE_DIR}/{MEMBER_DATA_SUBDIR}"}
        )
        fetch_mounts.append({"name": "source", "mountPath": SOURCE_DIR, "readOnly": True})
        volumes.append(
            {
                "name": "source",
                "persistentVolumeClaim": {"claimName": source["claim"], "readOnly": True},
            }
        )
    elif source.get("kind") == "upload":
        # The fetch step waits this long for a person's upload, then checks it as a copy
        # from a claim.
        env.append({"name": "ETCD_RESTORE_DIRECTORY", "value": UPLOAD_DIR})
        env.append({"name": "ETCD_RESTORE_UPLOAD_WAIT", "value": str(upload_wait(options))})
    elif source.get("kind") == "volume":
        # Read-only: a restore never changes the backups it reads.
        env.append({"name": "ETCD_RESTORE_DIRECTORY", "value": SOURCE_DIR})
        fetch_mounts.append({"name": "source", "mountPath": SOURCE_DIR, "readOnly": True})
        volumes.append(
            {
                "name": "source",
                "persistentVolumeClaim": {"claimName": source["claim"], "readOnly": True},
            }
        )
    else:
        _fetch_from_s3(source["store"], env, fetch_mounts, volumes)
    return env, fetch_mounts, volumes


def _restore_command(source: dict[str, Any], target: dict[str, Any]) -> list[str]:
    """etcd's own restore: the first member's name and peer URL, a new token, and revisions
    bumped past any the old cluster reached, so no watcher is served older data. A member's
    own database has no hash trailer (only `snapshot save` appends one)."""
    member = target["member"]
    peer = target["peer_url"]
    unhashed = ["--skip-hash-check"] if source.get("kind") == "member" else []
    return [
        *restore_tool(str(target["spec"]["version"])),
        "snapshot",
        "restore",
        SNAPSHOT_FILE,
        f"--data-dir={DATA_DIR}",
        f"--name={member}",
        f"--initial-cluster={member}={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster-token={target['token']}",
        f"--bump-revision={BUMP_REVISION}",
        # etcd refuses a bump without it: watchers of revisions in the gap must be told.
        "--mark-compacted",
        *unhashed,
    ]


def _restore_pod(
    source: dict[str, Any], target: dict[str, Any], image: str, options: dict[str, Any]
) -> dict[str, Any]:
    """The restore Pod: the fetch step in the operator's image, then etcd's tool in the new
    cluster's; non-root, read-only, without API access, placed where the member may run."""
    spec = target["spec"]
    env, fetch_mounts, volumes = _fetch_inputs(source, target, options)
    locked_down = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_security_context(spec["pod"]),
        "initContainers": [
            {
                "name": FETCH_CONTAINER,
                "image": image,
                "imagePullPolicy": options.get("image_pull_policy", "IfNotPresent"),
                "workingDir": WORKDIR,
                "command": ["/opt/venv/bin/ansible-playbook", "playbooks/etcd-restore-fetch.yml"],
                "env": env,
                "volumeMounts": fetch_mounts,
                "terminationMessagePath": TERMINATION_LOG,
                "terminationMessagePolicy": "File",
                "resources": {
                    "requests": {"cpu": "100m", "memory": "128Mi"},
                    "limits": {"memory": options.get("memory_limit", "512Mi")},
                },
                "securityContext": locked_down,
            }
        ],
        "containers": [
            {
                "name": "restore",
                "image": member_image(spec, spec["version"]),
                "imagePullPolicy": "IfNotPresent",
                "command": _restore_command(source, target),
                # etcd 3.4's etcdctl speaks the v2 API unless told.
                "env": [{"name": "ETCDCTL_API", "value": "3"}],
                "volumeMounts": [
                    {"name": "snapshot", "mountPath": SNAPSHOT_DIR, "readOnly": True},
                    {"name": "data", "mountPath": DATA_MOUNT},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "securityContext": locked_down,
            }
        ],
        "volumes": volumes,
    }
    # Where the member may run, the restore must too: the claim binds on the Job's node.
    if spec["pod"]["node_selector"]:
        pod["nodeSelector"] = spec["pod"]["node_selector"]
    if spec["pod"]["tolerations"]:
        pod["tolerations"] = spec["pod"]["tolerations"]
    # The member's registry credentials pull the restore's etcd image; the operator's image
    # needs them from the same namespace too.
    if spec["pod"].get("image_pull_secrets"):
        pod["imagePullSecrets"] = spec["pod"]["image_pull_secrets"]
    return pod


def _job_state(job: dict[str, Any] | None) -> str:
    if not job:
        return "Absent"
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return "Succeeded" if condition["type"] == "Complete" else "Failed"
    return "Active"


def failure_message(job: dict[str, Any], pods: list[dict[str, Any]]) -> str:
    """Why the restore Job failed: the message its Pod's failed container left (the fetch
    step writes the failed step, its reason word and message; etcd's tool its last log
    lines), else the Job's own reason."""
    for pod in sorted(
        pods, key=lambda p: str(_meta(p).get("creationTimestamp") or ""), reverse=True
    ):
        if _labels(pod).get("job-name") != _meta(job).get("name"):
            continue
        status = pod.get("status") or {}
        for container in [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]:
            terminated = (container.get("state") or {}).get("terminated") or {}
            if terminated.get("exitCode", 0) != 0:
                message = str(terminated.get("message") or terminated.get("reason") or "")
                return f"{container.get('name')}: {message.strip()[-1000:]}"
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            return f"{condition.get('reason', 'Failed')}: {condition.get('message', '')}".strip()
    return "the restore Job failed"


def failure_reason(message: str) -> str:
    """The word for Degraded: the fetch step's own reason, else what etcd's tool said."""
    if match := _FETCH_REASON.search(message):
        return match.group(1)
    if message.startswith("restore:") and any(s in message.lower() for s in CORRUPT_SIGNS):
        return "SnapshotCorrupt"
    return "RestoreFailed"


def _controller(obj: dict[str, Any] | None) -> dict[str, Any]:
    """The ownerReference of `obj` that is its controller, or {}."""
    refs = _meta(obj).get("ownerReferences") or []
    return next((r for r in refs if isinstance(r, dict) and r.get("controller") is True), {})


def _owner_words(obj: dict[str, Any]) -> str:
    ref = _controller(obj)
    return f"{ref.get('kind')} {ref.get('name')} uid {ref.get('uid')}" if ref else "none"


def _owned(seen: dict[str, Any], uid: str) -> tuple[dict[str, Any] | None, list[Any], Any]:
    """The restore Job if this EtcdRestore (`uid`) controls it, the Pods that Job controls,
    and any other Job of its name. Only its own Job ever counts: an orphan (an earlier
    restore of the same name deleted with --cascade=orphan) or one not yet collected has
    succeeded for nothing written into this restore's claim."""
    job = seen.get("job")
    if not job:
        return None, [], None
    if not uid or _controller(job).get("uid") != uid:
        return None, [], job
    job_uid = _meta(job).get("uid")
    pods = [p for p in seen.get("pods") or [] if _controller(p).get("uid") == job_uid]
    return job, pods, None


def _seed_claim(claims: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((c for c in claims if _meta(c).get("name") == name), None)


def _members_ready(cluster: dict[str, Any] | None) -> tuple[int, int]:
    """(ready members, members wanted) of the EtcdCluster as its status says."""
    status = (cluster or {}).get("status") or {}
    ready = status.get("readyMembers")
    size = ((cluster or {}).get("spec") or {}).get("size")
    return (
        ready if isinstance(ready, int) else 0,
        size if isinstance(size, int) and size > 0 else 1,
    )


def _cluster_restored(cluster: dict[str, Any] | None) -> bool:
    """Available with every member ready: Available alone comes with the first member, while
    the others are still copying its data as learners, and a person reading Succeeded takes
    it that the cluster is back whole."""
    ready, size = _members_ready(cluster)
    return ready >= size and any(
        c.get("type") == "Available" and c.get("status") == "True"
        for c in ((cluster or {}).get("status") or {}).get("conditions") or []
    )


def plan(restore: dict[str, Any], seen: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """Everything one run of the restore runbook does, from one look.

    `seen`: `cluster` (the EtcdCluster of the target name, or None), `backup` (the EtcdBackup
    named, or None), `secret_keys` (the credentials Secret's key names, None when missing),
    `claims` (the claims labelled with the target cluster), `job` and `pods` (the restore's).
    `target`: the new cluster as the cluster runbook builds it: `name`, `spec` (normalized,
    with its problems), `member` (the first), `claim` (its claim as the cluster runbook makes
    it), `claim_name`, `peer_url`, `token`; and `image`, the operator's own.

    Returns the objects to create in order (`create`), the claim to release (`release`), the
    EtcdCluster label to drop once done (`unlabel`), where a person's upload goes
    (`upload`: the Pod whose fetch step waits for it, or None), and `report` (status,
    conditions, events)."""
    meta = _meta(restore)
    uid = str(meta.get("uid") or "")
    status = restore.get("status") or {}
    cluster = seen.get("cluster")
    claims = seen.get("claims") or []
    job, pods, other_job = _owned(seen, uid)
    ours = bool(cluster) and _annotations(cluster).get(ANN_RESTORE_UID) == uid
    seed = _seed_claim(claims, target["claim_name"])
    refusals: list[dict[str, str]] = []
    source: dict[str, Any] = {}
    done = status.get("phase") == "Succeeded"
    if not done:
        source, refusals = _checked(restore, seen, target, ours, seed, job, other_job)
    state = _job_state(job)
    pending = bool(seed) and bool(_annotations(seed).get(ANN_RESTORE_PENDING))
    create: list[dict[str, Any]] = []
    release: dict[str, Any] | None = None
    if not refusals and not done and state != "Failed":
        create = _creations(restore, source, target, cluster, seed, state, pending)
        if state == "Succeeded" and pending:
            release = _release(restore, source, target)
    available = ours and _cluster_restored(cluster) and not pending and bool(seed)
    # A released claim says the Job succeeded, even once the Job is gone.
    released = ours and bool(seed) and not pending
    report = _report(
        restore,
        source,
        "Succeeded" if released and state == "Absent" else state,
        job,
        pods,
        refusals,
        available,
        cluster,
        str(seen.get("now") or ""),
    )
    return {
        "refusals": refusals,
        "source": source,
        "upload": _upload(source, pods, state),
        "create": create,
        "release": release,
        "unlabel": _unlabel(restore, target, cluster, report),
        "report": report,
    }


def _checked(
    restore: dict[str, Any],
    seen: dict[str, Any],
    target: dict[str, Any],
    ours: bool,
    seed: dict[str, Any] | None,
    job: dict[str, Any] | None,
    other_job: Any,
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The snapshot to restore and every reason not to go on, all said at once so a person
    fixes them in one edit; each names its field."""
    refusals: list[dict[str, str]] = []
    source: dict[str, Any] = {}
    try:
        source = restore_source(restore, seen.get("backup"))
    except RestoreRefused as refused:
        refusals.append(refused.as_dict())
    for problem in (target["spec"].get("problems") or []) if not ours else []:
        refusals.append(
            {
                **problem,
                "field": f"spec.cluster.{problem['field']}",
                "message": f"spec.cluster.{problem['message']}",
            }
        )
    refusals.extend(_name_refusals(restore, seen, target, ours, seed, other_job))
    refusals.extend(_source_refusals(source, seen))
    if source and not ours:
        problem = version_refusal(source["etcd_version"], str(target["spec"]["version"]))
        if problem:
            refusals.append(problem)
    if not target.get("image") and not job:
        refusals.append(
            _refusal(
                "CannotRun", "", "the operator's own image is unknown (set ETCD_RUNBOOK_IMAGE)"
            )
        )
    if len(job_name(restore)) > MAX_JOB_NAME:
        refusals.append(
            _refusal(
                "InvalidSpec",
                "metadata.name",
                f"metadata.name: at most {MAX_JOB_NAME - len('-restore')} "
                "characters (the restore Job is named after it)",
            )
        )
    return source, refusals


def _name_refusals(
    restore: dict[str, Any],
    seen: dict[str, Any],
    target: dict[str, Any],
    ours: bool,
    seed: dict[str, Any] | None,
    other_job: Any,
) -> list[dict[str, str]]:
    """Names taken by something this restore did not make (a cluster, claims, a Job): a
    restore never overwrites, writes into or counts another's object."""
    uid = str(_meta(restore).get("uid") or "")
    name = target["name"]
    refusals: list[dict[str, str]] = []
    if seen.get("cluster") and not ours:
        refusals.append(
            _refusal(
                "ClusterExists",
                "spec.cluster.name",
                f"spec.cluster.name: an EtcdCluster {name} exists; a "
                "restore never overwrites a cluster: choose another name",
            )
        )
    foreign = [
        str(_meta(c).get("name"))
        for c in ([] if ours else seen.get("claims") or [])
        if _annotations(c).get(ANN_RESTORE_UID) != uid
    ]
    if foreign:
        refusals.append(
            _refusal(
                "ClaimsExist",
                "spec.cluster.name",
                f"spec.cluster.name: claims of an earlier cluster named "
                f"{name} remain ({', '.join(sorted(foreign))}); the new members "
                "would start on them: delete them once sure their data is not needed, or "
                "choose another name",
            )
        )
    first = seen.get("first_claim")
    if first and _labels(first).get(LABEL_CLUSTER) != name:
        refusals.append(
            _refusal(
                "NameTaken",
                "spec.cluster.name",
                f"spec.cluster.name: claim {target['claim_name']} exists and is not a "
                f"claim of an EtcdCluster {name} (it lacks the label "
                f"{LABEL_CLUSTER}={name}): a restore never writes into another's "
                "claim: choose another name",
            )
        )
    if other_job:
        refusals.append(
            _refusal(
                "NameTaken",
                "metadata.name",
                f"metadata.name: Job {job_name(restore)} exists and is not this "
                f"EtcdRestore's (its controller: {_owner_words(other_job)}), so it never "
                "counts for this restore; nothing was created. Delete it once sure it is "
                "not needed (an earlier restore's of the same name, orphaned?): the restore "
                "then goes on",
            )
        )
    if seed and _annotations(seed).get(ANN_RESTORE_UID) != uid and ours:
        refusals.append(
            _refusal(
                "ClaimsExist",
                "spec.cluster.name",
                f"claim {target['claim_name']} was not made by this restore",
            )
        )
    return refusals


def _source_refusals(source: dict[str, Any], seen: dict[str, Any]) -> list[dict[str, str]]:
    """What the Job would need to read the snapshot and is missing (the source claim, the
    store's credentials): said now rather than as a failed Job."""
    refusals: list[dict[str, str]] = []
    if source.get("kind") == "volume" and seen.get("source_claim_found") is False:
        refusals.append(
            _refusal(
                "SourceNotFound",
                source["field"],
                f"{source['field']}: no PersistentVolumeClaim {source['claim']} in this "
                "namespace holds the snapshot",
            )
        )
    if source.get("kind") == "s3":
        keys = set(seen.get("secret_keys") or [])
        if not {"accessKeyId", "secretAccessKey"} <= keys:
            store = source["store"]
            refusals.append(
                _refusal(
                    "CredentialsInvalid",
                    f"{store['field']}.credentialsSecret",
                    f"{store['field']}.credentialsSecret: Secret "
                    f"{store['credentials_secret']} must exist in this namespace and hold "
                    "accessKeyId and secretAccessKey",
                )
            )
    return refusals


def _creations(
    restore: dict[str, Any],
    source: dict[str, Any],
    target: dict[str, Any],
    cluster: dict[str, Any] | None,
    seed: dict[str, Any] | None,
    state: str,
    pending: bool,
) -> list[dict[str, Any]]:
    """What is still missing, in order: the EtcdCluster (annotated, so the cluster runbook
    starts no empty first member), the first claim (marked restore-pending, so no Pod starts
    on it), then the Job that writes it."""
    meta = _meta(restore)
    uid = str(meta.get("uid") or "")
    create: list[dict[str, Any]] = []
    if not cluster:
        create.append(
            {
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": "EtcdCluster",
                "metadata": {
                    "name": target["name"],
                    "namespace": meta["namespace"],
                    # The label queues this restore when the cluster changes; the
                    # annotations stay, as the record of where its data came from.
                    "labels": {LABEL_RESTORE: str(meta["name"]), **MANAGED_BY},
                    "annotations": {ANN_RESTORE: str(meta["name"]), ANN_RESTORE_UID: uid},
                },
                "spec": (restore.get("spec") or {}).get("cluster", {}).get("spec") or {},
            }
        )
    if not seed:
        claim = target["claim"]
        claim_meta = claim["metadata"]
        create.append(
            {
                **claim,
                "metadata": {
                    **claim_meta,
                    "annotations": {
                        **(claim_meta.get("annotations") or {}),
                        ANN_RESTORE_PENDING: uid,
                        ANN_RESTORE_UID: uid,
                    },
                },
            }
        )
    if state == "Absent" and (pending or not seed):
        options = {"deadline_seconds": target.get("job_deadline") or 3600}
        create.append(restore_job(restore, source, target, target["image"], options))
    return create


def _release(
    restore: dict[str, Any], source: dict[str, Any], target: dict[str, Any]
) -> dict[str, Any]:
    """The patch that hands the written claim to the cluster runbook (its heal path starts
    the first member), recording where its data came from."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": target["claim_name"],
            "namespace": _meta(restore)["namespace"],
            "annotations": {
                ANN_RESTORE_PENDING: None,
                ANN_RESTORED_FROM: source["location"],
            },
        },
    }


def _unlabel(
    restore: dict[str, Any],
    target: dict[str, Any],
    cluster: dict[str, Any] | None,
    report: dict[str, Any],
) -> dict[str, Any] | None:
    """Once restored, the label that queued this restore on the cluster's changes goes: the
    cluster is then the cluster runbook's alone."""
    if report["status"]["phase"] == "Succeeded" and cluster and LABEL_RESTORE in _labels(cluster):
        return {
            "apiVersion": f"{GROUP}/v1alpha1",
            "kind": "EtcdCluster",
            "metadata": {
                "name": target["name"],
                "namespace": _meta(restore)["namespace"],
                "labels": {LABEL_RESTORE: None},
            },
        }
    return None


def _upload(
    source: dict[str, Any], pods: list[dict[str, Any]], state: str
) -> dict[str, Any] | None:
    """Where a person's upload goes: only a running fetch step can take it."""
    pod = fetching_pod(pods) if state == "Active" else ""
    if source.get("kind") == "upload" and pod:
        return {
            "pod": pod,
            "container": FETCH_CONTAINER,
            "dest": f"{UPLOAD_DIR}/{UPLOAD_NAME}",
            "sha256": source["sha256"],
        }
    return None


def _report(
    restore: dict[str, Any],
    source: dict[str, Any],
    state: str,
    job: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    refusals: list[dict[str, str]],
    available: bool,
    cluster: dict[str, Any] | None,
    seen_now: str,
) -> dict[str, Any]:
    """The EtcdRestore's status fields, its three conditions and the event for a change."""
    status = restore.get("status") or {}
    name = str((restore.get("spec") or {}).get("cluster", {}).get("name") or "")
    phase, progressing, degraded = _phase(
        restore, source, state, job, pods, refusals, available, cluster
    )
    if phase == "Succeeded":
        available_c = ("True", "Restored", f"EtcdCluster {name} runs on the restored data")
    else:
        available_c = ("False", phase, f"EtcdCluster {name} is not restored yet")
    return {
        "status": _status_fields(restore, source, phase, job, cluster, seen_now),
        "conditions": conditions(available_c, progressing, degraded),
        "events": _events(status, phase, progressing[2], degraded, available_c[2]),
    }


def _phase(
    restore: dict[str, Any],
    source: dict[str, Any],
    state: str,
    job: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    refusals: list[dict[str, str]],
    available: bool,
    cluster: dict[str, Any] | None,
) -> tuple[str, Condition, Condition]:
    """The phase with its Progressing and Degraded: done once recorded, or once the cluster
    runs on the restored data (unless refused or the Job failed, which say so first)."""
    status = restore.get("status") or {}
    name = str((restore.get("spec") or {}).get("cluster", {}).get("name") or "")
    calm = ("False", "AsExpected", "no problem seen")
    if status.get("phase") == "Succeeded" or (available and not refusals and state != "Failed"):
        return (
            "Succeeded",
            ("False", "Restored", "the restore is complete"),
            ("False", "AsExpected", "the restore succeeded"),
        )
    if refusals:
        return (
            "Failed",
            ("False", "Refused", "nothing was created"),
            ("True", refusals[0]["reason"], "; ".join(r["message"] for r in refusals)),
        )
    if state == "Failed":
        return _job_failed(restore, job, pods, name)
    if state == "Succeeded":
        ready = "({} of {} ready)".format(*_members_ready(cluster))
        return (
            "Starting",
            (
                "True",
                "MembersStarting",
                f"the snapshot is restored; EtcdCluster {name} is starting its members {ready}",
            ),
            calm,
        )
    if state == "Active" and source.get("kind") == "upload":
        meta = _meta(restore)
        return (
            "Restoring",
            (
                "True",
                "WaitingForUpload",
                f"Job {job_name(restore)} waits for the snapshot to be uploaded, then verifies "
                "it and writes the first member's data: ansible-playbook "
                f"playbooks/etcd-restore.yml -e restore={meta.get('name')} "
                f"-e namespace={meta.get('namespace')} -e file=<the snapshot file>",
            ),
            calm,
        )
    if state == "Active":
        return (
            "Restoring",
            (
                "True",
                "Restoring",
                f"Job {job_name(restore)} is fetching and verifying "
                f"{source.get('location', '')} and writing the first member's data",
            ),
            calm,
        )
    return (
        "Pending",
        ("True", "Creating", f"creating EtcdCluster {name} and its restore Job"),
        calm,
    )


def _job_failed(
    restore: dict[str, Any], job: dict[str, Any] | None, pods: list[dict[str, Any]], name: str
) -> tuple[str, Condition, Condition]:
    """A failed Job: what its Pod said, and how to start over (the claim stays marked, so
    no member starts on a half-written data dir)."""
    message = failure_message(job or {}, pods)
    return (
        "Failed",
        ("False", "RestoreFailed", "the restore Job failed; nothing was started"),
        (
            "True",
            failure_reason(message),
            f"Job {job_name(restore)}: {message}. The first member's claim stays marked "
            "restore-pending (no member starts on it); delete the EtcdRestore, the "
            f"EtcdCluster {name} and its claims to start over",
        ),
    )


def _status_fields(
    restore: dict[str, Any],
    source: dict[str, Any],
    phase: str,
    job: dict[str, Any] | None,
    cluster: dict[str, Any] | None,
    seen_now: str,
) -> dict[str, Any]:
    """The status fields this run sets: each record (snapshot, revision, times, cluster ID)
    is written once and never rewritten, so it stays the first run's word."""
    status = restore.get("status") or {}
    new: dict[str, Any] = {"phase": phase, "observedGeneration": _meta(restore).get("generation")}
    if source and not status.get("snapshot"):
        snapshot = {"location": source["location"], "sha256": source["sha256"]}
        if isinstance(source.get("size"), int):
            snapshot["size"] = source["size"]
        if source.get("etcd_version"):
            snapshot["etcdVersion"] = source["etcd_version"]
        new["snapshot"] = snapshot
    if source and isinstance(source.get("revision"), int) and "restoredRevision" not in status:
        new["restoredRevision"] = source["revision"]
    start = (job or {}).get("status", {}).get("startTime")
    if start and not status.get("startTime"):
        new["startTime"] = start
    cluster_id = ((cluster or {}).get("status") or {}).get("clusterID")
    if phase == "Succeeded" and cluster_id and not status.get("clusterID"):
        new["clusterID"] = cluster_id
    if phase == "Succeeded" and not status.get("completionTime") and seen_now:
        new["completionTime"] = seen_now
    return new


def _events(
    status: dict[str, Any],
    phase: str,
    progressing: str,
    degraded: Condition,
    available: str,
) -> list[dict[str, str]]:
    """One event when the phase changes, or when a failure's message does (a new reason to
    read); none on a run that changes nothing."""
    if phase == status.get("phase") and (
        phase != "Failed"
        or degraded[2]
        == next(
            (
                c.get("message")
                for c in status.get("conditions") or []
                if c.get("type") == "Degraded"
            ),
            None,
        )
    ):
        return []
    if phase == "Failed":
        return [{"type": "Warning", "reason": degraded[1], "message": degraded[2]}]
    message = progressing if phase != "Succeeded" else available
    return [{"type": "Normal", "reason": f"Restore{phase}", "message": message}]


def status_of(report: dict[str, Any], restore: dict[str, Any], now: str) -> dict[str, Any]:
    """The status a run by hand writes (the watcher does this for the operator's runs): the
    report's fields and its conditions as a list, each keeping its lastTransitionTime while
    its status stays."""
    old = {c.get("type"): c for c in (restore.get("status") or {}).get("conditions") or []}
    generation = _meta(restore).get("generation")
    conditions = []
    for kind, condition in report["conditions"].items():
        before = old.get(kind) or {}
        same = before.get("status") == condition["status"] and before.get("lastTransitionTime")
        conditions.append(
            {
                "type": kind,
                **condition,
                "lastTransitionTime": before["lastTransitionTime"] if same else now,
                "observedGeneration": generation,
            }
        )
    return {**report["status"], "conditions": conditions}
