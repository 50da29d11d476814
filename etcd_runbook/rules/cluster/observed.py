"""The observation a plan is made from (`_Observed`), indexed the way every step reads it, and
the facts read off it: etcd's member list, whether a quorum agrees on it, the recorded cluster
ID, a member whose data is gone."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from etcd_runbook.names import (
    ANN_CLUSTER_ID,
    ANN_FENCED,
    ANN_MEMBER_ID,
    ANN_RECOVERY,
    ANN_REMOVING,
    ANN_RESTORE,
    ANN_RESTORE_PENDING,
)
from etcd_runbook.rules.cluster.common import (
    CLIENT_PORT,
    MAX_INDEX,
    PEER_PORT,
    PlanError,
    _deleting,
    _member_of,
    _meta,
    annotations_of,
    member_url,
    parse_quantity,
    quorum_of,
    url_key,
)
from etcd_runbook.rules.cluster.spec import MIN_QUOTA, cluster_domain, normalize_spec, quota_limit
from etcd_runbook.rules.cluster.tls import tls_plan

# What earlier steps of a plan decided, by the plan's own keys (and a few of their own: `gate`,
# `rolled`, `standing`, ...): each step reads it, never changes it, and returns its part.
Decided = dict[str, Any]

# What etcd 3.4 to 3.6 say when a member's data is gone: asked to rejoin an existing cluster
# with an empty data dir and no other peer to ask (the flags a joined member restarts with: the
# guard tripped), and raft's panic when the leader sends a member entries beyond the log it has
# left (a member that came back without its data some other way, a claim of an earlier version).
DATA_LOST_SIGNS = (
    "cannot fetch cluster info from peer urls",
    "was the raft log corrupted, truncated, or lost",
)
# What etcd says when a member's data is there but broken: its write-ahead log fails its CRC
# (wal: and walpb:), the member list its data holds is not the cluster's, its database file is
# not one. Such a member crash-loops for ever; like one whose data is gone, it is replaced
# while quorum holds, never restarted under its old identity.
DATA_BROKEN_SIGNS = (
    "crc mismatch",
    "member count is unequal",
    "invalid database",
)


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


def data_fault(pod: dict[str, Any]) -> str:
    """etcd's own words for why a member's data cannot be used, as its last log lines say
    them (the line naming the fault, cut to 300 characters); '' when they say no such thing."""
    for line in reversed(termination_message(pod).splitlines()):
        lowered = line.lower()
        if any(sign in lowered for sign in (*DATA_LOST_SIGNS, *DATA_BROKEN_SIGNS)):
            return _log_words(line.strip())[:300]
    return ""


def _log_words(line: str) -> str:
    """A JSON log line (etcd 3.5 and later) as its message and error; other lines as they are."""
    try:
        entry = json.loads(line)
    except ValueError:
        return line
    if not isinstance(entry, dict) or not entry.get("msg"):
        return line
    return ": ".join(str(entry[k]) for k in ("msg", "error") if entry.get(k))


def data_lost(pod: dict[str, Any], claim: dict[str, Any] | None) -> bool:
    """A joined member's etcd refuses to start on its data: the guard tripped on an empty data
    dir, or the data is broken (DATA_BROKEN_SIGNS)."""
    if claim is None or not annotations_of(claim).get(ANN_MEMBER_ID):
        return False
    return bool(data_fault(pod))


def pod_ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


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


# A claim a quorum recovery fenced: "recovery <fingerprint>", then " source" on the
# survivor's claim, or " backup=<EtcdBackup>" on every claim of a recovery from a backup.
_RECOVERY_FENCE = re.compile(
    r"^recovery ([0-9a-f]{16})(?: (source)| backup=([a-z0-9][-a-z0-9.]*))?$"
)
_RECOVERY_BACKUP = "backup="


def recovery_record(claim: dict[str, Any]) -> tuple[str, str, str] | None:
    """(fingerprint, cluster ID recovered from, EtcdBackup recovered from or '') of a quorum
    recovery's first member's claim (ANN_RECOVERY), None for any other claim."""
    words = str(annotations_of(claim).get(ANN_RECOVERY) or "").split()
    if not words:
        return None
    old_id = words[1] if len(words) > 1 else ""
    backup = words[2] if len(words) > 2 else ""
    return words[0], old_id, backup.removeprefix(_RECOVERY_BACKUP)


def recovery_fence(claim: dict[str, Any]) -> tuple[str, bool, str] | None:
    """(fingerprint, whether it is the survivor's, the EtcdBackup recovered from or '') of a
    claim a quorum recovery fenced."""
    match = _RECOVERY_FENCE.match(str(annotations_of(claim).get(ANN_FENCED) or ""))
    return (match.group(1), bool(match.group(2)), match.group(3) or "") if match else None


def _voting_claims(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The claims whose record of the cluster ID counts: neither fenced nor being deleted."""
    return [c for c in claims if not _deleting(c) and ANN_FENCED not in annotations_of(c)]


def recorded_cluster_id(obj: dict[str, Any], claims: list[dict[str, Any]]) -> str:
    """The cluster ID this EtcdCluster was created with: its status, else its claims'. A
    quorum recovery's first member's claim, while it is live, supersedes both: the cluster is
    the one restored onto that claim, whose ID is what the claim records ('' until its first
    member has answered), never the ID it was recovered from."""
    live = _voting_claims(claims)
    seeds = [c for c in live if recovery_record(c)]
    if seeds:
        return str(annotations_of(seeds[0]).get(ANN_CLUSTER_ID) or "")
    status_id = str((obj.get("status") or {}).get("clusterID") or "")
    if status_id:
        return status_id
    ids = Counter(
        annotations_of(c)[ANN_CLUSTER_ID] for c in live if annotations_of(c).get(ANN_CLUSTER_ID)
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
        # The EtcdBackups that save this cluster (spec.clusterName), not being deleted.
        self.own_backups = [
            b
            for b in self.backups
            if (b.get("spec") or {}).get("clusterName") == self.name and not _deleting(b)
        ]
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
        # A quorum recovery's first member's claim (name, fingerprint, the ID recovered
        # from), and the claims each recovery fenced: read back from the claims, so a run
        # cut short anywhere is taken up from what was written.
        self.recovery_seed = next(
            (
                (n, *record)
                for n, c in sorted(self.claims.items())
                if not _deleting(c)
                and ANN_FENCED not in annotations_of(c)
                and (record := recovery_record(c))
            ),
            None,
        )
        self.recovered = {r[0] for c in claims_list if (r := recovery_record(c))}
        self.recovery_fenced: dict[str, dict[str, bool]] = {}
        # The EtcdBackup a recovery restores, as its fences (and its first member's claim) say.
        self.recovery_backups: dict[str, str] = {
            r[0]: r[2] for c in claims_list if (r := recovery_record(c)) and r[2]
        }
        for n, c in self.claims.items():
            if fence := recovery_fence(c):
                self.recovery_fenced.setdefault(fence[0], {})[n] = fence[1]
                if fence[2]:
                    self.recovery_backups[fence[0]] = fence[2]
        self.recovery_jobs = list(facts.get("recovery_jobs") or [])
        self.recovery_pods = list(facts.get("recovery_pods") or [])
        capacity = _claim_capacity(list(self.live_claims.values()))
        if capacity is not None and "quotaBackendBytes" not in (
            (self.obj.get("spec") or {}).get("storage") or {}
        ):
            self.spec["quota_bytes"] = max(
                MIN_QUOTA, min(self.spec["quota_bytes"], quota_limit(capacity))
            )
        domain = cluster_domain(self.options)
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
