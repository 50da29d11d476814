"""The EtcdCluster's spec as the plan reads it: its defaults, storage and backend quota, the
versions it may run and move between, the administrator's allow-lists, and what a member Pod
is made from (`pod_hash`)."""

from __future__ import annotations

import copy
import re
from typing import Any

from etcd_runbook.rules.cluster.common import (
    MAX_INDEX,
    PlanError,
    _meta,
    _refusal,
    format_bytes,
    parse_quantity,
    quorum_of,
    stable_hash,
    version_tuple,
)
from etcd_runbook.rules.cron import schedule_problem, zone_info
from etcd_runbook.rules.etcd_tls_secrets import secret_names

DEFAULT_VERSION = "3.6.16"
DEFAULT_REPOSITORY = "gcr.io/etcd-development/etcd"
DEFAULT_STORAGE = "1Gi"
# The Kubernetes cluster's DNS domain, which every member's peer and client URL and every
# certificate name ends in. A cluster configured otherwise needs the operator told
# (ETCD_RUNBOOK_CLUSTER_DOMAIN): members could not reach each other by these names.
DEFAULT_DOMAIN = "cluster.local"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_DOMAIN = re.compile(rf"(?=.{{1,253}}$){_DNS_LABEL}(\.{_DNS_LABEL})*")
# How long a member's node may be unreachable before the member is replaced on another node
# (spec.nodeLossTimeout): Kubernetes' own default for evicting Pods from such a node.
DEFAULT_NODE_LOSS_TIMEOUT = 300
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
# How long a member restarted by a roll must stay healthy (its Pod Ready, its container never
# restarted, etcd counting it healthy) before the roll takes the next member down
# (spec.minReadySeconds): the readiness probe needs 10 s to see a hung member, and a member
# etcd cannot run in was seen killed for memory 11 s after it first answered.
DEFAULT_MIN_READY_SECONDS = 30
MAX_MIN_READY_SECONDS = 3600
# spec.defragmentation's defaults: a member is defragmented when at least half its database
# file is free pages and that is at least 64Mi (a rewrite that frees less is not worth the
# write pause), each member given 10 minutes (bbolt rewrites about 100 MB/s on slow disks).
DEFAULT_DEFRAG_FREE_PERCENT = 50
DEFAULT_DEFRAG_MIN_RECLAIM = "64Mi"
DEFAULT_DEFRAG_MEMBER_TIMEOUT = 600
# Also the most a member is given: a defragmentation stops its reads, and the kubelet restarts
# a member that fails /livez for etcd_manifests.LIVENESS_FAILURES probes (15 minutes).
MAX_DEFRAG_MEMBER_TIMEOUT = 600
# spec.defragmentation.window, with a schedule: an hour from each time the line fires. At
# least a minute (a cron line fires at most once a minute) and at most a week: a window that
# long never closes for a weekly line, which is no schedule at all.
DEFAULT_DEFRAG_WINDOW = 3600
MIN_DEFRAG_WINDOW, MAX_DEFRAG_WINDOW = 60, 7 * 24 * 3600
# Bump when the Pod etcd_manifests builds changes in a way running members must roll to.
POD_TEMPLATE_REVISION = 4
# A member Pod's resources when spec.pod.resources is unset: a Pod without requests is
# BestEffort, the first the kubelet evicts under memory pressure, and the scheduler may stack
# members on a node with no CPU to spare. Small enough for a laptop's cluster; production
# clusters set their own (docs/api.md, "spec.pod.resources").
DEFAULT_MEMBER_RESOURCES: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "256Mi"}}
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
_VERSION = re.compile(r"^3\.(4|5|6)\.([0-9]+)$")
_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# The user and group of every Pod the runbooks make: etcd needs no identity of its own, and
# any non-root user owns the data dir through fsGroup.
RUN_AS = 65532
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# What spec.pod.securityContext may set on a member Pod; running as non-root under the
# RuntimeDefault seccomp profile is not the user's to change.
SECURITY_CONTEXT_KEYS = {
    "runAsUser": "run_as_user",
    "runAsGroup": "run_as_group",
    "fsGroup": "fs_group",
    "fsGroupChangePolicy": "fs_group_change_policy",
    "supplementalGroups": "supplemental_groups",
}
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


def cluster_domain(options: dict[str, Any]) -> str:
    """The DNS domain of the members' names (`options.domain`: the operator's
    ETCD_RUNBOOK_CLUSTER_DOMAIN, or a role's `*_domain` by hand)."""
    return str(options.get("domain") or DEFAULT_DOMAIN)


def domain_problem(options: dict[str, Any]) -> dict[str, str] | None:
    """A cluster domain no member name could end in, refused before any URL or certificate
    is made from it."""
    domain = cluster_domain(options)
    if _DOMAIN.fullmatch(domain):
        return None
    return _refusal(
        "InvalidSetting",
        "ETCD_RUNBOOK_CLUSTER_DOMAIN",
        f"the cluster domain {domain!r} (the operator's ETCD_RUNBOOK_CLUSTER_DOMAIN) is not a "
        "DNS name in lower case, such as cluster.local; nothing is changed until it is",
    )


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


def _timings(spec: dict[str, Any], problems: list[dict[str, str]]) -> tuple[int, int]:
    """(spec.nodeLossTimeout in seconds, spec.minReadySeconds), each its default when it
    cannot be used; problems name the field."""
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
    return node_loss, min_ready


def _defragmentation(spec: dict[str, Any], problems: list[dict[str, str]]) -> dict[str, Any]:
    """spec.defragmentation as the space rules read it; a field that cannot be used keeps its
    default and its problem names it, but for a schedule or time zone that cannot be read:
    kept as written, under which no window ever opens (a person asked for a window, and the
    policy never acts outside one)."""
    asked = spec.get("defragmentation") or {}
    enabled = asked.get("enabled", True)
    if not isinstance(enabled, bool):
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.defragmentation.enabled",
                f"spec.defragmentation.enabled must be true or false, got {enabled!r}",
            )
        )
        enabled = True
    percent = asked.get("freePercent", DEFAULT_DEFRAG_FREE_PERCENT)
    if not isinstance(percent, int) or isinstance(percent, bool) or not 1 <= percent <= 99:
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.defragmentation.freePercent",
                f"spec.defragmentation.freePercent must be 1 to 99, got {percent!r}",
            )
        )
        percent = DEFAULT_DEFRAG_FREE_PERCENT
    reclaim_text = asked.get("minReclaim", DEFAULT_DEFRAG_MIN_RECLAIM)
    try:
        min_reclaim = parse_quantity(reclaim_text)
    except PlanError:
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.defragmentation.minReclaim",
                "spec.defragmentation.minReclaim must be a quantity of bytes such as 64Mi, "
                f"got {reclaim_text!r}",
            )
        )
        min_reclaim = parse_quantity(DEFAULT_DEFRAG_MIN_RECLAIM)
    timeout = asked.get("memberTimeout")
    seconds = DEFAULT_DEFRAG_MEMBER_TIMEOUT if timeout is None else node_loss_seconds(timeout)
    if not seconds:
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.defragmentation.memberTimeout",
                "spec.defragmentation.memberTimeout must be a duration above zero such as 90s "
                f"or 10m, got {timeout!r}",
            )
        )
        seconds = DEFAULT_DEFRAG_MEMBER_TIMEOUT
    elif seconds > MAX_DEFRAG_MEMBER_TIMEOUT:
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.defragmentation.memberTimeout",
                f"spec.defragmentation.memberTimeout must be at most 10m, got {timeout!r}: a "
                "defragmentation stops the member's reads, and the kubelet restarts a member "
                "that does not answer /livez for 15 minutes",
            )
        )
        seconds = MAX_DEFRAG_MEMBER_TIMEOUT
    return {
        "enabled": enabled,
        "free_percent": percent,
        "min_reclaim": min_reclaim,
        "member_timeout": seconds,
        **_defrag_window(asked, problems),
    }


def _defrag_window(asked: dict[str, Any], problems: list[dict[str, str]]) -> dict[str, Any]:
    """spec.defragmentation's schedule (None when unset: no window, the policy acts whenever
    its thresholds say), window (seconds) and timeZone (unset or empty: UTC)."""
    until_fixed = "; the policy defragments no member until it is fixed"
    schedule = asked.get("schedule")
    line = None if schedule is None else str(schedule)
    field = "spec.defragmentation.schedule"
    if line is not None and (problem := schedule_problem(line, field)):
        problems.append(_refusal("InvalidSpec", field, problem + until_fixed))
    window = asked.get("window")
    seconds = DEFAULT_DEFRAG_WINDOW if window is None else node_loss_seconds(window)
    if seconds is None or not MIN_DEFRAG_WINDOW <= seconds <= MAX_DEFRAG_WINDOW:
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.defragmentation.window",
                "spec.defragmentation.window must be a duration from 1m to 168h such as 2h, "
                f"got {window!r}" + until_fixed,
            )
        )
        seconds = DEFAULT_DEFRAG_WINDOW
    zone = asked.get("timeZone")
    zone_text = "UTC" if zone is None or zone == "" else str(zone)
    if not isinstance(zone, str | None) or zone_info(zone_text) is None:
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.defragmentation.timeZone",
                "spec.defragmentation.timeZone must be an IANA time zone such as Europe/Berlin, "
                f"got {zone!r}" + until_fixed,
            )
        )
    return {"schedule": line, "window": seconds, "time_zone": zone_text}


LOG_LEVELS = ("debug", "info", "warn", "error")
# etcd's own bounds: an election timeout of at least five heartbeats (etcd refuses to start
# otherwise) and at most 50 s.
MIN_HEARTBEAT_MS, MAX_HEARTBEAT_MS = 10, 5000
MAX_ELECTION_MS = 50000
MAX_REQUEST_BYTES = 64 * MiB
# The feature gates etcd 3.6 takes (--feature-gates), and the flag each was before 3.6, by
# minor: a gate set in the spec is passed to each member as its version spells it.
FEATURE_GATES: dict[str, dict[str, str]] = {
    "InitialCorruptCheck": {
        "3.4": "--experimental-initial-corrupt-check",
        "3.5": "--experimental-initial-corrupt-check",
    },
    "CompactHashCheck": {"3.5": "--experimental-compact-hash-check-enabled"},
    "LeaseCheckpoint": {
        "3.4": "--experimental-enable-lease-checkpoint",
        "3.5": "--experimental-enable-lease-checkpoint",
    },
    "StopGRPCServiceOnDefrag": {"3.5": "--experimental-stop-grpc-service-on-defrag"},
    "TxnModeWriteWithSharedBuffer": {"3.5": "--experimental-txn-mode-write-with-shared-buffer"},
}


def _int_in(
    asked: dict[str, Any], key: str, low: int, high: int, problems: list[dict[str, str]]
) -> int | None:
    """spec.etcd.<key> as an integer within [low, high], None when unset or refused."""
    value = asked.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        problems.append(
            _refusal(
                "InvalidSpec",
                f"spec.etcd.{key}",
                f"spec.etcd.{key} must be a whole number from {low} to {high}, got {value!r}",
            )
        )
        return None
    return value


def _retention(asked: dict[str, Any], mode: str, problems: list[dict[str, str]]) -> str | None:
    """spec.etcd.autoCompactionRetention as etcd takes it for the mode: a duration (periodic)
    or a number of revisions (revision); None when unset (the operator's default)."""
    value = asked.get("autoCompactionRetention")
    if value is None and mode == "periodic":
        return None
    text = "" if value is None else str(value).strip()
    if mode == "revision":
        ok = text.isdigit() and int(text) > 0
        example = "a number of revisions to keep such as 10000"
    else:
        ok = bool(text) and _DURATION.match(text) is not None and (node_loss_seconds(text) or 0) > 0
        example = "a duration above zero such as 30m or 1h"
    if isinstance(value, bool) or not ok:
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.etcd.autoCompactionRetention",
                f"spec.etcd.autoCompactionRetention must be {example} with autoCompactionMode "
                f"{mode}, got {value!r}",
            )
        )
        return None
    return text


def _etcd_settings(
    spec: dict[str, Any], version: str, problems: list[dict[str, str]]
) -> dict[str, Any]:
    """spec.etcd as the members' flags read it; a field that cannot be used is left out (etcd's
    default) and its problem names it."""
    asked = spec.get("etcd") or {}
    mode = str(asked.get("autoCompactionMode") or "periodic")
    if mode not in ("periodic", "revision"):
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.etcd.autoCompactionMode",
                f"spec.etcd.autoCompactionMode must be periodic or revision, got {mode!r}",
            )
        )
        mode = "periodic"
    heartbeat = _int_in(asked, "heartbeatInterval", MIN_HEARTBEAT_MS, MAX_HEARTBEAT_MS, problems)
    election = _int_in(asked, "electionTimeout", 5 * MIN_HEARTBEAT_MS, MAX_ELECTION_MS, problems)
    if election is not None and election < 5 * (heartbeat or 100):
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.etcd.electionTimeout",
                f"spec.etcd.electionTimeout ({election} ms) must be at least five heartbeats "
                f"(spec.etcd.heartbeatInterval {heartbeat or 100} ms): etcd refuses to start",
            )
        )
        election = None
    max_request = asked.get("maxRequestBytes")
    max_request_bytes = None
    if max_request is not None:
        try:
            max_request_bytes = parse_quantity(max_request)
        except PlanError:
            max_request_bytes = -1
        if not 1024 <= max_request_bytes <= MAX_REQUEST_BYTES:
            problems.append(
                _refusal(
                    "InvalidSpec",
                    "spec.etcd.maxRequestBytes",
                    "spec.etcd.maxRequestBytes must be a quantity from 1Ki to "
                    f"{format_bytes(MAX_REQUEST_BYTES)} such as 2Mi, got {max_request!r}",
                )
            )
            max_request_bytes = None
    log_level = asked.get("logLevel")
    if log_level is not None and log_level not in LOG_LEVELS:
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.etcd.logLevel",
                f"spec.etcd.logLevel must be one of {', '.join(LOG_LEVELS)}, got {log_level!r}",
            )
        )
        log_level = None
    retention = _retention(asked, mode, problems)
    if mode == "revision" and retention is None:
        # What a member runs with until the spec is mended: the operator's periodic default.
        mode = "periodic"
    return {
        "auto_compaction_mode": mode,
        "auto_compaction_retention": retention,
        "heartbeat_ms": heartbeat,
        "election_ms": election,
        "snapshot_count": _int_in(asked, "snapshotCount", 100, 10_000_000, problems),
        "max_request_bytes": max_request_bytes,
        "max_txn_ops": _int_in(asked, "maxTxnOps", 1, 100_000, problems),
        "log_level": log_level,
        "feature_gates": _feature_gates(asked, version, problems),
    }


def _feature_gates(
    asked: dict[str, Any], version: str, problems: list[dict[str, str]]
) -> dict[str, bool]:
    """spec.etcd.featureGates the version asked for can take (each minor from 3.6 on takes them
    all; before, a gate needs the flag it was)."""
    gates = asked.get("featureGates") or {}
    if not isinstance(gates, dict):
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.etcd.featureGates",
                f"spec.etcd.featureGates must map gate names to true or false, got {gates!r}",
            )
        )
        return {}
    kept = {}
    minor = ".".join(version.split(".")[:2])
    for name, enabled in sorted(gates.items()):
        field = f"spec.etcd.featureGates.{name}"
        if name not in FEATURE_GATES:
            problems.append(
                _refusal(
                    "InvalidSpec",
                    field,
                    f"{field}: not a feature gate this operator knows (known: "
                    f"{', '.join(FEATURE_GATES)})",
                )
            )
        elif not isinstance(enabled, bool):
            problems.append(
                _refusal("InvalidSpec", field, f"{field} must be true or false, got {enabled!r}")
            )
        elif (
            not version_problem(version)
            and version_tuple(version) < (3, 6, 0)
            and (minor not in FEATURE_GATES[name])
        ):
            problems.append(
                _refusal(
                    "InvalidSpec",
                    field,
                    f"{field}: etcd {minor} has no such feature (it came with "
                    f"{min(FEATURE_GATES[name]) if FEATURE_GATES[name] else '3.6'})",
                )
            )
        else:
            kept[name] = enabled
    return kept


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
    node_loss, min_ready = _timings(spec, problems)
    defragmentation = _defragmentation(spec, problems)
    settings = _etcd_settings(spec, version, problems)
    digests = _image_digests(spec, version, problems)
    if bad_domain := domain_problem(options):
        problems.append(bad_domain)
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
            "resources": pod.get("resources") or copy.deepcopy(DEFAULT_MEMBER_RESOURCES),
            "affinity": pod.get("affinity") or {},
            "anti_affinity": pod.get("antiAffinity") or "preferred",
            "node_selector": pod.get("nodeSelector"),
            "tolerations": pod.get("tolerations"),
            "priority_class": pod.get("priorityClassName"),
            **_pod_extras(pod),
        },
        "image_digests": digests,
        "node_loss_timeout": node_loss,
        "min_ready_seconds": min_ready,
        "defragmentation": defragmentation,
        "etcd": settings,
        "paused": bool(spec.get("paused", False)),
        "problems": problems,
        "warnings": [warning] if warning else [],
    }


def member_image(spec: dict[str, Any], version: str) -> str:
    """The etcd image a member of `version` runs: `<repository>:v<version>`, pinned by that
    version's digest when spec.imageDigests names one. By version, not one digest for the
    cluster: in an upgrade a member not yet rolled (or made again) keeps its own version's."""
    image = f"{spec['repository']}:v{version}"
    digest = (spec.get("image_digests") or {}).get(version)
    return f"{image}@{digest}" if digest else image


def _image_digests(spec: dict[str, Any], version: str, problems: list[dict[str, str]]) -> dict:
    digests = spec.get("imageDigests") or {}
    if not isinstance(digests, dict):
        problems.append(
            _refusal("InvalidSpec", "spec.imageDigests", "spec.imageDigests must be a map")
        )
        return {}
    kept = {}
    for key, digest in digests.items():
        if not _VERSION.match(str(key)) or not _DIGEST.match(str(digest)):
            problems.append(
                _refusal(
                    "InvalidSpec",
                    "spec.imageDigests",
                    f"spec.imageDigests {key!r}: {digest!r} must map an etcd version such as "
                    "3.6.16 to a digest such as sha256:<64 hex digits>",
                )
            )
            continue
        kept[str(key)] = str(digest)
    if kept and version not in kept:
        problems.append(
            _refusal(
                "InvalidSpec",
                "spec.imageDigests",
                f"spec.imageDigests names no digest for spec.version {version}: add it, or "
                "members would run an image no digest pins",
            )
        )
    return kept


def image_pull_secrets(pod: dict[str, Any]) -> list[dict[str, str]]:
    """spec.pod.imagePullSecrets as a Pod takes them: the names, nothing else."""
    listed = pod.get("imagePullSecrets") or []
    return [{"name": str(s["name"])} for s in listed if isinstance(s, dict) and s.get("name")]


def _pod_extras(pod: dict[str, Any]) -> dict[str, Any]:
    """The member Pod settings added after the first releases, only when set: a key that is
    always there would change every running member's pod_hash and roll it for nothing."""
    extras: dict[str, Any] = {}
    if secrets := image_pull_secrets(pod):
        extras["image_pull_secrets"] = secrets
    if pod.get("topologySpreadConstraints"):
        extras["topology_spread"] = list(pod["topologySpreadConstraints"])
    context = {
        key: pod["securityContext"][field]
        for field, key in SECURITY_CONTEXT_KEYS.items()
        if (pod.get("securityContext") or {}).get(field) is not None
    }
    if context:
        extras["security_context"] = context
    return extras


def pod_security_context(pod: dict[str, Any], extra: dict[str, Any] | None = None) -> dict:
    """The Pod securityContext of a member, restore or recovery Pod of a cluster whose
    normalized spec.pod is `pod`: non-root under RuntimeDefault, as user and group 65532 unless
    spec.pod.securityContext says otherwise (a storage or platform that needs another fsGroup,
    OpenShift's assigned ranges)."""
    context: dict[str, Any] = {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "fsGroup": RUN_AS,
        **(extra or {}),
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    for field, key in SECURITY_CONTEXT_KEYS.items():
        if key in (pod.get("security_context") or {}):
            context[field] = pod["security_context"][key]
    return context


def pod_hash(spec: dict[str, Any], version: str) -> str:
    """What a running member rolls for when it changes: everything of its Pod but its name,
    voting label and first-start flags (etcd ignores those once it has data)."""
    return stable_hash(
        {
            "revision": POD_TEMPLATE_REVISION,
            "image": member_image(spec, version),
            "pod": spec["pod"],
            "quota": spec["quota_bytes"],
            "etcd": spec["etcd"],
            "tls": spec["tls"],
            "secrets": [spec["secrets"]["peer"], spec["secrets"]["server"]],
        }
    )
