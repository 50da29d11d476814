"""Decisions of the etcd_cluster runbook: pure functions from observed facts to a plan.

The role observes (the EtcdCluster, its member Pods and claims, TLS Secrets, what etcd says),
calls `etcd_cluster_plan` once, acts on the plan in YAML, and reports with
`etcd_cluster_report`. Nothing here talks to Kubernetes or etcd, so every decision has
table-driven unit tests (tests/unit/test_etcd_plan.py), including the ones that keep data safe:

* a member's durable record is its claim: the flags it first started with and, once it has
  joined, its member ID and cluster ID. A joined member restarts with flags under which etcd
  refuses to start on an empty data dir, so a wiped disk never comes back under its old
  identity; such a member is replaced (removed, then a fresh member on a fresh claim);
* nothing is removed or deleted on one endpoint's word: membership changes and cleanups need
  a quorum of voting members that agree on the member list, under the recorded cluster ID;
  a member that answers for another cluster, or as another member than its claim records,
  is fenced;
* learners first, one membership change at a time, the leader last;
* a member on a lost node is waited for, then made again on its own volume where another node
  can mount it, else replaced: removed from etcd before its Pod is deleted, so it never comes
  back as a member when its node does.

`facts` holds: `object` (the EtcdCluster), `pods`, `claims`, `info` (etcd_cluster_info's
result, {} when no member answered), `info_error`, `endpoints` (member name -> the URL this
run reaches it at), `tls` (what the TLS Secrets look like, never their data), `nodes` (each
member Pod's node, and the nodes their volumes admit: found, Ready, how long its kubelet has
been silent; None when Nodes cannot be read), `volumes` (where the volume of a member that no
usable node runs can be mounted, by claim name; None when PersistentVolumes cannot be read),
`observed_at` (when the look was taken, on the operator's clock) and `options` (the role's
settings).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections import Counter
from typing import Any

from etcd_runbook.names import (
    ANN_BOOTSTRAP_STARTED,
    ANN_CLUSTER_ID,
    ANN_FENCED,
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
    GROUP,
    LABEL_BEFORE_UPGRADE,
    LABEL_CLUSTER,
    LABEL_MEMBER,
    LABEL_TLS_FOR,
    LABEL_VERSION,
    LABEL_VOTER,
)
from etcd_runbook.rules.etcd_pods import (
    container_spec,
    container_trouble,
    healthy_run,
    restart_trouble,
    seconds_between,
    unschedulable,
)
from etcd_runbook.rules.etcd_tls_secrets import client_material, secret_names

DEFAULT_VERSION = "3.6.16"
DEFAULT_REPOSITORY = "gcr.io/etcd-development/etcd"
DEFAULT_STORAGE = "1Gi"
MAX_INDEX = 9
# How long a member's node may be unreachable before the member is replaced on another node
# (spec.nodeLossTimeout): Kubernetes' own default for evicting Pods from such a node.
DEFAULT_NODE_LOSS_TIMEOUT = 300
# A kubelet renews its node's Lease every 10 s: this long without a renewal is a silent node
# (watches.yaml nodeSilence runs the cluster then).
NODE_SILENCE = 15
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
# How long a member restarted by a roll must stay healthy (its Pod Ready, its container never
# restarted, etcd counting it healthy) before the roll takes the next member down
# (spec.minReadySeconds): the readiness probe needs 10 s to see a hung member, and a member
# etcd cannot run in was seen killed for memory 11 s after it first answered.
DEFAULT_MIN_READY_SECONDS = 30
MAX_MIN_READY_SECONDS = 3600

# Bump when the Pod etcd_manifests builds changes in a way running members must roll to.
POD_TEMPLATE_REVISION = 2

# etcd preallocates WAL segments of 64 MB and keeps 5 (--max-wals) beside the one being
# written; a defragmentation, or a snapshot received from the leader, writes a second copy of
# the database beside the first. The backend quota is what is left, halved.
MiB = 1024**2
GiB = 1024**3
WAL_RESERVE = 6 * 64 * MiB
MIN_QUOTA = 64 * MiB
MIN_VOLUME = WAL_RESERVE + 2 * MIN_QUOTA
MAX_QUOTA = 8 * GiB  # etcd's suggested maximum

# Releases with known data inconsistency bugs (etcd's 3.5.3 announcement).
BROKEN_VERSIONS = ("3.5.0", "3.5.1", "3.5.2")

# What etcd 3.4 to 3.6 say when a member's data is gone: asked to rejoin an existing cluster
# with an empty data dir and no other peer to ask (the flags a joined member restarts with: the
# guard tripped), and raft's panic when the leader sends a member entries beyond the log it has
# left (a member that came back without its data some other way, a claim of an earlier version).
DATA_LOST_SIGNS = (
    "cannot fetch cluster info from peer urls",
    "was the raft log corrupted, truncated, or lost",
)

_UNITS = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_VERSION = re.compile(r"^3\.(4|5|6)\.([0-9]+)$")
TLS_KEYS = ("tls.crt", "tls.key", "ca.crt")
# The certificates the role issues from the cluster's CA, and those a member Pod mounts (the
# client certificate is the operator's own).
TLS_LEAVES = ("peer", "server", "client")
TLS_MOUNTED = ("peer", "server")
_PEM_CERT = re.compile(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", re.DOTALL)


class PlanError(ValueError):
    """A value the plan cannot read."""


# --- small helpers -------------------------------------------------------------------------


# The plan's lists that repair.yml carries out before any membership change: what must not be
# trusted, who each member is, what is left of members etcd no longer has, what is lost.
REPAIR_STEPS = ("fence", "record", "relabel", "stale", "replace", "lost", "promote")
# The plan's lists that act.yml carries out (the budget is compared apart, as it is written).
ACT_STEPS = (
    *REPAIR_STEPS,
    "add",
    "remove",
    "settle_marks",
    "roll",
    "grow",
    "upgrade_backup",
)


def parse_quantity(value: Any) -> int:
    """A Kubernetes quantity of bytes ("1Gi", "500M", 1024) as an int."""
    if isinstance(value, bool):
        raise PlanError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return value
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise PlanError(f"not a quantity: {value!r}")
    number, unit = match.groups()
    return int(float(number) * _UNITS[unit or ""])


def format_bytes(value: int) -> str:
    """Bytes in the largest binary unit that divides them ("320Mi"), else plain bytes."""
    for unit in ("Ti", "Gi", "Mi", "Ki"):
        if value and value % _UNITS[unit] == 0:
            return f"{value // _UNITS[unit]}{unit}"
    return str(value)


# Seconds until a run that saw a Ready member Pod whose member etcd did not yet count healthy
# looks again.
LAGGING_RECHECK = 5


def quorum_of(voters: int) -> int:
    return voters // 2 + 1


def version_tuple(version: str) -> tuple[int, int, int]:
    major, minor, patch = (int(x) for x in version.split("."))
    return major, minor, patch


def member_index(name: str) -> int:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else MAX_INDEX + 1


PEER_PORT = 2380
CLIENT_PORT = 2379


def member_url(cluster: str, namespace: str, domain: str, tls: bool, member: str, port: int) -> str:
    """A member's URL on its DNS name, as etcd_manifests makes it: the whole of it (scheme,
    host with namespace and cluster domain, port) is who the member is."""
    scheme = "https" if tls else "http"
    return f"{scheme}://{member}.{cluster}.{namespace}.svc.{domain}:{port}"


def url_key(url: str) -> str:
    """A URL as compared: no trailing slash or spaces, scheme and host in lower case."""
    return url.strip().rstrip("/").lower()


def stable_hash(doc: Any) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def annotations_of(obj: dict[str, Any] | None) -> dict[str, str]:
    return _meta(obj or {}).get("annotations") or {}


def labels_of(obj: dict[str, Any] | None) -> dict[str, str]:
    return _meta(obj or {}).get("labels") or {}


def _deleting(obj: dict[str, Any]) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def _member_of(obj: dict[str, Any]) -> str:
    return labels_of(obj).get(LABEL_MEMBER) or str(_meta(obj).get("name", "")).removesuffix("-data")


def _refusal(reason: str, field: str, message: str) -> dict[str, str]:
    return {"reason": reason, "field": field, "message": message}


# --- the spec ------------------------------------------------------------------------------


_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# Longest EtcdCluster name: its member names (-N) and their claims, Services and Secrets must
# stay within Kubernetes' 63-character DNS labels.
MAX_NAME = 50


def run_refusal(
    obj: dict[str, Any],
    name: str,
    namespace: str,
    allow_missing: bool = False,
    by_hand: bool = False,
    ignore_pause: bool = False,
    read_only: bool = False,
) -> str:
    """Why a run of a runbook on EtcdCluster namespace/name must not start; '' when it may.

    `obj` is the EtcdCluster as read ({} when it does not exist). The operator's runs are not
    refused on a paused cluster: they only look and report (the plan's hands_off). A person
    must say they mean to act on one; a read-only run may always look."""
    if not _NAME.match(name) or len(name) > MAX_NAME or not namespace:
        return (
            "The name must be the EtcdCluster's name (lowercase letters, digits, '-', at most "
            f"{MAX_NAME} characters) and the namespace its namespace; got name={name!r} "
            f"namespace={namespace!r}"
        )
    if not obj.get("metadata") and not allow_missing:
        return f"EtcdCluster {namespace}/{name} does not exist"
    paused = bool((obj.get("spec") or {}).get("paused"))
    if paused and by_hand and not ignore_pause and not read_only:
        return (
            f"EtcdCluster {namespace}/{name} has spec.paused: true. To act on it anyway, run "
            "again with -e ignore_pause=true (to only look, use playbooks/etcd-status.yml)."
        )
    return ""


def quota_limit(volume_bytes: int) -> int:
    """The largest backend quota a volume holds with room for the WAL and a second copy."""
    return min(MAX_QUOTA, max(0, (volume_bytes - WAL_RESERVE) // 2))


def version_problem(version: str) -> str:
    """Why `version` may never run, or ''."""
    if not _VERSION.match(version):
        return f"spec.version {version!r} is not 3.4.x, 3.5.x or 3.6.x"
    if version in BROKEN_VERSIONS:
        return (
            f"spec.version {version} is one of etcd 3.5.0 to 3.5.2, which have known data "
            "inconsistency bugs (fixed in 3.5.3); choose 3.5.3 or newer"
        )
    return ""


def version_change_problem(current: str, target: str, min_35_for_36: str) -> str:
    """Why a member running `current` may not move to `target`, or ''."""
    cur, tgt = version_tuple(current)[1], version_tuple(target)[1]
    if tgt < cur:
        return (
            f"going from etcd {current} down to {target} is a downgrade across a minor version, "
            "which needs etcd's downgrade procedure (downgrade validate/enable, one minor at a "
            "time) that this runbook does not perform"
        )
    if tgt > cur + 1:
        return (
            f"going from etcd {current} to {target} skips a minor version; upgrade one minor "
            f"at a time (to 3.{cur + 1}.x first)"
        )
    if (cur, tgt) == (5, 6) and version_tuple(current) < version_tuple(min_35_for_36):
        return (
            f"going from etcd {current} to {target} needs etcd {min_35_for_36} or newer first "
            "(etcd's 3.5 to 3.6 upgrade notes)"
        )
    return ""


def _size_warning(size: int) -> dict[str, str] | None:
    if size == 2:
        return {
            "reason": "TwoMemberCluster",
            "message": "spec.size 2 tolerates no failure, and its PodDisruptionBudget "
            "(minAvailable 2) lets no drain evict a member; use 3",
        }
    if size % 2 == 0:
        return {
            "reason": "EvenClusterSize",
            "message": f"spec.size {size} is even: it tolerates no more failures than "
            f"{size - 1} members and needs one more for quorum; prefer an odd size",
        }
    if size > 7:
        return {
            "reason": "LargeClusterSize",
            "message": f"spec.size {size} is above 7: every write waits for {quorum_of(size)} "
            "members, so writes get slower; 3 or 5 members are usual",
        }
    return None


def _storage(storage: dict[str, Any], problems: list[dict[str, str]]) -> tuple[int, int]:
    """(volume bytes, backend quota bytes) of the spec; problems name the field."""
    size = str(storage.get("size") or DEFAULT_STORAGE)
    try:
        volume = parse_quantity(size)
    except PlanError:
        problems.append(
            _refusal(
                "InvalidSpec", "spec.storage.size", f"spec.storage.size {size!r} is not a quantity"
            )
        )
        return parse_quantity(DEFAULT_STORAGE), quota_limit(parse_quantity(DEFAULT_STORAGE))
    if volume < MIN_VOLUME:
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.storage.size",
                f"spec.storage.size {size} is below {format_bytes(MIN_VOLUME)}: etcd "
                "preallocates 64 MB WAL segments and needs room for a second copy of its "
                "database",
            )
        )
    limit = quota_limit(volume)
    if "quotaBackendBytes" not in storage:
        return volume, max(limit, MIN_QUOTA)
    field = "spec.storage.quotaBackendBytes"
    asked_text = storage["quotaBackendBytes"]
    try:
        asked = parse_quantity(asked_text)
    except PlanError:
        problems.append(_refusal("InvalidSpec", field, f"{field} {asked_text!r} is not a quantity"))
        return volume, max(limit, MIN_QUOTA)
    if asked > limit:
        problems.append(
            _refusal(
                "InvalidSpec",
                field,
                f"{field} {asked_text} does not fit a {size} volume: at most "
                f"{format_bytes(limit)} leaves room for the WAL and a second copy of the "
                "database (defragmentation, snapshots)",
            )
        )
    elif asked < MIN_QUOTA:
        problems.append(
            _refusal("InvalidSpec", field, f"{field} must be at least {format_bytes(MIN_QUOTA)}")
        )
    else:
        return volume, asked
    return volume, max(limit, MIN_QUOTA)


def node_loss_seconds(value: Any) -> int | None:
    """spec.nodeLossTimeout in seconds (absent: the default; "0": never), None when it is not
    a duration of hours, minutes and seconds."""
    if value is None:
        return DEFAULT_NODE_LOSS_TIMEOUT
    text = str(value).strip()
    if text == "0":
        return 0
    match = _DURATION.match(text) if not isinstance(value, bool) else None
    if not text or not match:
        return None
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def not_allowed(spec: dict[str, Any], options: dict[str, Any]) -> list[dict[str, str]]:
    """What the spec asks for outside its administrator's allow-lists, each refusal naming its
    field: the image repository the members run (`options.allowed_repositories`, the
    operator's ETCD_RUNBOOK_ALLOWED_REPOSITORIES) and the PriorityClass they are scheduled
    with (`options.allowed_priority_classes`, ETCD_RUNBOOK_ALLOWED_PRIORITY_CLASSES). Each is a
    list or a comma-separated string of exact names; empty allows anything. A spec without a
    priority class asks for none."""
    refused = []
    pod = spec.get("pod")
    for field, what, variable, value in (
        (
            "spec.repository",
            "allowed_repositories",
            "ETCD_RUNBOOK_ALLOWED_REPOSITORIES",
            spec.get("repository") or DEFAULT_REPOSITORY,
        ),
        (
            "spec.pod.priorityClassName",
            "allowed_priority_classes",
            "ETCD_RUNBOOK_ALLOWED_PRIORITY_CLASSES",
            pod.get("priorityClassName") if isinstance(pod, dict) else None,
        ),
    ):
        listed = options.get(what) or []
        allowed = [
            str(v).strip()
            for v in (listed.split(",") if isinstance(listed, str) else listed)
            if str(v).strip()
        ]
        if value is not None and allowed and str(value) not in allowed:
            refused.append(
                _refusal(
                    "NotAllowed",
                    field,
                    f"{field} {str(value)!r} is not one this operator's administrator allows "
                    f"({', '.join(allowed)}; {variable}); nothing is changed until it names "
                    "one of them",
                )
            )
    return refused


def normalize_spec(obj: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """The EtcdCluster's spec with its defaults, the problems that make it unusable (each
    names its field) and the warnings worth an Event."""
    spec = obj.get("spec") or {}
    problems: list[dict[str, str]] = []
    size = spec.get("size", 3)
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_INDEX:
        problems.append(
            _refusal(
                "InvalidSpec", "spec.size", f"spec.size must be 1 to {MAX_INDEX}, got {size!r}"
            )
        )
        size = 3
    version = str(spec.get("version") or DEFAULT_VERSION)
    if problem := version_problem(version):
        problems.append(_refusal("InvalidSpec", "spec.version", problem))
    storage = spec.get("storage") or {}
    volume, quota = _storage(storage, problems)
    tls = spec.get("tls") or {}
    tls_enabled = bool(tls.get("enabled", True))
    user_secrets = tls.get("secrets") or {}
    name = str(_meta(obj).get("name") or options.get("name") or "")
    pod = spec.get("pod") or {}
    node_loss = node_loss_seconds(spec.get("nodeLossTimeout"))
    if node_loss is None:
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.nodeLossTimeout",
                "spec.nodeLossTimeout must be a duration such as 90s, 5m or 1h30m (0: never "
                f"replace, wait for the node), got {spec.get('nodeLossTimeout')!r}",
            )
        )
        node_loss = DEFAULT_NODE_LOSS_TIMEOUT
    min_ready = spec.get("minReadySeconds", DEFAULT_MIN_READY_SECONDS)
    if (
        not isinstance(min_ready, int)
        or isinstance(min_ready, bool)
        or not 0 <= min_ready <= MAX_MIN_READY_SECONDS
    ):
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.minReadySeconds",
                f"spec.minReadySeconds must be 0 to {MAX_MIN_READY_SECONDS}, got {min_ready!r}",
            )
        )
        min_ready = DEFAULT_MIN_READY_SECONDS
    refused = not_allowed(spec, options)
    problems.extend(refused)
    warning = _size_warning(size)
    return {
        # Anything outside the allow-lists: no Pod, claim or Secret is made for it (hands off).
        "allowed": not refused,
        "size": size,
        "version": version,
        "repository": str(spec.get("repository") or DEFAULT_REPOSITORY),
        "storage_size": str(storage.get("size") or DEFAULT_STORAGE),
        "storage_class": storage.get("storageClassName"),
        "volume_bytes": volume,
        "quota_bytes": quota,
        "tls": tls_enabled,
        "tls_own": tls_enabled and not user_secrets,
        "secrets": secret_names(name, tls),
        "pod": {
            "labels": dict(pod.get("labels") or {}),
            "annotations": dict(pod.get("annotations") or {}),
            "resources": pod.get("resources"),
            "affinity": pod.get("affinity") or {},
            "anti_affinity": pod.get("antiAffinity") or "preferred",
            "node_selector": pod.get("nodeSelector"),
            "tolerations": pod.get("tolerations"),
            "priority_class": pod.get("priorityClassName"),
        },
        "node_loss_timeout": node_loss,
        "min_ready_seconds": min_ready,
        "paused": bool(spec.get("paused", False)),
        "problems": problems,
        "warnings": [warning] if warning else [],
    }


def pem_fingerprints(text: str) -> list[str]:
    """The SHA-256 of each certificate in PEM `text` (its DER), in order: what the plan
    compares certificates by, public and never the material itself."""
    found = []
    for body in _PEM_CERT.findall(text):
        try:
            der = base64.b64decode("".join(body.split()), validate=True)
        except binascii.Error:
            continue
        found.append(hashlib.sha256(der).hexdigest())
    return found


def tls_seen(secrets: list[dict[str, Any]], obj: dict[str, Any]) -> dict[str, Any]:
    """What the Secret of each purpose (ca, peer, server, client) of the EtcdCluster `obj`
    looks like, never its data: {found, type, keys, certs}; `certs` holds the fingerprints
    (`pem_fingerprints`) of the certificates in its tls.crt and ca.crt."""
    names = normalize_spec(obj, {})["secrets"]
    by_name = {_meta(s).get("name"): s for s in secrets}
    seen = {}
    for purpose, name in names.items():
        secret = by_name.get(name)
        data = (secret or {}).get("data") or {}
        certs = {}
        for field in ("tls.crt", "ca.crt"):
            try:
                certs[field] = pem_fingerprints(base64.b64decode(data.get(field) or "").decode())
            except (binascii.Error, UnicodeDecodeError):
                certs[field] = []
        seen[purpose] = {
            "found": secret is not None and bool(data),
            "type": (secret or {}).get("type", ""),
            "keys": sorted(data),
            "certs": certs,
        }
    return seen


def tls_material(secrets: list[dict[str, Any]], obj: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The decoded data of each purpose's Secret that exists (kept under no_log)."""
    names = normalize_spec(obj, {})["secrets"]
    by_name = {_meta(s).get("name"): s for s in secrets}
    material = {}
    for purpose, name in names.items():
        data = (by_name.get(name) or {}).get("data") or {}
        try:
            material[purpose] = {k: base64.b64decode(v).decode() for k, v in data.items()}
        except (binascii.Error, UnicodeDecodeError):
            continue
        if not material[purpose]:
            del material[purpose]
    return material


def tls_client(secrets: list[dict[str, Any]], obj: dict[str, Any]) -> dict[str, str]:
    """The decoded CA, certificate and key the runbook's etcd modules connect with (kept under
    no_log): what the look connected with (`client_material`). {} when nothing holds them."""
    names = normalize_spec(obj, {})["secrets"]
    chosen = client_material(secrets, names["server"], names["client"])
    if chosen is None:
        return {}
    try:
        return {
            k: base64.b64decode(v).decode()
            for k, v in zip(("ca", "cert", "key"), chosen, strict=True)
        }
    except (binascii.Error, UnicodeDecodeError):
        return {}


def tls_problems(tls: dict[str, Any], spec: dict[str, Any], cluster: str) -> list[dict[str, str]]:
    """Secrets named in spec.tls.secrets must exist and look like TLS material meant for this
    cluster: type kubernetes.io/tls with tls.crt, tls.key and ca.crt, and (checked by the read,
    which selects on it) the label etcd.runbook.io/tls-for=<cluster>, so an EtcdCluster cannot
    mount just any Secret of its namespace into its Pods. `tls` is `tls_seen`'s summary."""
    if not spec["tls"] or spec["tls_own"]:
        return []
    problems = []
    for purpose in ("peer", "server", "client"):
        secret = spec["secrets"][purpose]
        seen = tls.get(purpose) or {}
        field = f"spec.tls.secrets.{purpose}"
        why = ""
        if not seen.get("found"):
            why = (
                f"Secret {secret} does not exist in the cluster's namespace, or is not "
                f"labelled {LABEL_TLS_FOR}={cluster} (label it to confirm it is meant for "
                "this cluster)"
            )
        elif seen.get("type") != "kubernetes.io/tls":
            why = f"Secret {secret} is of type {seen.get('type')}, not kubernetes.io/tls"
        elif missing := [k for k in TLS_KEYS if k not in (seen.get("keys") or [])]:
            why = f"Secret {secret} lacks {', '.join(missing)}"
        if why:
            problems.append(
                _refusal(
                    "TLSSecretMissing" if not seen.get("found") else "TLSSecretInvalid",
                    field,
                    f"{field}: {why}; members without TLS material are not added",
                )
            )
    return problems


def tls_plan(
    seen: dict[str, Any] | None, spec: dict[str, Any], cluster: str, state: str
) -> dict[str, Any]:
    """What a run does about the cluster's TLS Secrets, from `tls_seen`'s summary (None: not
    looked at, nothing decided) and how far they may be in use (`state`, from `run_state`).
    Returns `issue` (certificates to issue), `new_ca` (issue them from a new CA, written over
    what exists), `ca_from` (the purpose whose ca.crt puts the CA Secret's certificate back),
    `write` (the purposes whose Secret this run writes), `unmountable` (purpose -> Secret a
    member Pod mounts that is not fit to mount: no member Pod is made then), `refusals` and
    `announce` (the Events of what is written).

    The role's own Secrets are made anew only where nothing holds them: a cluster that never
    ran, or one with no member Pod left and none of its TLS Secrets (re-created after a
    deletion, which deletes them). Otherwise a missing Secret is put back from what the
    members trust or refused, never replaced: new TLS material for a cluster that runs comes
    only from an explicit rotation (docs/next-runbooks.md), which will be decided here too."""
    out: dict[str, Any] = {
        "issue": [],
        "new_ca": False,
        "ca_from": "",
        "write": [],
        "unmountable": {},
        "refusals": [],
        "announce": [],
    }
    if seen is None or not spec["tls"]:
        return out
    if not spec["tls_own"]:
        out["refusals"] = tls_problems(seen, spec, cluster)
        fields = {r["field"] for r in out["refusals"]}
        out["unmountable"] = {
            p: spec["secrets"][p] for p in TLS_MOUNTED if f"spec.tls.secrets.{p}" in fields
        }
        return out
    return {**out, **_own_tls_plan(seen, spec["secrets"], state)}


def _own_tls_plan(seen: dict[str, Any], names: dict[str, str], state: str) -> dict[str, Any]:
    """`tls_plan` for the Secrets the role makes (spec.tls.secrets unset)."""
    ca = seen.get("ca") or {}
    leaves = {p: seen.get(p) or {} for p in TLS_LEAVES}
    missing = [p for p, s in leaves.items() if not s.get("found")]
    ca_usable = bool(ca.get("found")) and {"tls.crt", "tls.key"} <= set(ca.get("keys") or [])
    left = [p for p in ("ca", *TLS_LEAVES) if (seen.get(p) or {}).get("found")]
    if state == "new" or (state == "stopped" and not left):
        # Nothing holds them: a new CA and every certificate, or what is missing.
        fresh = missing if ca_usable else list(TLS_LEAVES)
        made = ", ".join(fresh) + ("" if ca_usable else " and a new CA")
        created = _event("Normal", "CertificatesCreated", f"Created TLS certificates for {made}")
        if state == "stopped":
            created = _event(
                "Warning",
                "CertificatesCreated",
                f"Created TLS certificates for {made}: the cluster has run, but none of its "
                "TLS Secrets and no member Pod is left to hold its CA (a deleted EtcdCluster "
                "takes them along). Clients must trust the new CA (the ca.crt of Secret "
                f"{names['server']})",
            )
        return {
            "issue": fresh,
            "new_ca": not ca_usable,
            "write": fresh if ca_usable else ["ca", *fresh],
            "announce": [created] if fresh else [],
        }
    present = {p: s for p, s in leaves.items() if s.get("found")}

    def trusted(purpose: str) -> list[str]:
        return list(((present[purpose].get("certs") or {}).get("ca.crt")) or [])

    refusals: list[dict[str, str]] = []
    announce: list[dict[str, str]] = []
    issue: list[str] = []
    ca_from = ""
    why_not = ""
    if ca_usable:
        ca_cert = set(((ca.get("certs") or {}).get("tls.crt")) or [])
        strangers = [p for p in present if not ca_cert & set(trusted(p))]
        if strangers:
            why_not = f"Secret {names['ca']} holds another CA than the one the members trust"
            refusals.append(
                _refusal(
                    "TLSCAMismatch",
                    "spec.tls",
                    f"Secret {names['ca']}: its CA is not the one the certificates in use were "
                    f"issued from (the ca.crt of Secret {names[strangers[0]]}): nothing is "
                    "issued from it. Put back the CA Secret those certificates came from",
                )
            )
        else:
            issue = missing
            announce = [
                _event(
                    "Warning",
                    "TLSSecretRestored",
                    f"Secret {names[p]} was missing: issued again from the cluster's CA "
                    f"(Secret {names['ca']}), which every member trusts; no other Secret changed",
                )
                for p in issue
            ]
    else:
        why_not = f"the CA's private key is lost (Secret {names['ca']}, tls.key)"
        kinds = {tuple(trusted(p)) for p in present}
        if not ca.get("found") and len(kinds) == 1 and len(next(iter(kinds))) == 1:
            ca_from = next(iter(present))
            back = f" Its certificate is put back from the ca.crt of Secret {names[ca_from]}."
            announce.append(
                _event(
                    "Warning",
                    "TLSSecretRestored",
                    f"Secret {names['ca']} was missing: its certificate put back from the ca.crt "
                    f"of Secret {names[ca_from]} (the CA every member trusts); its private key "
                    "was kept nowhere else and is lost",
                )
            )
        elif ca.get("found"):
            back = ""
        else:
            back = (
                " Its certificate cannot be put back either: no Secret of the cluster holds "
                "one CA certificate that all agree on."
            )
        refusals.append(
            _refusal(
                "TLSCAKeyLost",
                "spec.tls",
                f"Secret {names['ca']}: the cluster's CA private key (tls.key) is gone, and it "
                "is kept nowhere else. No new CA is made while the cluster's certificates "
                f"are in use: its members and clients trust this one.{back} The members keep "
                "running on their certificates, but none can be issued again: restore Secret "
                f"{names['ca']} with its tls.key from a backup of it (kubectl apply); without "
                "one, only a certificate rotation to a new CA can (docs/next-runbooks.md)",
            )
        )
    lost = [p for p in missing if p not in issue]
    refusals[:0] = [
        _refusal(
            "TLSSecretLost",
            "spec.tls",
            f"Secret {names[p]} is gone and cannot be issued again: {why_not}. "
            + (
                "The running members keep the copy they mount; a member whose Pod is gone is "
                "not re-made until it is back (it mounts it). "
                if p in TLS_MOUNTED
                else "The runbook reaches etcd with another of the cluster's certificates. "
            )
            + f"Restore Secret {names[p]} from a backup of it",
        )
        for p in lost
    ]
    return {
        "issue": issue,
        "ca_from": ca_from,
        "write": (["ca"] if ca_from else []) + issue,
        "unmountable": {p: names[p] for p in TLS_MOUNTED if p in lost},
        "refusals": refusals,
        "announce": announce,
    }


def _event(type_: str, reason: str, message: str) -> dict[str, str]:
    return {"type": type_, "reason": reason, "message": message}


def pod_hash(spec: dict[str, Any], version: str) -> str:
    """What a running member rolls for when it changes: everything of its Pod but its name,
    voting label and first-start flags (etcd ignores those once it has data)."""
    return stable_hash(
        {
            "revision": POD_TEMPLATE_REVISION,
            "image": f"{spec['repository']}:v{version}",
            "pod": spec["pod"],
            "quota": spec["quota_bytes"],
            "tls": spec["tls"],
            "secrets": [spec["secrets"]["peer"], spec["secrets"]["server"]],
        }
    )


# --- what is observed ----------------------------------------------------------------------


def termination_message(pod: dict[str, Any]) -> str:
    """The last words of the etcd container while it is down (kubelet keeps the log tail of a
    failed start); '' while it runs: an old failure (a first start that raced DNS) says
    nothing about now."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") != "etcd" or "running" in (status.get("state") or {}):
            continue
        for state in (status.get("state") or {}, status.get("lastState") or {}):
            terminated = state.get("terminated") or {}
            if terminated.get("exitCode", 0) != 0:
                return str(terminated.get("message") or terminated.get("reason") or "")
    return ""


def data_lost(pod: dict[str, Any], claim: dict[str, Any] | None) -> bool:
    """The guard tripped: a joined member's etcd refused to start on an empty data dir."""
    if claim is None or not annotations_of(claim).get(ANN_MEMBER_ID):
        return False
    message = termination_message(pod).lower()
    return any(sign in message for sign in DATA_LOST_SIGNS)


def pod_ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _unschedulable_refusal(name: str, why: str) -> dict[str, str]:
    field = "spec.pod.antiAffinity" if "anti-affinity" in why else "spec.pod"
    return _refusal(
        "MemberUnschedulable",
        field,
        f"{name}'s Pod cannot be scheduled ({why}); no other member is added or promoted "
        f"until it runs: give it a node, or change {field}",
    )


def _quota_arg(container: dict[str, Any]) -> str:
    return next(
        (str(a) for a in container.get("args") or [] if str(a).startswith("--quota-backend")), ""
    )


def changed_fields(new: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    """The spec fields a member Pod made from the spec now differs in from `old`, another
    member's Pod made from the spec before, as far as the Pods show them."""
    if not old:
        return []
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    new_c, old_c = container_spec(new), container_spec(old)
    new_repo, _, new_tag = str(new_c.get("image") or "").rpartition(":")
    old_repo, _, old_tag = str(old_c.get("image") or "").rpartition(":")
    new_aff, old_aff = new_spec.get("affinity") or {}, old_spec.get("affinity") or {}
    compared = [
        ("spec.repository", new_repo, old_repo),
        ("spec.version", new_tag, old_tag),
        ("spec.pod.resources", new_c.get("resources") or {}, old_c.get("resources") or {}),
        ("spec.pod.nodeSelector", new_spec.get("nodeSelector"), old_spec.get("nodeSelector")),
        (
            "spec.pod.antiAffinity",
            new_aff.get("podAntiAffinity"),
            old_aff.get("podAntiAffinity"),
        ),
        (
            "spec.pod.affinity",
            {k: v for k, v in new_aff.items() if k != "podAntiAffinity"},
            {k: v for k, v in old_aff.items() if k != "podAntiAffinity"},
        ),
        ("spec.pod.tolerations", new_spec.get("tolerations"), old_spec.get("tolerations")),
        (
            "spec.pod.priorityClassName",
            new_spec.get("priorityClassName"),
            old_spec.get("priorityClassName"),
        ),
        ("spec.storage", _quota_arg(new_c), _quota_arg(old_c)),
    ]
    return [field for field, now, before in compared if now != before]


# The fields that can make a Pod that passed the schema fail to run, by how it fails.
_FIELDS_BY_CAUSE = {
    "image": ("spec.repository", "spec.version"),
    "memory": ("spec.pod.resources",),
    "schedule": (
        "spec.pod.nodeSelector",
        "spec.pod.affinity",
        "spec.pod.antiAffinity",
        "spec.pod.tolerations",
        "spec.pod.priorityClassName",
        "spec.pod.resources",
    ),
}


def _scheduler_fields(why: str) -> list[str]:
    """The fields the scheduler's words point at, when no Pod before tells what changed."""
    found = [
        field
        for words, field in (
            ("anti-affinity", "spec.pod.antiAffinity"),
            ("node affinity/selector", "spec.pod.nodeSelector"),
            ("node affinity/selector", "spec.pod.affinity"),
            ("Insufficient", "spec.pod.resources"),
            ("untolerated taint", "spec.pod.tolerations"),
        )
        if words in why
    ]
    return found or ["spec.pod"]


def trouble_fields(trouble: dict[str, str], changed: list[str]) -> list[str]:
    """The spec fields to name for a Pod that cannot run: of the fields its cause points at,
    those the roll changed; else all that cause points at (none for a crash of no known
    cause: it may be etcd's data or its node, not the spec)."""
    cause = trouble["cause"]
    if cause == "crash":
        return changed
    if cause == "memory":
        return ["spec.pod.resources"]
    if cause == "schedule":
        return [f for f in changed if f in _FIELDS_BY_CAUSE[cause]] or _scheduler_fields(
            trouble["why"]
        )
    return [f for f in changed if f in _FIELDS_BY_CAUSE[cause]] or list(_FIELDS_BY_CAUSE[cause])


def _phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def etcd_members(info: dict[str, Any], peer_names: dict[str, str]) -> list[dict[str, Any]]:
    """etcd's member list, each named after its peer URL, the whole URL (a member not started
    yet has no name in etcd, only the peer URL it was added with, and the name a member gives
    itself is its own word). `peer_names` maps each of this cluster's peer URLs (`url_key`)
    to its member; a member whose peer URLs are not all one of them is `foreign`, named ''."""
    members = []
    for m in info.get("members") or []:
        names = {peer_names.get(url_key(url), "") for url in m.get("peer_urls") or []}
        name = names.pop() if len(names) == 1 else ""
        members.append({**m, "name": name, "foreign": not name})
    return members


def agreement(info: dict[str, Any], recorded_id: str) -> dict[str, Any]:
    """Whether a quorum of the voting members, each asked on its own, lists the members etcd
    reported, under the recorded cluster ID. One member's word is never enough: etcd 3.4
    answers the member list from local state, and a member cut off from the others (or a
    fork) answers with its own view."""
    members = list(info.get("members") or [])
    voters = [m for m in members if not m.get("is_learner")]
    if not info.get("cluster_id") or not voters:
        return {"ok": False, "why": "no member answered"}
    if recorded_id and info["cluster_id"] != recorded_id:
        return {
            "ok": False,
            "why": f"the members report cluster ID {info['cluster_id']}, not the recorded "
            f"{recorded_id}",
        }
    ids = sorted(m["id"] for m in members)
    voter_ids = {m["id"] for m in voters}
    agreeing = {
        v.get("member_id")
        for v in info.get("views") or []
        if v.get("cluster_id") == info["cluster_id"]
        and v.get("linearizable")
        and sorted(v.get("member_ids") or []) == ids
        and v.get("member_id") in voter_ids
    }
    needed = quorum_of(len(voters))
    if len(agreeing) < needed:
        return {
            "ok": False,
            "why": f"only {len(agreeing)} of {len(voters)} voting members confirm the member "
            f"list ({needed} needed)",
        }
    return {"ok": True, "why": f"{len(agreeing)} of {len(voters)} voting members agree"}


def recorded_cluster_id(obj: dict[str, Any], claims: list[dict[str, Any]]) -> str:
    """The cluster ID this EtcdCluster was created with: its status, else its claims'."""
    status_id = str((obj.get("status") or {}).get("clusterID") or "")
    if status_id:
        return status_id
    ids = Counter(
        annotations_of(c)[ANN_CLUSTER_ID] for c in claims if annotations_of(c).get(ANN_CLUSTER_ID)
    )
    return ids.most_common(1)[0][0] if ids else ""


def _claim_capacity(claims: list[dict[str, Any]]) -> int | None:
    """The smallest capacity the claims have really got (a resize may be under way)."""
    sizes = []
    for c in claims:
        capacity = ((c.get("status") or {}).get("capacity") or {}).get("storage")
        if capacity:
            try:
                sizes.append(parse_quantity(capacity))
            except PlanError:
                continue
    return min(sizes) if sizes else None


# --- the plan ------------------------------------------------------------------------------


def _free_names(cluster: str, used: set[str]) -> list[str]:
    return [f"{cluster}-{i}" for i in range(MAX_INDEX + 1) if f"{cluster}-{i}" not in used]


def scale_down_order(members: list[dict[str, Any]], leader_id: str) -> list[str]:
    """Learners first, then unhealthy members, then the highest index; the leader last."""

    def rank(m: dict[str, Any]) -> tuple[int, int, int, int]:
        return (
            0 if m.get("is_learner") else 1,
            1 if m.get("healthy") else 0,
            1 if m["id"] == leader_id else 0,
            -member_index(m["name"]),
        )

    return [m["name"] for m in sorted(members, key=rank)]


def roll_order(names: list[str], leader: str) -> list[str]:
    return sorted(n for n in names if n != leader) + [n for n in names if n == leader]


class _Observed:
    """The facts, indexed the way every decision reads them."""

    def __init__(self, facts: dict[str, Any]) -> None:
        self.obj = facts.get("object") or {}
        self.options = facts.get("options") or {}
        self.info = facts.get("info") or {}
        self.name = str(_meta(self.obj).get("name") or self.options.get("name") or "")
        self.namespace = str(
            _meta(self.obj).get("namespace") or self.options.get("namespace") or ""
        )
        self.spec = normalize_spec(self.obj, self.options)
        self.backups = list(facts.get("backups") or [])
        pods_list = list(facts.get("pods") or [])
        claims_list = list(facts.get("claims") or [])
        self.pods = {_member_of(p): p for p in pods_list}
        self.claims = {_member_of(c): c for c in claims_list}
        self.live_claims = {
            n: c
            for n, c in self.claims.items()
            if not _deleting(c) and not {ANN_FENCED, ANN_REMOVING} & set(annotations_of(c))
        }
        # Still live: the restored member is not lost, and its name is not free for another.
        self.restoring = {
            n for n, c in self.claims.items() if annotations_of(c).get(ANN_RESTORE_PENDING)
        }
        self.restore = str(annotations_of(self.obj).get(ANN_RESTORE) or "")
        capacity = _claim_capacity(list(self.live_claims.values()))
        if capacity is not None and "quotaBackendBytes" not in (
            (self.obj.get("spec") or {}).get("storage") or {}
        ):
            self.spec["quota_bytes"] = max(
                MIN_QUOTA, min(self.spec["quota_bytes"], quota_limit(capacity))
            )
        domain = str(self.options.get("domain") or "cluster.local")
        names = [f"{self.name}-{i}" for i in range(MAX_INDEX + 1)]

        def urls(port: int) -> dict[str, str]:
            return {
                url_key(member_url(self.name, self.namespace, domain, self.spec["tls"], n, port)): n
                for n in names
            }

        self.peer_names, self.client_names = urls(PEER_PORT), urls(CLIENT_PORT)
        self.members = etcd_members(self.info, self.peer_names)
        # Members of the cluster etcd lists whose peer URL is none of this EtcdCluster's.
        self.foreign = [m for m in self.members if m["foreign"]]
        self.known = bool(self.info.get("cluster_id"))
        self.by_name = {m["name"]: m for m in self.members if m["name"]}
        self.voters = [m for m in self.members if not m.get("is_learner")]
        self.quorum = self.info.get("quorum") or {
            "voters": 0,
            "healthy_voters": 0,
            "needed": 0,
            "ok": False,
        }
        self.leader_id = str((self.info.get("leader") or {}).get("id") or "")
        self.leader = next((m["name"] for m in self.members if m["id"] == self.leader_id), "")
        self.recorded_id = recorded_cluster_id(self.obj, claims_list)
        self.agreed = agreement(self.info, self.recorded_id)
        self.trusted = (
            self.known and bool(self.quorum.get("ok")) and self.agreed["ok"] and not self.foreign
        )
        self.endpoint_names = {url_key(url): n for n, url in (facts.get("endpoints") or {}).items()}
        self.paused = self.spec["paused"] and not self.options.get("ignore_pause", False)
        self.hands_off = (
            self.paused or bool(self.options.get("read_only", False)) or not self.spec["allowed"]
        )
        self.tls_plan = tls_plan(facts.get("tls"), self.spec, self.name, run_state(self))
        self.tls = self.tls_plan["refusals"]
        self.info_error = str(facts.get("info_error") or "")
        # None: Nodes could not be read, and no member is judged by its node.
        self.nodes = facts.get("nodes")
        # None: PersistentVolumes could not be read, and no member is judged by its volume.
        self.volumes = facts.get("volumes")
        # The operator's clock: compared only with the healthy-since marks it wrote.
        self.observed_at = str(facts.get("observed_at") or "")

    def member_at(self, endpoint: str) -> str:
        """The member an endpoint was asked as: the run's own map, else the whole client URL."""
        key = url_key(endpoint)
        return self.endpoint_names.get(key) or self.client_names.get(key, "")

    def healthy(self, name: str) -> bool:
        """Whether etcd reports this cluster's member `name` (by its peer URL) healthy."""
        return bool((self.by_name.get(name) or {}).get("healthy"))


def run_state(o: _Observed) -> str:
    """How far the cluster's TLS material may be in use: `running` (a member Pod exists, which
    mounts it, or a member answers), `stopped` (it has run, no member Pod is left: a cluster ID
    was recorded, or a claim exists that no restore is still feeding) or `new` (nothing ever
    started on it; a restore makes the first member's claim before any certificate exists)."""
    answered = o.known or any(v.get("cluster_id") for v in o.info.get("views") or [])
    if o.pods or answered:
        return "running"
    return "stopped" if o.recorded_id or (o.claims and not o.restore) else "new"


def node_state(node: dict[str, Any]) -> tuple[bool, float | None, str]:
    """(lost, seconds lost, how) of a node as the observe module saw it: gone (None: nothing
    to wait for), silent (its kubelet has not renewed its Lease for NODE_SILENCE seconds,
    counted on the API server's clock: Kubernetes counts it Ready for 35 s more), or not Ready.
    A not-Ready node whose kubelet still renews (it says so itself) counts from its Ready
    condition's change to its latest renewal, both on the kubelet's clock. No duration is ever
    one machine's clock against another's: a skewed kubelet would look silent, or never."""
    if not node.get("found"):
        return True, None, "no longer exists"
    ready = node.get("ready") == "True"
    silent = node.get("silent_for")
    if silent is not None and silent > NODE_SILENCE:
        state = "has stopped renewing its Lease" if ready else "is not Ready"
        return True, float(silent), f"{state} ({int(silent)} s without word from its kubelet)"
    if ready:
        return False, 0.0, ""
    since = str(node.get("ready_since") or "")
    if silent is not None:
        kubelet = seconds_between(since, str(node.get("renewed") or ""))
        seconds = None if kubelet is None else kubelet + silent
    else:
        # No Lease to count on: from the condition's change (its writer's clock) to the API
        # server's answer.
        seconds = seconds_between(since, str(node.get("read_at") or ""))
    # Unmeasurable: lost, but never due (a replacement is not made on a guess).
    return True, max(0.0, seconds or 0.0), "is not Ready"


def _usable(o: _Observed, name: str) -> bool:
    node = (o.nodes or {}).get(name)
    return node is not None and not node_state(node)[0]


def volume_can_go(o: _Observed, volume: dict[str, Any] | None, but: str = "") -> bool | None:
    """Whether a member's volume (the observe module's `volumes` entry) can be mounted on a
    usable node other than `but`: a volume any node can mount can, one bound to no volume yet
    goes where its class puts it, one whose PersistentVolume is gone cannot. None when
    unknown (PersistentVolumes not readable)."""
    if volume is None:
        return None
    if not volume.get("bound") or volume.get("anywhere"):
        return True
    if not volume.get("found"):
        return False
    return any(_usable(o, n) for n in volume.get("nodes") or [] if n != but)


def node_losses(o: _Observed) -> dict[str, dict[str, Any]]:
    """Members etcd does not count healthy that no node runs, by name: {node, seconds (lost
    for; None when there is nothing to wait for), why, movable}.

    A member whose Pod is placed is lost when that node is gone, silent or not Ready
    (node_state); `movable` then says whether its volume can be mounted on another node that
    is usable (a volume any node can mount, or one whose affinity admits such a node). A member
    whose Pod is gone, or not placed, is lost only when its volume can be mounted on no
    usable node: judged by the bound PersistentVolume's node affinity, never by the node the
    claim was first scheduled to (`volume.kubernetes.io/selected-node`, which nothing updates
    once a node is rotated out). A node Ready and heard from lately is not lost, whatever etcd
    says; nor is a member whose volume nobody could read judged by its volume."""
    if o.nodes is None or not o.known:
        return {}
    losses: dict[str, dict[str, Any]] = {}
    for name in sorted(set(o.pods) | set(o.live_claims)):
        if o.healthy(name):
            continue
        claim = o.live_claims.get(name)
        volume = (
            None
            if o.volumes is None or claim is None
            else o.volumes.get(str(_meta(claim).get("name") or ""))
        )
        placed = str(((o.pods.get(name) or {}).get("spec") or {}).get("nodeName") or "")
        if placed:
            node = o.nodes.get(placed)
            if node is None:
                continue
            lost, seconds, how = node_state(node)
            if lost:
                losses[name] = {
                    "node": placed,
                    "seconds": seconds,
                    "why": f"its node {placed} {how}",
                    "movable": bool(volume_can_go(o, volume, but=placed)),
                }
            continue
        if volume is None or volume_can_go(o, volume) is not False:
            continue
        admitted = list(volume.get("nodes") or [])
        if not admitted:
            pinned = list(volume.get("pinned") or [])
            losses[name] = {
                "node": pinned[0] if pinned else "",
                "seconds": None,
                "why": f"its node {pinned[0]} no longer exists"
                if len(pinned) == 1
                else f"no node its volume {volume.get('pv') or ''} can be mounted on exists",
                "movable": False,
            }
            continue
        states = [(n, node_state(o.nodes.get(n) or {})) for n in admitted]
        known = [s[1] for _, s in states if s[1] is not None]
        first, (_, _, how) = states[0]
        losses[name] = {
            "node": first,
            "seconds": min(known) if known else None,
            "why": f"its volume's node {first} {how}"
            if len(admitted) == 1
            else f"no node its volume can be mounted on is usable ({first} {how})",
            "movable": False,
        }
    return losses


def _node_loss_due(loss: dict[str, Any], timeout: int) -> bool:
    """Whether a lost node has been gone long enough to give up on its member."""
    if timeout <= 0:
        return False
    return loss["seconds"] is None or loss["seconds"] >= timeout


def _bootstrap(o: _Observed, refused: bool) -> tuple[list[str], str]:
    """(members to start into a new cluster, the --initial-cluster their claims record; ''
    for one computed from the spec). Only for a cluster with nothing to lose: etcd does not
    answer, no cluster ID was ever recorded (so it was never reported Available), nothing is
    restored into it. With no claim and no Pod, every member of the spec. An interrupted
    bootstrap (every claim says `new`, with the same --initial-cluster, and none records a
    member yet) is finished, never started over: the members listed there that have no claim
    get one with that same record, and each Pod is made from its claim. Once the EtcdCluster
    records that the bootstrap started its Pods (ANN_BOOTSTRAP_STARTED), never again: the
    members may have formed a cluster the operator could not reach (`_unrecorded_bootstrap`)."""
    if o.known or o.hands_off or refused or o.restore or o.recorded_id:
        return [], ""
    if ANN_BOOTSTRAP_STARTED in annotations_of(o.obj):
        return [], ""
    if not o.pods and not o.claims:
        return [f"{o.name}-{i}" for i in range(o.spec["size"])], ""
    claims = [annotations_of(c) for c in o.claims.values()]
    if any(a.get(ANN_INITIAL_STATE) != "new" or a.get(ANN_MEMBER_ID) for a in claims):
        return [], ""
    records = {a.get(ANN_INITIAL_CLUSTER) or "" for a in claims}
    if len(records) != 1 or not (record := next(iter(records))):
        return [], ""
    listed = [entry.split("=", 1)[0] for entry in record.split(",")]
    missing = [n for n in listed if n not in o.claims and n not in o.pods]
    return (missing, record) if missing else ([], "")


def _unrecorded_bootstrap(o: _Observed) -> dict[str, str] | None:
    """A refusal when members of a bootstrap that started (the EtcdCluster says so) lack their
    claim while no cluster ID was ever recorded (etcd has not answered the operator with an
    agreeing quorum): made again as `new`, such a member would start a cluster of its own
    beside the one the others formed, or come back under its old identity with none of its
    data. Once etcd answers, each is removed and replaced through a learner as usual."""
    started = annotations_of(o.obj).get(ANN_BOOTSTRAP_STARTED)
    if not started or o.known or o.recorded_id or o.restore or o.hands_off:
        return None
    listed = [entry.split("=", 1)[0] for entry in started.split(",") if "=" in entry]
    missing = [n for n in listed or sorted(o.claims) if n not in o.claims]
    if not missing:
        return None
    return _refusal(
        "BootstrapNotRecorded",
        f"metadata.annotations[{ANN_BOOTSTRAP_STARTED}]",
        f"{', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no claim, and the "
        f"cluster's members were started ({ANN_BOOTSTRAP_STARTED}) but etcd has not answered "
        "the operator with a quorum since, so no cluster ID was recorded: not made again as "
        "members of a new cluster, which could start a cluster of its own or come back under "
        "an old identity without its data. Once etcd answers, they are replaced through "
        "learners; a cluster that never held data can be deleted and created again",
    )


def _versions(o: _Observed) -> tuple[dict[str, str], str, dict[str, str] | None]:
    """(version each member runs, the version new members start on, a refusal or None)."""
    running = {
        n: annotations_of(c).get(ANN_VERSION) or labels_of(o.pods.get(n)).get(LABEL_VERSION) or ""
        for n, c in o.live_claims.items()
    }
    running = {n: v for n, v in running.items() if v}
    target = o.spec["version"]
    if version_problem(target):
        base = min(running.values(), key=version_tuple, default=DEFAULT_VERSION)
        return running, base, None
    for current in sorted(set(running.values()), key=version_tuple):
        if current == target or version_problem(current):
            continue
        if why := version_change_problem(
            current, target, o.options.get("min_35_for_36") or "3.5.26"
        ):
            refusal = _refusal(
                "UnsafeVersionChange",
                "spec.version",
                f"Refusing spec.version {target}: {why}. The members keep their version.",
            )
            return running, min(running.values(), key=version_tuple), refusal
    return running, target, None


def _contradicted(o: _Observed) -> list[dict[str, str]]:
    """Members whose own answer contradicts what the members agree on: it answers for another
    cluster, as a member etcd does not list where its claim records another, or as the leader
    of a cluster of its own. Each with the reason and, when it is not fenced for it, why not
    (`unfenced`): only a trusted quorum's agreement (the views of a quorum of voting members
    agreeing on cluster ID and member list, under the recorded cluster ID, no foreign member)
    can contradict a member, and only an answer over TLS, checked against the cluster's CA,
    comes from one of its members: over plain HTTP anything that answers on a member's
    address (a reused Pod IP, a Pod of someone else's) could have said it."""
    cluster_id = str(o.info.get("cluster_id") or "")
    listed = {m["id"] for m in o.members}
    voters = {m["id"] for m in o.voters}
    found: dict[str, str] = {}
    verified: dict[str, bool] = {}
    for view in o.info.get("views") or []:
        endpoint = str(view.get("endpoint") or "")
        name = o.member_at(endpoint)
        if not name or name not in o.claims or not view.get("cluster_id"):
            continue
        recorded_member = annotations_of(o.claims.get(name)).get(ANN_MEMBER_ID)
        expected = o.recorded_id or cluster_id
        if expected and view["cluster_id"] != expected:
            found[name] = f"it answers for cluster {view['cluster_id']}, not {expected}"
        elif (
            recorded_member
            and view.get("member_id")
            and view["member_id"] != recorded_member
            # Another member of ours answering on this address is a mix-up of addresses,
            # not this member's doing.
            and view["member_id"] not in listed
        ):
            found[name] = (
                f"it answers as member {view['member_id']}, its claim records {recorded_member}"
            )
        elif (
            o.agreed["ok"]
            and view.get("linearizable")
            and len(set(view.get("member_ids") or []) & voters) < quorum_of(len(voters))
        ):
            # A linearizable answer goes through a leader: one whose list does not even hold a
            # quorum of the voters a quorum agrees on comes from a leader of its own, a fork
            # (same cluster ID when a seed re-bootstraps with its old flags). A view read while
            # a member was being added or removed differs by one member, never by that much.
            found[name] = (
                f"it leads a cluster of its own: it lists {len(view.get('member_ids') or [])} "
                f"members where a quorum lists {len(o.members)}"
            )
        else:
            continue
        verified[name] = url_key(endpoint).startswith("https://")
    out = []
    for name, why in sorted(found.items()):
        unfenced = ""
        if not o.trusted:
            unfenced = (
                "no trusted quorum contradicts it (a quorum agreeing on the member list, no "
                "foreign member), so nothing is fenced on its word"
            )
        elif not verified[name]:
            unfenced = (
                "its answer came over plain HTTP (spec.tls.enabled is false), which does not "
                "show who answered: check what answers at its address, and fence it by hand "
                f"(annotate its claim {ANN_FENCED}) if it is a fork"
            )
        out.append({"name": name, "reason": why, "unfenced": unfenced})
    return out


def _fence(o: _Observed) -> list[dict[str, str]]:
    """Members a trusted quorum contradicts, on an answer over TLS: fenced (docs/design-
    decisions.md, "Fencing needs a trusted quorum and an answer over TLS")."""
    return [
        {"name": c["name"], "reason": c["reason"]} for c in _contradicted(o) if not c["unfenced"]
    ]


def _suspects(o: _Observed) -> list[dict[str, str]]:
    """Members whose answers contradict the others, not fenced for it: said, never acted on."""
    return [c for c in _contradicted(o) if c["unfenced"]]


def _foreign_refusal(o: _Observed) -> dict[str, str] | None:
    """Members etcd lists whose peer URL is none of this EtcdCluster's: taken for none of ours,
    and nothing is changed or cleaned up while they are there."""
    if not o.foreign:
        return None
    domain = str(o.options.get("domain") or "cluster.local")
    ours = member_url(o.name, o.namespace, domain, o.spec["tls"], f"{o.name}-N", PEER_PORT)
    listed = ", ".join(
        f"member {m['id']} at {', '.join(m.get('peer_urls') or []) or 'no peer URL'}"
        for m in o.foreign
    )
    return _refusal(
        "ForeignMember",
        "",
        f"etcd lists {listed}: no member of EtcdCluster {o.namespace}/{o.name}, whose members' "
        f"peer URLs are {ours}. It may be a member of another namespace's cluster of the same "
        f"name, or the operator's cluster domain ({domain}) may not be the one the members "
        "were made with. Membership changes and cleanups wait; if it does not belong here, "
        "remove it by hand (etcdctl member remove <id>)",
    )


def _record(o: _Observed, fenced: set[str]) -> list[dict[str, str]]:
    """Healthy members whose claim does not yet record who they are (and so arm the guard)."""
    out = []
    for m in o.members:
        claim = o.live_claims.get(m["name"])
        if claim is None or not m.get("healthy") or m["name"] in fenced:
            continue
        voter = "false" if m.get("is_learner") else "true"
        version = labels_of(o.pods.get(m["name"])).get(LABEL_VERSION, "")
        ann = annotations_of(claim)
        if (
            ann.get(ANN_MEMBER_ID) != m["id"]
            or ann.get(ANN_CLUSTER_ID) != o.info["cluster_id"]
            or ann.get(ANN_INITIAL_STATE) != "existing"
            or labels_of(claim).get(LABEL_VOTER) != voter
            or (version and ann.get(ANN_VERSION) != version)
        ):
            out.append(
                {
                    "name": m["name"],
                    "member_id": m["id"],
                    "cluster_id": o.info["cluster_id"],
                    "voter": voter,
                    "version": version or ann.get(ANN_VERSION, ""),
                    "initial_cluster": f"{m['name']}={(m.get('peer_urls') or [''])[0]}",
                }
            )
    return out


# --- a roll, one member at a time ---------------------------------------------------------


def _created(pod: dict[str, Any]) -> str:
    return str(_meta(pod).get("creationTimestamp") or "")


def _rolled(o: _Observed, renewed: list[str], before: list[dict[str, Any]]) -> dict[str, Any]:
    """How the members on a Pod of the spec fare while other members are still on Pods of an
    earlier one (`before`). `halted`: those the roll made that cannot run, by name ({cause,
    reason, why, fields}); `failing`: those it did not make that cannot run (a roll set back
    finds the others on the spec again, made long before: their troubles are their own);
    `settling`: those not yet healthy for spec.minReadySeconds (seconds so far; None while
    not healthy at all); `settled`; `marks`: the Pods to mark healthy since this look.
    Healthy: the Pod Ready, its container not restarted since (or settled again after), etcd
    counting the member healthy. The time is the runbook's own, written on the Pod the first
    time a look sees that run of it healthy, so a run that ends, or an operator that
    restarts, takes it up where it was. The roll made a Pod if it is newer than a Pod from
    before (the API server's times, compared with each other only)."""
    needed = o.spec["min_ready_seconds"]
    oldest = min((_created(p) for p in before), default="")
    out: dict[str, Any] = {"halted": {}, "failing": {}, "settling": {}, "settled": [], "marks": []}
    for name in renewed:
        pod = o.pods[name]
        made = _created(pod) > oldest
        no_node = unschedulable(pod)
        trouble = (
            {"cause": "schedule", "reason": "Unschedulable", "why": f"no node takes it ({no_node})"}
            if no_node and made
            else container_trouble(pod)
        )
        run = healthy_run(pod)
        healthy = bool(run) and o.healthy(name)
        marked = annotations_of(pod)
        since = (
            seconds_between(marked.get(ANN_HEALTHY_SINCE, ""), o.observed_at)
            if marked.get(ANN_HEALTHY_RUN) == run
            else None
        )
        settled = healthy and (needed == 0 or (since is not None and since >= needed))
        if not trouble and not settled and made:
            trouble = restart_trouble(pod)
        if trouble and made:
            out["halted"][name] = {
                **trouble,
                "fields": trouble_fields(trouble, changed_fields(pod, before[0])),
            }
        elif trouble:
            out["failing"][name] = trouble
        elif settled:
            out["settled"].append(name)
        elif healthy and (since is None or since < 0) and o.observed_at:
            out["marks"].append({"name": name, "since": o.observed_at, "run": run})
            out["settling"][name] = 0.0
        else:
            out["settling"][name] = since if healthy else None
    return out


def _roll_halted_refusal(name: str, trouble: dict[str, Any], others: list[str]) -> dict[str, str]:
    fields = trouble["fields"]
    named = ", ".join(fields) or "the change"
    return _refusal(
        "RollHalted",
        ", ".join(fields),
        f"The roll halted at {name}: its new Pod cannot run: {trouble['why']}. Changed: "
        f"{named}. No other member is restarted"
        + (f" ({', '.join(others)} keep running as they are)" if others else "")
        + f"; set {named} back, or to what etcd runs with, and {name} is made again from it, "
        "on its own data",
    )


def _cannot_run_refusal(name: str, trouble: dict[str, Any]) -> dict[str, str]:
    fields = trouble_fields(trouble, [])
    return _refusal(
        "MemberCannotRun",
        ", ".join(fields),
        f"{name}'s Pod cannot run: {trouble['why']}"
        + (f"; look at {', '.join(fields)}" if fields else ""),
    )


# --- the snapshot a minor upgrade starts with ---------------------------------------------


def before_upgrade_name(cluster: str, minor: str) -> str:
    """The one-off EtcdBackup's name: its Job's name adds 11 characters and must stay within
    63, so a long cluster name is cut and made unique again by a hash of it."""
    suffix = f"-before-{minor.replace('.', '-')}"
    if len(cluster) + len(suffix) <= 52:
        return cluster + suffix
    digest = hashlib.sha256(cluster.encode()).hexdigest()[:6]
    return f"{cluster[: 52 - len(suffix) - 7]}-{digest}{suffix}"


def _minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _backups_of(o: _Observed) -> list[dict[str, Any]]:
    return [
        b
        for b in o.backups
        if (b.get("spec") or {}).get("clusterName") == o.name and not _deleting(b)
    ]


def upgrade_snapshot(o: _Observed) -> dict[str, Any]:
    """The verified snapshot taken before the upgrade to the spec's minor, as status records
    it; empty when there is none."""
    minor = _minor_of(o.spec["version"])
    for backup in _backups_of(o):
        if labels_of(backup).get(LABEL_BEFORE_UPGRADE) != minor:
            continue
        last = (backup.get("status") or {}).get("lastSnapshot") or {}
        if last.get("location") and last.get("sha256"):
            return {
                "version": minor,
                "backup": str(_meta(backup).get("name")),
                "location": last["location"],
                "sha256": last["sha256"],
                "revision": last.get("revision"),
                "time": last.get("time"),
            }
    return {}


def _before_upgrade_backup(o: _Observed, source: dict[str, Any], minor: str) -> dict[str, Any]:
    """A one-off EtcdBackup to the destination of the cluster's own EtcdBackup (a bucket or a
    claim), under a prefix of its own (`<prefix>/before-upgrade`, on a claim
    `<path>/before-upgrade`) so the schedule's retention never prunes it; owned by the
    EtcdCluster, and labelled so its progress queues the cluster."""
    destination = (source.get("spec") or {}).get("destination") or {}
    kind = "s3" if destination.get("s3") else "volume"
    where = dict(destination.get(kind) or {})
    field = "prefix" if kind == "s3" else "path"
    joined = "/".join(p for p in (str(where.get(field) or "").strip("/"), "before-upgrade") if p)
    # A claim's path is absolute inside it (the CRD says so); a key prefix is not.
    where[field] = joined if kind == "s3" else f"/{joined}"
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "EtcdBackup",
        "metadata": {
            "name": before_upgrade_name(o.name, minor),
            "namespace": o.namespace,
            "labels": {
                "app.kubernetes.io/managed-by": "etcd-runbook-operator",
                LABEL_CLUSTER: o.name,
                LABEL_BEFORE_UPGRADE: minor,
            },
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/v1alpha1",
                    "kind": "EtcdCluster",
                    "name": o.name,
                    "uid": str(_meta(o.obj).get("uid") or ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"clusterName": o.name, "destination": {kind: where}},
    }


def _not_the_upgrade_backup(backup: dict[str, Any], cluster: str, minor: str) -> str:
    """Why an EtcdBackup named like the one-off snapshot before an upgrade is not the one
    the plan makes (`_before_upgrade_backup`); empty when it is. Only that one is read: a
    labelled one's status changes queue the cluster, an unlabelled one's do not."""
    found = (backup.get("spec") or {}).get("clusterName")
    if found != cluster:
        return f"its spec.clusterName is {found!r}, not {cluster!r}"
    label = labels_of(backup).get(LABEL_BEFORE_UPGRADE)
    if label != minor:
        return (
            f"it is labelled {LABEL_BEFORE_UPGRADE}={label}, not {minor}"
            if label is not None
            else f"it lacks the label {LABEL_BEFORE_UPGRADE}={minor}"
        )
    return ""


def _upgrade_gate(
    o: _Observed, running: dict[str, str], snapshot: dict[str, Any]
) -> dict[str, Any]:
    """Whether members may move to the spec's version: one that takes a member to a newer
    minor waits for a verified snapshot (to the cluster's EtcdBackup's destination), unless a
    person wrote down that this version goes without one. Returns `create` (the one-off
    EtcdBackup to make), `waiting` (why the upgrade waits) or `refusal`; empty when the
    members may move (a patch change, or no change of version, needs no snapshot)."""
    target = o.spec["version"]
    minor = _minor_of(target)
    if not any(version_tuple(v)[:2] < version_tuple(target)[:2] for v in running.values()):
        return {}
    if annotations_of(o.obj).get(ANN_UPGRADE_WITHOUT_SNAPSHOT) == target:
        return {}
    if snapshot:
        return {}
    name = before_upgrade_name(o.name, minor)
    taken = next((b for b in o.backups if _meta(b).get("name") == name and not _deleting(b)), None)
    if taken is not None and (why_not := _not_the_upgrade_backup(taken, o.name, minor)):
        # Someone else's object under our name: its progress does not queue this cluster (the
        # watcher counts it by spec only, or under another cluster), and ours cannot be made.
        return {
            "refusal": _refusal(
                "UpgradeSnapshotNameTaken",
                "spec.version",
                f"spec.version {target}: not upgrading: EtcdBackup {name} has the name of the "
                f"snapshot this upgrade takes, but it is not that snapshot ({why_not}). Delete "
                f"or rename EtcdBackup {name} so the runbook can take it, or annotate the "
                f"EtcdCluster {ANN_UPGRADE_WITHOUT_SNAPSHOT}={target} to upgrade without one",
            )
        }
    if taken is not None:
        status = taken.get("status") or {}
        if status.get("phase") == "Failed":
            why = next(
                (
                    c.get("message")
                    for c in status.get("conditions") or []
                    if c.get("type") == "Degraded"
                ),
                "",
            )
            return {
                "refusal": _refusal(
                    "UpgradeSnapshotFailed",
                    "spec.version",
                    f"spec.version {target}: not upgrading: the snapshot it starts with failed "
                    f"(EtcdBackup {name}: {why or 'see its conditions'}). Fix the cause and "
                    "delete EtcdBackup "
                    f"{name} to take it again, or annotate the EtcdCluster "
                    f"{ANN_UPGRADE_WITHOUT_SNAPSHOT}={target} to upgrade without one",
                )
            }
        return {
            "waiting": f"taking a snapshot before the upgrade to {target} (EtcdBackup {name}); "
            "the roll starts once it is verified"
        }
    sources = sorted(
        (
            b
            for b in _backups_of(o)
            if LABEL_BEFORE_UPGRADE not in labels_of(b)
            and (((b.get("spec") or {}).get("destination") or {}).keys() & {"s3", "volume"})
        ),
        key=lambda b: str(_meta(b).get("name")),
    )
    if not sources:
        return {
            "refusal": _refusal(
                "UpgradeNeedsSnapshot",
                "spec.version",
                f"spec.version {target}: not upgrading yet: a minor upgrade starts with a verified "
                "snapshot, and no EtcdBackup saves this cluster. Create one (the snapshot "
                "goes to its destination), or annotate the EtcdCluster "
                f"{ANN_UPGRADE_WITHOUT_SNAPSHOT}={target} to upgrade without one. The members "
                "keep their version meanwhile",
            )
        }
    return {
        "create": _before_upgrade_backup(o, sources[0], minor),
        "waiting": f"taking a snapshot before the upgrade to {target} (EtcdBackup {name}, to the "
        f"destination of EtcdBackup {_meta(sources[0]).get('name')}); the roll starts once it is "
        "verified",
    }


def plan(facts: dict[str, Any]) -> dict[str, Any]:
    """Everything one reconcile run does, decided from one observation."""
    o = _Observed(facts)
    spec = o.spec
    refusals = list(spec["problems"]) + o.tls
    running, base_version, version_refusal = _versions(o)
    if version_refusal:
        refusals.append(version_refusal)
    spec_ok = not spec["problems"]
    # A minor upgrade starts from a verified snapshot, or not at all. Until its gate opens,
    # every Pod the plan makes (a heal, a learner, a replacement, a roll of another change)
    # runs the version its member ran, and a new member the lowest one running: a Pod made
    # on the new minor would be the upgrade starting without its way back.
    snapshot = upgrade_snapshot(o)
    gate = _upgrade_gate(o, running, snapshot) if spec_ok and not version_refusal else {}
    lowest = min(running.values(), key=version_tuple, default=base_version)

    def version_of(member: str) -> str:
        if version_refusal or not spec_ok:
            return running.get(member, base_version)
        return running.get(member, lowest) if gate else spec["version"]

    # Heal first: a live claim without a Pod gets its Pod back; never a member whose guard
    # tripped (its Pod stays to say why) nor a fenced or removed one (their claims are not live).
    lost_data = sorted(
        n
        for n, p in o.pods.items()
        if not _deleting(p) and data_lost(p, o.live_claims.get(n)) and not o.healthy(n)
    )
    # Members no node runs: a Pod on a lost node is not waited for (no kubelet would confirm
    # it gone). Once the node has been lost for spec.nodeLossTimeout, a member whose volume
    # another node can mount is moved: its Pod deleted at once and made again on its own claim
    # (the same member: no membership change, so no quorum needed); else it is replaced. With
    # a timeout of 0 none is moved or replaced, and a member without a Pod gets it back, to
    # wait on its own volume for its node (heal in place).
    node_lost = node_losses(o)
    timeout = spec["node_loss_timeout"]
    moved = sorted(
        n
        for n, loss in node_lost.items()
        if loss["movable"]
        and _node_loss_due(loss, timeout)
        and n in o.pods
        and n in o.live_claims
        and n not in o.restoring
    )
    # The member Pods that stand (not going, not lost with their node or their data): made
    # from the spec as it is now, or from an earlier one (a roll not over, or not begun).
    standing = [
        n
        for n, p in sorted(o.pods.items())
        if not _deleting(p)
        and n in o.live_claims
        and n not in lost_data
        and n not in o.restoring
        and n not in node_lost
    ]
    renewed = [
        n
        for n in standing
        if annotations_of(o.pods[n]).get(ANN_POD_HASH) == pod_hash(spec, version_of(n))
        and labels_of(o.pods[n]).get(LABEL_VERSION) == version_of(n)
    ]
    outdated = [n for n in standing if n not in renewed]
    # While a roll is not over, the members on their new Pod are watched: one that cannot run
    # halts it, one not yet healthy for spec.minReadySeconds holds it.
    rolled = (
        _rolled(o, renewed, [o.pods[n] for n in outdated])
        if outdated and spec_ok
        else {"halted": {}, "failing": {}, "settling": {}, "settled": [], "marks": []}
    )
    halted: dict[str, dict[str, Any]] = rolled["halted"]
    # Pods that ended, and outdated Pods that cannot run (a roll to a Pod that cannot run,
    # whose spec was then set back): re-making either costs no availability, and a roll would
    # wait for them forever. Not while a roll is halted: the member would come back on the
    # spec that cannot run. A member down on an outdated Pod that still runs is left to its
    # kubelet: re-made now, it would be rolled without the roll's care.
    ended = sorted(
        n
        for n in standing
        if _phase(o.pods[n]) in ("Failed", "Succeeded")
        or (
            n in outdated
            and not halted
            and not pod_ready(o.pods[n])
            and not o.healthy(n)
            and bool(unschedulable(o.pods[n]) or container_trouble(o.pods[n]))
        )
    )
    # A Pod being deleted on a node that is gone or not Ready never finishes going (no kubelet
    # confirms it): waiting for it would stall every run.
    leaving = sorted(n for n, p in o.pods.items() if _deleting(p) and n not in node_lost)
    # A member Pod no node takes: said first, and nothing joins or votes behind it. It is
    # scheduled as soon as a node fits (a new node, one uncordoned, a relaxed spec).
    stuck = {
        n: why
        for n, p in o.pods.items()
        if not _deleting(p) and n not in node_lost and (why := unschedulable(p))
    }
    refusals.extend(
        _unschedulable_refusal(n, why) for n, why in sorted(stuck.items()) if n not in halted
    )
    refusals.extend(
        _roll_halted_refusal(n, trouble, [m for m in standing if m != n])
        for n, trouble in sorted(halted.items())
    )
    # Outside a roll, a member Pod made from the spec that cannot run is said too, naming
    # what to look at (a Pod no node takes is said above).
    failing = {
        n: trouble
        for n in renewed
        if not outdated and _phase(o.pods[n]) not in ("Failed", "Succeeded")
        if (trouble := container_trouble(o.pods[n]))
    } | rolled["failing"]
    refusals.extend(_cannot_run_refusal(n, trouble) for n, trouble in sorted(failing.items()))
    heal = sorted(
        n
        for n in o.live_claims
        if (n not in o.pods or n in ended or n in moved)
        and n not in lost_data
        and n not in o.restoring
        and (n not in node_lost or n in moved or (timeout == 0 and n not in o.pods))
    )

    fence = _fence(o)
    suspects = _suspects(o)
    fenced = {f["name"] for f in fence}
    # The cluster ID is recorded from the first look in which a quorum agrees on it, never from
    # one member's word; once recorded, only members of that cluster are looked at.
    record = (
        _record(o, fenced | {s["name"] for s in suspects})
        if o.known and (o.recorded_id or o.agreed["ok"])
        else []
    )
    if foreign := _foreign_refusal(o):
        refusals.append(foreign)
    relabel = [
        {"name": m["name"], "voter": "false" if m.get("is_learner") else "true"}
        for m in o.members
        if m["name"] in o.pods
        and not _deleting(o.pods[m["name"]])
        and labels_of(o.pods[m["name"]]).get(LABEL_VOTER)
        != ("false" if m.get("is_learner") else "true")
    ]

    # Membership: only on the word of an agreeing quorum.
    stale: list[str] = []
    replace: list[dict[str, str]] = []
    lost: list[str] = []
    promote: list[str] = []
    add: list[str] = []
    remove: list[str] = []
    roll: list[str] = []
    roll_pending: list[str] = []
    withheld = ""
    if o.known and not o.trusted:
        quorum = o.quorum
        withheld = "membership changes and cleanups wait: " + (
            f"the cluster has no quorum ({quorum.get('healthy_voters')} of {quorum.get('voters')} "
            f"voting members healthy, {quorum.get('needed')} needed)"
            if not quorum.get("ok")
            else o.agreed["why"]
            if not o.agreed["ok"]
            else f"etcd lists {len(o.foreign)} member(s) that are none of this cluster's"
        )
    if o.trusted:
        stale = sorted(
            n
            for n in set(o.pods) | set(o.claims)
            if n not in o.by_name
            and ANN_FENCED not in annotations_of(o.claims.get(n))
            and n not in o.restoring
        )
        replace = [
            {
                "name": n,
                "reason": "its data dir holds no member data, though its claim records member "
                f"{annotations_of(o.live_claims[n]).get(ANN_MEMBER_ID)}",
            }
            for n in lost_data
            if n in o.by_name
        ] + [
            {"name": f["name"], "reason": f"fenced: {f['reason']}"}
            for f in fence
            if f["name"] in o.by_name
        ]
        # One member lost with its node at a time, and only when nothing else is being
        # replaced: removing it first keeps quorum (it was not counted healthy), then a fresh
        # member joins on a new claim, on another node.
        due = [
            (n, loss)
            for n, loss in sorted(node_lost.items())
            if n in o.by_name and not loss["movable"] and _node_loss_due(loss, timeout)
        ]
        if due and not replace:
            n, loss = due[0]
            past = (
                f", past spec.nodeLossTimeout ({timeout} s)"
                if loss["seconds"] is not None
                else ": there is no node left to wait for"
            )
            replace.append({"name": n, "reason": loss["why"] + past})
        replaced = {r["name"] for r in replace}
        lost = sorted(
            m["name"] or m["id"]
            for m in o.members
            if m["name"] not in replaced
            and m["name"] not in o.live_claims
            and (m["name"] not in o.pods or ANN_REMOVING in annotations_of(o.claims.get(m["name"])))
        )
        gone = replaced | set(lost)
        current = [m for m in o.members if m["name"] not in gone]
        blocking = [r for r in refusals if r["reason"] != "UnsafeVersionChange"]
        if spec["size"] > len(current) and not blocking:
            used = set(o.by_name) | set(o.pods) | set(o.claims)
            add = _free_names(o.name, used)[: spec["size"] - len(current)]
        elif spec["size"] < len(current):
            if spec["size"] == 1 and len([m for m in current if not m.get("is_learner")]) >= 2:
                refusals.append(
                    _refusal(
                        "UnsafeScaleDown",
                        "spec.size",
                        f"Refusing spec.size 1: going from {len(current)} members to 1 means "
                        "removing a member from a two-member cluster, where one failure during "
                        "the change loses quorum (etcd's rule); scale to 3 first, or use the "
                        "member-replace playbook",
                    )
                )
            else:
                remove = scale_down_order(current, o.leader_id)[: len(current) - spec["size"]]
        promote = sorted(
            m["name"]
            for m in current
            if m.get("is_learner")
            and m["name"] in o.pods
            and m["name"] not in remove
            and m["name"] not in stuck
        )
        differs = [
            n
            for n in o.live_claims
            if n in o.pods
            and n in o.by_name
            and not _deleting(o.pods[n])
            and n not in remove
            and (
                annotations_of(o.pods[n]).get(ANN_POD_HASH) != pod_hash(spec, version_of(n))
                or labels_of(o.pods[n]).get(LABEL_VERSION) != version_of(n)
            )
        ]
        # Each member Pod Ready and etcd counting each member healthy: a roll takes one down.
        unhealthy = sorted(
            {m["name"] for m in o.members if not m.get("healthy")}
            | {n for n in o.by_name if n in o.pods and not pod_ready(o.pods[n])}
        )
        if differs and spec_ok and not (add or remove or replace or lost or promote):
            roll_pending = roll_order(differs, o.leader)
            if halted or rolled["settling"]:
                # Halted (said above): no further until the spec is set back. Settling: the
                # member rolled last is not yet trusted to stay up.
                pass
            elif unhealthy:
                refusals.append(
                    _refusal(
                        "RollBlocked",
                        "",
                        f"Not rolling {', '.join(sorted(differs))}: not every member is healthy "
                        f"({', '.join(unhealthy)}); the roll goes on once they are",
                    )
                )
            else:
                # One member a run: the next only once this one has stayed healthy.
                roll = roll_pending[:1]
    # After the membership decisions: an upgrade waiting for its snapshot holds the version,
    # not the members (a learner still joins, on the version the others run).
    if gate.get("refusal"):
        refusals.append(gate["refusal"])
    # Leadership goes first to a member already rolled (and settled), else to another healthy
    # voter.
    others = [m["name"] for m in o.voters if m.get("healthy") and m["name"] != o.leader]
    transferee = next((n for n in rolled["settled"] if n in others), others[0] if others else "")

    marks = rolled["marks"]
    if o.hands_off:
        heal, ended, moved, fence, record, relabel, marks = [], [], [], [], [], [], []
        stale, replace, lost, promote, add, remove, roll = [], [], [], [], [], [], []
    # No member Pod is made that would mount a TLS Secret not fit to mount (tls_plan): one
    # missing, or a user's not labelled for the cluster. Healing, re-creating, adding,
    # replacing and rolling each make one; the Pods that run keep running.
    if o.tls_plan["unmountable"]:
        heal, ended, replace, add, roll = [], [], [], [], []
    # A brand-new cluster, with nothing to lose (no claim, no Pod, no answer from etcd), starts
    # every member at once, as etcd's static bootstrap does (docs/design-decisions.md,
    # "Bootstrap"). A cluster being restored gets its first member from the restore: empty
    # members would be a cluster of their own, which the restored member could never join.
    if unrecorded := _unrecorded_bootstrap(o):
        refusals.append(unrecorded)
    bootstrap, bootstrap_record = _bootstrap(o, bool(refusals))
    names = [f"{o.name}-{i}" for i in range(MAX_INDEX + 1)]
    result = {
        "name": o.name,
        "namespace": o.namespace,
        "uid": str(_meta(o.obj).get("uid") or ""),
        "domain": str(o.options.get("domain") or "cluster.local"),
        "auto_compaction_retention": str(o.options.get("auto_compaction_retention") or "1h"),
        "spec": spec,
        "paused": o.paused,
        "hands_off": o.hands_off,
        "known": o.known,
        "trusted": o.trusted,
        "agreement": o.agreed,
        "withheld": withheld,
        "cluster_id": o.recorded_id or (o.info.get("cluster_id", "") if o.agreed["ok"] else ""),
        "leader": o.leader,
        "quorum": o.quorum,
        # The members etcd counts healthy, each known by its peer URL.
        "healthy": sorted(n for n, m in o.by_name.items() if m.get("healthy")),
        "member_names": sorted(o.by_name),
        "versions": {n: version_of(n) for n in names},
        "pod_hashes": {n: pod_hash(spec, version_of(n)) for n in names},
        "bootstrap": bootstrap,
        "bootstrap_record": bootstrap_record,
        "heal": heal,
        "ended": ended,
        "moved": moved,
        # Members an agreeing quorum no longer lists: their Pods may go at once (grace period
        # 0), as no kubelet may be there to confirm a graceful end and the process, if its
        # node comes back, is no member any more.
        "unlisted": sorted(n for n in set(o.pods) | set(o.claims) if n not in o.by_name)
        if o.trusted
        else [],
        "leaving": leaving,
        "fence": fence,
        "suspects": suspects,
        "record": record,
        "relabel": relabel,
        "replace": replace,
        "stale": stale,
        "lost": lost,
        "promote": promote,
        "add": add,
        "remove": remove,
        "roll": roll,
        # The whole roll still to go, in order (its first is `roll`, when it may go now).
        "roll_pending": roll_pending,
        # Whether `roll` is the first member of this roll (none on the new Pod yet).
        "roll_first": bool(roll) and not renewed,
        "outdated": outdated,
        "halted": halted,
        "settling": rolled["settling"],
        "settle_marks": marks,
        "transferee": transferee if o.trusted else "",
        "lost_data": lost_data,
        "unschedulable": dict(sorted(stuck.items())),
        "node_lost": node_lost,
        # Made only on the word of a quorum that agrees: the Job takes it from a healthy member.
        "upgrade_backup": [gate["create"]]
        if gate.get("create") and o.trusted and not o.hands_off
        else [],
        "upgrade_waiting": gate.get("waiting", "") if not o.hands_off else "",
        "upgrade_snapshot": snapshot,
        "fenced": sorted(n for n, c in o.claims.items() if ANN_FENCED in annotations_of(c)),
        # The TLS Secrets this run writes, and how (tls_plan).
        "tls_missing": o.tls_plan["write"],
        "tls_issue": o.tls_plan["issue"],
        "tls_new_ca": o.tls_plan["new_ca"],
        "tls_ca_from": o.tls_plan["ca_from"],
        "tls_announce": o.tls_plan["announce"],
        "tls_unmountable": o.tls_plan["unmountable"],
        "grow": sorted(
            _meta(c)["name"]
            for c in o.live_claims.values()
            if spec_ok
            and parse_quantity(
                ((c.get("spec") or {}).get("resources") or {})
                .get("requests", {})
                .get("storage", "0")
            )
            < spec["volume_bytes"]
        ),
        # A drain may take members only while a quorum of the larger of the voting membership
        # and the size asked for stays: during a scale-down it follows the real voters, during
        # a scale-up it already protects the size being built.
        "pdb_min_available": quorum_of(max(len(o.voters), spec["size"])),
        "refusals": refusals,
        "warnings": spec["warnings"],
    }
    # Whether act.yml has a membership, record, roll or volume step to take (a run with none
    # skips its steps altogether).
    result["steps"] = any(result[step] for step in ACT_STEPS)
    # Whether act.yml has a repair to make first (most changes have none: one skipped task).
    result["repair"] = any(result[step] for step in REPAIR_STEPS)
    # Whether the run has anything to change that the plan alone can tell (the Services and
    # the budget are compared with what was seen by the role): a run with nothing skips its
    # change steps in one task.
    result["busy"] = bool(result["heal"] or ended or leaving or result["bootstrap"]) or (
        not o.hands_off and bool(result["steps"] or result["tls_missing"])
    )
    return result


# --- the report ----------------------------------------------------------------------------


def _waiting_for_restore(o: _Observed) -> str:
    """Why the cluster has no member yet while its restore runs, or ''."""
    if o.restore and not o.known and (not o.claims or o.restoring):
        return (
            f"the first member's data is being restored by EtcdRestore {o.restore}; members "
            "start once it is written"
        )
    return ""


def _available(o: _Observed) -> tuple[bool, str, str]:
    if o.known and o.quorum.get("ok"):
        q = o.quorum
        return (
            True,
            "QuorumHealthy",
            f"{q['healthy_voters']} of {q['voters']} voting members healthy, {q['needed']} needed",
        )
    # Waiting for a restore is a cluster still being created, not one that lost its quorum.
    if waiting := _waiting_for_restore(o):
        return False, "Creating", waiting
    if not o.known and not o.pods and not o.live_claims:
        return False, "Creating", "no member has been started yet"
    if o.known:
        q = o.quorum
        return (
            False,
            "QuorumLost",
            f"{q.get('healthy_voters')} of {q.get('voters')} voting members healthy, "
            f"{q.get('needed')} needed: etcd refuses writes and linearizable reads",
        )
    return (
        False,
        "QuorumLost",
        "no member answered: " + (o.info_error[:200] or "no member Pod is running"),
    )


def _roll_note(o: _Observed, p: dict[str, Any]) -> str:
    """What a roll not over waits for, said after the members and versions."""
    if not p["roll_pending"] or p["roll"]:
        return ""
    needed = o.spec["min_ready_seconds"]
    waiting = "; ".join(
        f"{n} is on its new Pod, "
        + (
            f"healthy for {int(seconds)} of {needed} s"
            if seconds is not None
            else "not healthy yet"
        )
        for n, seconds in sorted(p["settling"].items())
    )
    if not waiting:
        return ""
    return f"; {waiting} (spec.minReadySeconds) before {p['roll_pending'][0]} restarts" + (
        f", then {', '.join(p['roll_pending'][1:])}" if len(p["roll_pending"]) > 1 else ""
    )


def _node_loss_remedy(loss: dict[str, Any]) -> str:
    if loss["movable"]:
        return "made again on its own volume on another node"
    return "replaced"


def _requeue_after(o: _Observed, p: dict[str, Any], lagging: list[str]) -> float | None:
    """When the run wants to look again though no event may come: a member etcd has yet to
    count healthy behind its Ready Pod, or a lost node's member coming due for replacement."""
    if o.hands_off:
        return None
    waits = [float(LAGGING_RECHECK)] if lagging else []
    # A member on its new Pod counted healthy so far: looked at again once it has been so for
    # spec.minReadySeconds, when the roll may go on.
    needed = o.spec["min_ready_seconds"]
    waits.extend(
        max(1.0, needed - seconds + 1) for seconds in p["settling"].values() if seconds is not None
    )
    timeout = o.spec["node_loss_timeout"]
    for loss in p["node_lost"].values():
        if timeout and loss["seconds"] is not None and loss["seconds"] < timeout:
            waits.append(max(1.0, timeout - loss["seconds"] + 1))
    return min(waits) if waits else None


def report(
    facts: dict[str, Any], extra_refusals: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """Status, conditions and Events from the last observation of the run; `extra_refusals`
    are what the run refused or failed at on the way (a step that was withheld)."""
    o = _Observed(facts)
    p = plan(facts)
    refusals = p["refusals"] + [r for r in extra_refusals or [] if r not in p["refusals"]]
    statuses = {s.get("member_id"): s for s in o.info.get("status") or [] if s.get("healthy")}
    members = [
        {
            "name": m["name"],
            "id": m["id"],
            "peerURL": (m.get("peer_urls") or [""])[0],
            "clientURL": (m.get("client_urls") or [""])[0],
            "ready": bool(m.get("healthy")) and not m.get("is_learner"),
            "learner": bool(m.get("is_learner")),
            "version": str((statuses.get(m["id"]) or {}).get("version") or ""),
        }
        for m in o.members
    ]
    ready = sum(1 for m in members if m["ready"])
    versions = sorted({m["version"] for m in members if m["version"]})
    available, a_reason, a_message = _available(o)
    sized = len(members) == o.spec["size"] and all(not m["learner"] for m in members)
    rolled = (
        o.known
        and not p["roll"]
        and not p["upgrade_waiting"]
        and not p["outdated"]
        and all(
            labels_of(pod).get(LABEL_VERSION) == p["versions"].get(n)
            for n, pod in o.pods.items()
            if n in o.live_claims
        )
    )
    alarms = [
        {
            "member": next(
                (m["name"] for m in o.members if m["id"] == a.get("member_id")), a.get("member_id")
            ),
            "alarm": a.get("alarm"),
        }
        for a in o.info.get("alarms") or []
    ]
    unhealthy = [m["name"] for m in members if not m["ready"] and not m["learner"]]

    if o.paused:
        phase = "Paused"
    elif a_reason == "Creating":
        phase = "Creating"
    elif not available:
        phase = "QuorumLost"
    elif not sized:
        phase = "Scaling"
    # A roll halted, or held by the allow-lists, is not under way: Degraded says why.
    elif not rolled and not p["halted"] and o.spec["allowed"]:
        phase = "Upgrading"
    elif (
        refusals
        or unhealthy
        or alarms
        or p["lost_data"]
        or p["fence"]
        or p["suspects"]
        or p["node_lost"]
    ):
        phase = "Degraded"
    else:
        phase = "Running"

    if refusals:
        d_reason, d_message = refusals[0]["reason"], refusals[0]["message"]
    elif not available and a_reason != "Creating":
        d_reason, d_message = "QuorumLost", a_message
    elif p["fence"] or (o.hands_off and _fence(o)):
        fenced = p["fence"] or _fence(o)
        d_reason, d_message = (
            "MemberFenced",
            f"{fenced[0]['name']} is fenced: {fenced[0]['reason']}",
        )
    elif p["suspects"]:
        suspect = p["suspects"][0]
        d_reason = "MemberSuspect"
        d_message = f"{suspect['name']}: {suspect['reason']}; not fenced: {suspect['unfenced']}"
    elif p["lost_data"]:
        d_reason = "MemberDataLost"
        d_message = (
            f"{', '.join(p['lost_data'])}: the data dir holds no member data; replaced while "
            "quorum holds, never restarted under its old identity"
        )
    elif p["node_lost"]:
        timeout = o.spec["node_loss_timeout"]
        d_reason = "NodeLost"
        d_message = "; ".join(
            f"{n}: {loss['why']}"
            + (
                f", {_node_loss_remedy(loss)} after {timeout} s (spec.nodeLossTimeout) unless "
                "it returns"
                if timeout
                else ", waited for (spec.nodeLossTimeout is 0)"
            )
            for n, loss in p["node_lost"].items()
        )
    elif alarms:
        d_reason = "Alarm"
        d_message = "; ".join(f"{a['alarm']} on {a['member']}" for a in alarms) + (
            ": writes are refused; compact, defragment, then disarm"
            if any(a["alarm"] == "NOSPACE" for a in alarms)
            else ""
        )
    elif unhealthy:
        d_reason, d_message = "MembersUnhealthy", "not ready: " + ", ".join(unhealthy)
    elif p["withheld"]:
        d_reason, d_message = "ChangesWithheld", p["withheld"]
    else:
        d_reason, d_message = "AllMembersHealthy", "every member is healthy"
    degraded = d_reason not in ("AllMembersHealthy",) and not (
        a_reason == "Creating" and not refusals
    )

    if o.paused:
        progressing = (False, "Paused", "spec.paused is true: the operator changes nothing")
    elif refusals:
        progressing = (False, refusals[0]["reason"], refusals[0]["message"])
    elif waiting := _waiting_for_restore(o):
        progressing = (True, "WaitingForRestore", waiting)
    elif p["upgrade_waiting"]:
        progressing = (True, "SnapshotBeforeUpgrade", p["upgrade_waiting"])
    elif not sized or not rolled or a_reason == "Creating":
        progressing = (
            True,
            "Creating" if a_reason == "Creating" else ("Scaling" if not sized else "Upgrading"),
            f"{len(members)} of {o.spec['size']} members, version "
            f"{'/'.join(versions) or '?'} (spec {o.spec['version']})" + _roll_note(o, p),
        )
    else:
        progressing = (False, "Reconciled", f"{len(members)} members on etcd {'/'.join(versions)}")

    events = [
        {"type": "Warning", "reason": w["reason"], "message": w["message"]} for w in p["warnings"]
    ]
    if not available and a_reason == "QuorumLost":
        events.append({"type": "Warning", "reason": "QuorumLost", "message": a_message})
    for r in refusals:
        events.append({"type": "Warning", "reason": r["reason"], "message": r["message"]})
    for suspect in p["suspects"]:
        events.append(
            {
                "type": "Warning",
                "reason": "MemberSuspect",
                "message": f"{suspect['name']}: {suspect['reason']}; not fenced: "
                f"{suspect['unfenced']}",
            }
        )
    # etcd may not yet count a member healthy whose Pod is already Ready (its readiness probe
    # asks the member alone): no event will mark the moment it does, so the run asks for
    # another look soon rather than leave status Degraded until the next full run.
    lagging = [
        m["name"]
        for m in o.members
        if not m.get("healthy")
        and m["name"] in o.pods
        and pod_ready(o.pods[m["name"]])
        and not _deleting(o.pods[m["name"]])
        and m["name"] not in p["node_lost"]
    ]
    status = {
        "phase": phase,
        "members": members,
        "readyMembers": ready,
        "size": len(members),
        "currentVersion": versions[0] if len(versions) == 1 else "",
        "leader": o.leader,
        "selector": f"app.kubernetes.io/name=etcd,{LABEL_CLUSTER}={o.name}",
        "alarms": alarms,
    }
    if p["cluster_id"]:
        status["clusterID"] = p["cluster_id"]
    if p["upgrade_snapshot"]:
        status["upgradeSnapshot"] = p["upgrade_snapshot"]
    return {
        "phase": phase,
        "failed": bool(refusals) or (not available and a_reason != "Creating"),
        "status": status,
        "conditions": {
            "Available": {
                "status": "True" if available else "False",
                "reason": a_reason,
                "message": a_message,
            },
            "Progressing": {
                "status": "True" if progressing[0] else "False",
                "reason": progressing[1],
                "message": progressing[2],
            },
            "Degraded": {
                "status": "True" if degraded else "False",
                "reason": d_reason,
                "message": d_message,
            },
        },
        "events": events,
        "requeue_after": _requeue_after(o, p, lagging),
        "quorum": o.quorum,
        "cluster_id": p["cluster_id"],
        "leader": o.leader,
        "members": members,
        "alarms": alarms,
    }
