"""The vocabulary: every label, annotation and API name the runbooks write or read, defined
once. A member's durable record (who it is, how it first starts, whether it is fenced) lives
in these annotations on its claim, so a name changed here is a migration, not a rename.

Runbook task files that must spell a name (a patch written in YAML) get it from the
`etcd_name` filter (plugins/filter/etcd_names.py), which reads NAMES below.
"""

from __future__ import annotations

GROUP = "etcd.runbook.io"
API_VERSION = f"{GROUP}/v1alpha1"

# Kubernetes' own.
LABEL_NAME = "app.kubernetes.io/name"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_HOSTNAME = "kubernetes.io/hostname"
MANAGED_BY = {LABEL_MANAGED_BY: "etcd-runbook-operator"}

# --- Labels ---------------------------------------------------------------------------------
LABEL_CLUSTER = f"{GROUP}/cluster"
LABEL_MEMBER = f"{GROUP}/member"
# The etcd version a member Pod runs (its image's), and whether it votes (not a learner).
LABEL_VERSION = f"{GROUP}/version"
LABEL_VOTER = f"{GROUP}/voter"
# On a TLS Secret: the cluster it is for (a Pod mounts no Secret without it), and which of
# the cluster's certificates it holds.
LABEL_TLS_FOR = f"{GROUP}/tls-for"
LABEL_TLS = f"{GROUP}/tls"
# On a backup's Jobs and Pods: the EtcdBackup; and what the Job does (snapshot or check).
LABEL_BACKUP = f"{GROUP}/backup"
LABEL_JOB = f"{GROUP}/job"
# The mark a claim carries when its owner means it for etcd backups: only such a claim is
# mounted (and made group-writable by the Job's fsGroup).
LABEL_DESTINATION = f"{GROUP}/backup-destination"
# On the one-off EtcdBackup taken before a minor upgrade: the minor it is taken for.
LABEL_BEFORE_UPGRADE = f"{GROUP}/before-upgrade"
# On a restore's Job and Pods: the EtcdRestore.
LABEL_RESTORE = f"{GROUP}/restore"
# On a quorum recovery's Job and its Pod: the request's fingerprint (recover.py). They carry
# `app.kubernetes.io/name: etcd-recovery`, never `etcd`, so no member selector takes them.
LABEL_RECOVERY = f"{GROUP}/recovery"
RECOVERY_APP = "etcd-recovery"

# --- Annotations: a member's claim records how it first starts and, once joined, who it is --
ANN_INITIAL_CLUSTER = f"{GROUP}/initial-cluster"
ANN_INITIAL_STATE = f"{GROUP}/initial-cluster-state"
ANN_MEMBER_ID = f"{GROUP}/member-id"
ANN_CLUSTER_ID = f"{GROUP}/cluster-id"
ANN_VERSION = f"{GROUP}/version"
# A claim whose member must never start again under its identity (data gone, or replaced),
# with the reason; and the claim of a member being removed.
ANN_FENCED = f"{GROUP}/fenced"
ANN_REMOVING = f"{GROUP}/removing"
# A claim an EtcdRestore Job is still writing: no Pod may start on half a data dir.
ANN_RESTORE_PENDING = f"{GROUP}/restore-pending"

# --- Annotations on a member Pod ------------------------------------------------------------
# What the Pod was made from.
ANN_POD_HASH = f"{GROUP}/pod-hash"
# On a member Pod made by a roll that is not over: when the runbook first saw it healthy (its
# own clock, the look's time) and which run of its container that was (the kubelet's
# startedAt of the container and lastTransitionTime of Ready, compared, never subtracted).
ANN_HEALTHY_SINCE = f"{GROUP}/healthy-since"
ANN_HEALTHY_RUN = f"{GROUP}/healthy-run"
# watches.yaml preemptionOptOutAnnotation: a Pod deletion the runbook made itself.
ANN_DELETED_BY_RUNBOOK = f"{GROUP}/deleted-by-runbook"

# --- Annotations on the EtcdCluster ---------------------------------------------------------
# Written before its first Pod: the --initial-cluster its members were started into. From
# then on no member is ever made `new` again.
ANN_BOOTSTRAP_STARTED = f"{GROUP}/bootstrap-started"
# The EtcdRestore writing its first member (name, and uid to tell a restore of the same name
# made later from this one), so it never seeds an empty one.
ANN_RESTORE = f"{GROUP}/restore"
ANN_RESTORE_UID = f"{GROUP}/restore-uid"
# Set to a version: upgrade to it without the snapshot a minor upgrade otherwise starts with
# (a person's decision, written down).
ANN_UPGRADE_WITHOUT_SNAPSHOT = f"{GROUP}/upgrade-without-snapshot"
# A person's switches for deletion: also delete the member volumes; delete while paused.
ANN_DELETE_VOLUMES = f"{GROUP}/delete-volumes"
ANN_DELETE_WHILE_PAUSED = f"{GROUP}/delete-while-paused"
# A person's request to recover a lost majority: the survivor or EtcdBackup, and the cluster ID.
ANN_RECOVER_QUORUM = f"{GROUP}/recover-quorum"

# --- Annotations on other objects -----------------------------------------------------------
# Where something came from: on a CA Secret put back from what the members trust, the Secret
# its certificate came from; on a restored first member's claim, the snapshot's location.
ANN_RESTORED_FROM = f"{GROUP}/restored-from"
# On the first member's claim of a quorum recovery: "<fingerprint> <cluster ID recovered from>",
# the record that the request of that fingerprint was carried out (read back from the claims,
# never from status) and of the cluster ID it leaves behind.
ANN_RECOVERY = f"{GROUP}/recovered"
# On a member's claim: "<time> <bytes before> <bytes after>" of its last defragmentation by a
# runbook (status.members[].lastDefragmented).
ANN_DEFRAGMENTED = f"{GROUP}/defragmented"
# On the member claims, after a NOSPACE recovery found live data filling the quota:
# "<revision> <member> <bytes>", so runs at that revision say DatabaseFull without rewriting
# every member again; a deletion moves the revision and the recovery is tried again.
ANN_SPACE_FULL = f"{GROUP}/space-full"
# On an EtcdBackup: set to any new value (a time, say), it asks for a check of
# status.lastSnapshot now.
ANN_CHECK_REQUESTED = f"{GROUP}/check-requested"

# The names task files may ask for, by the short name after the group.
NAMES = {
    value.split("/", 1)[1]: value
    for key, value in sorted(globals().items())
    if key.startswith(("LABEL_", "ANN_")) and isinstance(value, str) and value.startswith(GROUP)
}


# Where a member's data volume is mounted in its Pod, and the data dir etcd is given there.
MEMBER_DATA_MOUNT = "/var/lib/etcd"
MEMBER_DATA_SUBDIR = "data"
MEMBER_DATA_DIR = f"{MEMBER_DATA_MOUNT}/{MEMBER_DATA_SUBDIR}"


def recovery_selector(cluster: str) -> str:
    """The label selector of a cluster's quorum-recovery Jobs and their Pods."""
    return f"{LABEL_NAME}={RECOVERY_APP},{LABEL_CLUSTER}={cluster}"


def cluster_labels(cluster: str) -> dict[str, str]:
    """The labels every object of a cluster carries, which its runbooks select it by."""
    return {LABEL_NAME: "etcd", LABEL_CLUSTER: cluster}


def cluster_selector(cluster: str) -> str:
    """`cluster_labels` as a label selector."""
    return ",".join(f"{k}={v}" for k, v in cluster_labels(cluster).items())


def name(short: str) -> str:
    """The full name of a label or annotation of this project, by its short name; an unknown
    one is an error, so a misspelt name in a task file fails the run instead of writing a
    mark nothing reads."""
    try:
        return NAMES[short]
    except KeyError:
        raise ValueError(
            f"no label or annotation named {short!r} in etcd_runbook/names.py"
        ) from None
