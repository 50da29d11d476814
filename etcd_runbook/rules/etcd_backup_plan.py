"""Decisions of the backup runbook: pure functions from listed snapshots to what to prune,
how a new snapshot is named, and what status shows.

Nothing here talks to etcd, Kubernetes or an object store; every rule has table-driven unit
tests (tests/unit/test_etcd_backup_plan.py). The rules that keep data safe:

* a backup owns its snapshots: each manifest names the EtcdBackup (namespace, name, uid) and
  the etcd cluster ID it came from, and retention prunes only the verified snapshots whose
  manifest names this EtcdBackup's uid and the cluster ID the cluster has now. Anything else
  under the prefix (another backup's, a re-created cluster's old data, a file without a
  manifest, a half-written upload) is reported, never deleted;
* each EtcdBackup writes under a prefix of its own, `<prefix>/<namespace>/<cluster>/<backup>/`,
  listed without what lies deeper: two EtcdBackups of one cluster to one bucket or claim never
  list each other's snapshots;
* pruning happens only after a successful snapshot: the caller passes the location of the
  snapshot it has just saved and verified, and without one nothing is pruned;
* the newest verified snapshot of the backup is never pruned, whatever `keep` and `maxAge`
  say (a cluster whose backups stopped long ago keeps its last good one).

A snapshot, as a listing returns it, is a dict with `location` (or `key`), `time` (RFC 3339),
`sha256` and `verified`, and optionally `revision`, `size`, `clusterID` and `backup`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from etcd_runbook.rules.etcd_s3_store import StoreSpecError, store
from etcd_runbook.rules.etcd_snapshot_catalog import ownership

KEEP_FIELD = "spec.retention.keep"
MAX_AGE_FIELD = "spec.retention.maxAge"
STATUS_LIMIT = 20  # retained snapshots listed in status, newest first

_DURATION_PART = re.compile(r"([0-9]+)([smhdw])")
_DURATION = re.compile(r"^(?:[0-9]+[smhdw])+$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# <prefix>/<namespace>/<cluster>/<backup>/<YYYYMMDDTHHMMSSZ>-rev<revision>.db: the timestamp
# first, in a fixed width, so the keys of one backup sort by time as plain strings.
_KEY_TIME = "%Y%m%dT%H%M%SZ"
_SNAPSHOT_FILE = re.compile(r"^(?P<stamp>[0-9]{8}T[0-9]{6}Z)-rev(?P<revision>[0-9]+)\.db$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
# Where a run by hand without an EtcdBackup saves, in place of a backup's name: no Kubernetes
# name starts with `_`, so no EtcdBackup's snapshots are ever listed with them.
BY_HAND = "_by-hand"
# Of the objects under a backup's prefix that are not its own, this many are named in status.
FOREIGN_EXAMPLES = 5


class BackupPlanError(ValueError):
    """A value the backup plan cannot read; the message names the field."""


# --- values --------------------------------------------------------------------------------


def parse_duration(value: Any, field: str = MAX_AGE_FIELD) -> timedelta:
    """A duration such as `72h`, `30m`, `7d`, `1w` or `1h30m` (s, m, h, d = 24h, w = 7d)."""
    text = value.strip() if isinstance(value, str) else None
    if not text or not _DURATION.match(text):
        raise BackupPlanError(
            f"{field} must be a duration such as 72h, 30m, 7d or 1h30m (units s, m, h, d, w), "
            f"not {value!r}"
        )
    seconds = sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))
    if seconds <= 0:
        raise BackupPlanError(f"{field} must be longer than zero, not {value!r}")
    return timedelta(seconds=seconds)


def parse_time(value: Any, field: str = "time") -> datetime:
    """An RFC 3339 time (`2026-05-01T03:00:00Z`, any offset) as an aware UTC datetime."""
    if isinstance(value, datetime):
        parsed = value
    else:
        try:
            parsed = datetime.fromisoformat(str(value).strip())
        except ValueError:
            raise BackupPlanError(f"{field} is not an RFC 3339 time: {value!r}") from None
    if parsed.tzinfo is None:
        raise BackupPlanError(
            f"{field} has no time zone (RFC 3339 needs Z or an offset): {value!r}"
        )
    return parsed.astimezone(UTC)


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with a Z, to the second (as Kubernetes writes times)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def retention(spec: Any) -> dict[str, Any]:
    """`spec.retention` checked: {"keep": int | None, "max_age": str | None,
    "max_age_seconds": int | None}.

    Neither set keeps every verified snapshot (only unverified leftovers are pruned)."""
    spec = spec or {}
    if not isinstance(spec, dict):
        raise BackupPlanError(f"spec.retention must be a mapping, not {spec!r}")
    keep = spec.get("keep")
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
        raise BackupPlanError(
            f"{KEEP_FIELD} must be a whole number of at least 1 (the newest verified snapshot "
            f"is always kept), not {keep!r}"
        )
    max_age = spec.get("maxAge", spec.get("max_age"))
    age = None if max_age in (None, "") else int(parse_duration(max_age).total_seconds())
    return {"keep": keep, "max_age": max_age or None, "max_age_seconds": age}


# --- object names --------------------------------------------------------------------------


def _clean(prefix: Any) -> str:
    return "/".join(part for part in str(prefix or "").split("/") if part)


def _check_names(namespace: Any, cluster: Any, backup: Any) -> None:
    for field, value in (("namespace", namespace), ("cluster", cluster)):
        if not isinstance(value, str) or not _NAME.match(value):
            raise BackupPlanError(f"{field} {value!r} is not a Kubernetes name")
    if backup != BY_HAND and (not isinstance(backup, str) or not _NAME.match(backup)):
        raise BackupPlanError(f"backup {backup!r} is not the name of an EtcdBackup")


def backup_prefix(prefix: Any, namespace: str, cluster: str, backup: str) -> str:
    """The key prefix of one EtcdBackup's snapshots (ends with `/`):
    `<prefix>/<namespace>/<cluster>/<backup>/`. Listed without a recursion, it holds this
    backup's snapshots and nothing another EtcdBackup writes: the namespace and the name
    tell EtcdBackups apart, and a deeper prefix is never listed."""
    _check_names(namespace, cluster, backup)
    clean = _clean(prefix)
    head = f"{clean}/" if clean else ""
    return f"{head}{namespace}/{cluster}/{backup}/"


def snapshot_key(
    prefix: Any, namespace: str, cluster: str, backup: str, time: Any, revision: Any
) -> str:
    """The object key of a new snapshot: `backup_prefix` then
    `<YYYYMMDDTHHMMSSZ>-rev<revision>.db`. Keys of one backup sort by time as strings."""
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise BackupPlanError(f"revision must be a whole number of 0 or more, not {revision!r}")
    stamp = parse_time(time).strftime(_KEY_TIME)
    return f"{backup_prefix(prefix, namespace, cluster, backup)}{stamp}-rev{revision}.db"


def parse_snapshot_key(key: Any) -> dict[str, Any] | None:
    """The time and revision `snapshot_key` put into a key's file name, and the directory
    before it; None for a name it did not make (a manifest, anything else stored there).
    The directory alone cannot tell a key of the layout before backups owned their
    snapshots (`<prefix>/<namespace>/<cluster>/<file>`) from one of today's: the manifest
    says whose a snapshot is."""
    directory, _, name = str(key).rpartition("/")
    match = _SNAPSHOT_FILE.match(name)
    if not match:
        return None
    stamp = datetime.strptime(match["stamp"], _KEY_TIME).replace(tzinfo=UTC)
    return {
        "key": str(key),
        "directory": directory,
        "time": format_time(stamp),
        "revision": int(match["revision"]),
    }


# --- retention -----------------------------------------------------------------------------


def _location(entry: Any, index: int) -> str:
    if not isinstance(entry, dict):
        raise BackupPlanError(f"snapshots[{index}] must be a mapping, not {entry!r}")
    location = entry.get("location") or entry.get("key")
    if not location:
        raise BackupPlanError(f"snapshots[{index}] has no location (or key)")
    return str(location)


def _ordered(snapshots: Any) -> list[tuple[datetime, int, str, dict[str, Any]]]:
    """(time, revision, location, entry), newest first; a tie in time goes to the higher
    revision, then to the location."""
    if not isinstance(snapshots, list):
        raise BackupPlanError(f"snapshots must be a list, not {snapshots!r}")
    rows = []
    seen: set[str] = set()
    for index, entry in enumerate(snapshots):
        location = _location(entry, index)
        if location in seen:
            raise BackupPlanError(f"snapshots[{index}]: {location} is listed twice")
        seen.add(location)
        when = parse_time(entry.get("time"), f"snapshots[{index}].time ({location})")
        revision = entry.get("revision")
        rows.append((when, revision if isinstance(revision, int) else -1, location, entry))
    rows.sort(key=lambda row: (row[0], row[1], row[2]), reverse=True)
    return rows


def _verified(entry: dict[str, Any]) -> bool:
    return entry.get("verified") is True and bool(entry.get("sha256"))


def _owner(owner: Any) -> dict[str, str]:
    """The owner a prune is for, checked: a prune without a name and a cluster ID would have
    nothing to tell its own snapshots by."""
    owner = owner if isinstance(owner, dict) else {}
    name, cluster_id = owner.get("name"), owner.get("cluster_id")
    if not isinstance(name, str) or not name or not isinstance(cluster_id, str) or not cluster_id:
        raise BackupPlanError(
            "owner must name the EtcdBackup (name, uid) and the cluster ID the cluster has now: "
            f"nothing is pruned without them, not {owner!r}"
        )
    return {"name": name, "uid": str(owner.get("uid") or ""), "cluster_id": cluster_id}


def prune_plan(
    snapshots: Any, retention_spec: Any, now: Any, newest: Any = None, owner: Any = None
) -> dict[str, Any]:
    """Which snapshots to delete after a backup, and why.

    Only the backup's own snapshots are candidates (`ownership` with `owner`, {name, uid,
    cluster_id}); every other entry is `foreign`, each with why, and is never pruned.
    `newest` is the location of the snapshot this run has just saved and verified; without
    it (the backup failed, or was not taken) nothing is pruned. An own snapshot is retained
    while it is among the `keep` newest own ones and younger than `maxAge` (each rule given);
    the newest own one and the one just saved are retained always.

    Returns {"prune": [entry + "reason"], "retained": [own entries], "foreign": [entry +
    "why"], "newest_verified": own entry or None, "msg": str}; lists newest first."""
    rules = retention(retention_spec)
    moment = parse_time(now, "now")
    rows = _ordered(snapshots)
    mine = _owner(owner)
    own = [row for row in rows if not ownership(row[3], mine)]
    mine_at = {row[2] for row in own}
    foreign = [{**row[3], "why": ownership(row[3], mine)} for row in rows if row[2] not in mine_at]
    newest_own = own[0] if own else None
    result: dict[str, Any] = {
        "prune": [],
        "retained": [row[3] for row in own],
        "foreign": foreign,
        "newest_verified": newest_own[3] if newest_own else None,
    }
    if not newest:
        return {**result, "msg": "no snapshot was saved by this run: nothing is pruned"}
    if not any(row[2] == str(newest) for row in own):
        return {
            **result,
            "msg": f"the snapshot just saved ({newest}) is not listed as this backup's verified "
            "snapshot: nothing is pruned until a listing shows it",
        }
    assert newest_own is not None  # newest is own, so there is one
    cutoff = (
        moment - timedelta(seconds=rules["max_age_seconds"])
        if rules["max_age_seconds"] is not None
        else None
    )
    prune: list[dict[str, Any]] = []
    retained: list[dict[str, Any]] = []
    for rank, (when, _revision, location, entry) in enumerate(own, 1):
        reason = None
        if location in (newest_own[2], str(newest)):
            reason = None
        elif rules["keep"] is not None and rank > rules["keep"]:
            reason = f"beyond the newest {rules['keep']} ({KEEP_FIELD})"
        elif cutoff is not None and when < cutoff:
            reason = f"older than {rules['max_age']} ({MAX_AGE_FIELD})"
        if reason is None:
            retained.append(entry)
        else:
            prune.append({**entry, "reason": reason})
    message = (
        f"prune {len(prune)} of {len(own)} snapshots, keep {len(retained)}"
        if prune
        else f"nothing to prune: {len(own)} snapshots within retention"
    )
    if foreign:
        message += f"; {len(foreign)} other objects left alone"
    return {**result, "prune": prune, "retained": retained, "msg": message}


def foreign_objects(
    foreign: Any, orphans: Any, location: str, limit: int = FOREIGN_EXAMPLES
) -> dict[str, Any] | None:
    """What status says of the objects under a backup's prefix that are not its own
    (`prune_plan`'s `foreign`, and manifests whose snapshot is gone): their count, where, and
    the first `limit` keys with why each is not the backup's. None when there are none (the
    status field is then removed)."""
    entries = [e for e in foreign or [] if isinstance(e, dict)]
    examples = [
        {"key": str(e.get("key") or e.get("location")), "why": str(e.get("why") or "")}
        for e in entries
    ]
    examples += [{"key": str(k), "why": "a manifest whose snapshot is gone"} for k in orphans or []]
    if not examples:
        return None
    return {"count": len(examples), "location": location, "examples": examples[:limit]}


def newest_verified(snapshots: Any) -> dict[str, Any]:
    """The newest verified snapshot (what a restore from a backup's name uses); raises when
    there is none."""
    for _when, _revision, _location, entry in _ordered(snapshots):
        if _verified(entry):
            return dict(entry)
    raise BackupPlanError(
        f"no verified snapshot among the {len(snapshots)} listed (a snapshot is verified once "
        "its manifest, with its sha256, is written beside it)"
    )


def retained_status(snapshots: Any, limit: int = STATUS_LIMIT) -> list[dict[str, Any]]:
    """The verified snapshots for status (`status.retainedSnapshots`): newest first, at most
    `limit`, each {location, time, revision, size, sha256} with what is known."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise BackupPlanError(f"limit must be a whole number of at least 1, not {limit!r}")
    out = []
    for when, _revision, location, entry in _ordered(snapshots):
        if not _verified(entry):
            continue
        item: dict[str, Any] = {
            "location": location,
            "time": format_time(when),
            "sha256": entry["sha256"],
        }
        for key in ("revision", "size"):
            if isinstance(entry.get(key), int) and not isinstance(entry.get(key), bool):
                item[key] = entry[key]
        out.append(item)
        if len(out) == limit:
            break
    return out


def snapshot_source(info: Any) -> dict[str, Any]:
    """The member to stream a snapshot from, out of what etcd_cluster_info returns: a healthy
    voting follower (the leader carries the cluster's writes; a snapshot of its whole database
    costs it disk and network), the one with the highest applied raft index among them (from
    `status`), by name on a tie; the leader when it is the only
    healthy voter. Learners never (they may lag). No healthy voter: a BackupPlanError that says
    so, and nothing is saved."""
    info = info if isinstance(info, dict) else {}
    members = [m for m in info.get("members") or [] if isinstance(m, dict)]
    leader_id = str((info.get("leader") or {}).get("id") or "")
    voters = [m for m in members if m.get("healthy") and not m.get("is_learner") and m.get("name")]
    if not voters:
        raise BackupPlanError(
            "no healthy voting member to take a snapshot from: the cluster must be healthy "
            "enough to answer before it can be backed up"
        )
    followers = [m for m in voters if str(m.get("id")) != leader_id]
    pool = followers or voters
    # cluster_info puts each endpoint's raft index in `status`, keyed by the member's ID.
    applied = {
        str(s.get("member_id")): s.get("raft_applied_index") or s.get("raft_index")
        for s in info.get("status") or []
        if isinstance(s, dict) and s.get("healthy")
    }

    def progress(member: dict[str, Any]) -> tuple[int, str]:
        index = applied.get(str(member.get("id")))
        return (-(index if isinstance(index, int) else 0), str(member["name"]))

    chosen = min(pool, key=progress)
    return {
        "name": str(chosen["name"]),
        "id": str(chosen.get("id") or ""),
        "leader": str(chosen.get("id")) == leader_id,
    }


# --- where a run saves -------------------------------------------------------------------

S3_FIELD = "spec.destination.s3"
VOLUME_FIELD = "spec.destination.volume"


def _volume_path(path: Any) -> str:
    parts = [p for p in str(path or "").split("/") if p]
    if any(p in (".", "..") or p.startswith(".") for p in parts):
        raise BackupPlanError(
            f"{VOLUME_FIELD}.path must be a path inside the volume without . or .. or hidden "
            f"parts, not {path!r}"
        )
    return "/".join(parts)


def backup_owner(backup: Any, namespace: str) -> dict[str, str]:
    """Who a run saves for, as its manifests record it: the EtcdBackup's namespace, name and
    uid (from its metadata); without one (a run by hand with a spec only), BY_HAND and no
    uid, so such runs share a prefix and a retention of their own."""
    meta = backup if isinstance(backup, dict) else {}
    name = meta.get("name")
    if not name:
        return {"namespace": namespace, "name": BY_HAND, "uid": ""}
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > 253:
        raise BackupPlanError(f"metadata.name {name!r} is not the name of an EtcdBackup")
    uid = meta.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BackupPlanError(
            f"EtcdBackup {name} has no uid: pass its metadata as read from the API server"
        )
    return {"namespace": namespace, "name": name, "uid": uid}


def backup_target(
    spec: Any,
    namespace: str,
    ca_dir: str = "",
    volume_dir: str = "",
    local_dir: str = "",
    backup: Any = None,
) -> dict[str, Any]:
    """What a backup run needs from an EtcdBackup's spec (or the same shape given by hand):
    the cluster, the destination as the snapshot modules take it, the key prefix of this
    backup's snapshots, the retention rules, the Secrets it names, and `owner` (who the
    manifests name, `backup_owner` of `backup`, the EtcdBackup's metadata). `ca_dir` is where
    the CA Secret of an https store is mounted (the backup Job's), empty when it is not.

    `volume_dir` is where the backup Job mounts the claim of a `volume` destination; without
    it, the target's `directory` is empty and the run refuses (the claim is mounted only in
    the Job). `local_dir`, by hand, is a local directory that replaces whatever destination
    the spec names (kind `local`). Either way `directory` is where the files go.

    Every kind has `root`, what a key is appended to for the location status shows:
    s3://<bucket>/, pvc://<claim>/ or the local directory.

    Raises BackupPlanError naming the field when the spec cannot be used; the API server's
    schema already refuses most of these, but a run by hand has no schema."""
    spec = spec if isinstance(spec, dict) else {}
    cluster = spec.get("clusterName")
    if not isinstance(cluster, str) or not _NAME.match(cluster) or len(cluster) > 50:
        raise BackupPlanError(
            f"spec.clusterName must be the name of an EtcdCluster, not {cluster!r}"
        )
    if not isinstance(namespace, str) or not _NAME.match(namespace):
        raise BackupPlanError(f"namespace {namespace!r} is not a Kubernetes name")
    destination = spec.get("destination") if isinstance(spec.get("destination"), dict) else {}
    given = [k for k in ("s3", "volume") if destination.get(k)]
    retention(spec.get("retention"))  # refused here, before anything is saved
    owner = backup_owner(backup, namespace)
    base = {"cluster": cluster, "retention": dict(spec.get("retention") or {}), "owner": owner}

    def under(prefix: str) -> str:
        return backup_prefix(prefix, namespace, cluster, owner["name"])

    if local_dir:
        return _local_target(base, local_dir, under)
    if len(given) != 1:
        raise BackupPlanError("spec.destination must set exactly one of volume or s3")
    if given == ["volume"]:
        return _volume_target(base, destination["volume"], volume_dir, under)
    return _s3_target(base, destination["s3"], ca_dir, under)


def _local_target(
    base: dict[str, Any], local_dir: str, under: Callable[[str], str]
) -> dict[str, Any]:
    """A run by hand into a local directory: absolute, so where the files went is clear
    whatever directory the run started in."""
    if not local_dir.startswith("/"):
        raise BackupPlanError(f"directory must be an absolute path, not {local_dir!r}")
    root = local_dir.rstrip("/") + "/"
    return {
        **base,
        "kind": "local",
        "directory": local_dir,
        "prefix": under(""),
        "root": root,
        "location": root + under(""),
    }


def _volume_target(
    base: dict[str, Any],
    volume: dict[str, Any],
    volume_dir: str,
    under: Callable[[str], str],
) -> dict[str, Any]:
    """A claim: its name, and the backup's prefix under the path given inside it (checked,
    so no file is written outside the claim)."""
    claim = volume.get("claimName")
    if not isinstance(claim, str) or not _NAME.match(claim):
        raise BackupPlanError(f"{VOLUME_FIELD}.claimName must name a PersistentVolumeClaim")
    prefix = under(_volume_path(volume.get("path")))
    return {
        **base,
        "kind": "volume",
        "claim": claim,
        "directory": volume_dir,
        "prefix": prefix,
        "root": f"pvc://{claim}/",
        "location": f"pvc://{claim}/{prefix}",
    }


def _s3_target(
    base: dict[str, Any], s3: dict[str, Any], ca_dir: str, under: Callable[[str], str]
) -> dict[str, Any]:
    """A store as the snapshot modules take it (etcd_s3_store.store), and beside it the
    Secrets it names (credentials, CA), which the backup Job reads them from."""
    try:
        parsed = store(s3, S3_FIELD)
    except StoreSpecError as error:
        raise BackupPlanError(str(error)) from None
    secret, ca_secret = parsed.pop("credentials_secret"), parsed.pop("ca_secret")
    if ca_secret and ca_dir:
        parsed["ca_file"] = f"{ca_dir.rstrip('/')}/ca.crt"
    prefix = under(s3.get("prefix") or "")
    return {
        **base,
        "kind": "s3",
        "s3": parsed,
        "prefix": prefix,
        "root": f"s3://{parsed['bucket']}/",
        "location": f"s3://{parsed['bucket']}/{prefix}",
        "credentials_secret": secret,
        "ca_secret": ca_secret,
    }


def _duration(value: Any) -> str:
    return f"{value:.2f}s" if isinstance(value, int | float) and not isinstance(value, bool) else ""


def backup_record(
    saved: Any, listing: Any, target: Any, now: Any = "", request: Any = ""
) -> dict[str, Any]:
    """What a backup run writes into its EtcdBackup's status, from the snapshot it saved (its
    manifest: the verified facts) and the listing of its prefix after pruning (the store
    module's result: `snapshots` and `orphans`), each located under the target's root
    (s3://<bucket>/<key>, pvc://<claim>/<key>):

    `lastSnapshot`; `retainedSnapshots` (the backup's own verified snapshots, newest first);
    `foreignObjects` (what else is under its prefix, never pruned; None when nothing, which
    removes the field); `lastCheck` (the listing found lastSnapshot, with its manifest, at
    `now`; `request` is the check annotation's value this answers)."""
    saved = saved if isinstance(saved, dict) else {}
    target = target if isinstance(target, dict) else {}
    listing = listing if isinstance(listing, dict) else {}
    manifest = saved.get("manifest") if isinstance(saved.get("manifest"), dict) else {}
    key = saved.get("key")
    if not key or not manifest.get("sha256"):
        raise BackupPlanError("the snapshot has no key or no manifest: it was not verified")
    root = str(target.get("root") or "")

    def located(k: str) -> str:
        return root + k

    last: dict[str, Any] = {"location": located(str(key))}
    for name in ("time", "revision", "size", "sha256", "etcdVersion", "clusterID"):
        if manifest.get(name) not in (None, ""):
            last[name] = manifest[name]
    member = manifest.get("member")
    # The manifest records the member as etcd_member returns members; status names it.
    member_name = member.get("name") if isinstance(member, dict) else member
    if isinstance(member_name, str) and member_name:
        last["member"] = member_name
    if _duration(manifest.get("duration")):
        last["duration"] = _duration(manifest["duration"])
    owner = {**(target.get("owner") or {}), "cluster_id": str(manifest.get("clusterID") or "")}
    entries = [e for e in listing.get("snapshots") or [] if isinstance(e, dict)]
    own = [
        {**e, "location": located(str(e.get("key") or e.get("location")))}
        for e in entries
        if not ownership(e, owner)
    ]
    foreign = [{**e, "why": ownership(e, owner)} for e in entries if ownership(e, owner)]
    found = any(e["location"] == last["location"] for e in own)
    return {
        "lastSnapshot": last,
        "retainedSnapshots": retained_status(own),
        "foreignObjects": foreign_objects(
            foreign, listing.get("orphans"), str(target.get("location") or "")
        ),
        "lastCheck": {
            "time": format_time(parse_time(now, "now")),
            "location": last["location"],
            "result": "Found" if found else "Missing",
            "message": "listed with its manifest after the snapshot was saved"
            if found
            else "not listed as this backup's verified snapshot right after it was saved",
            "request": str(request or ""),
        },
    }


# --- is status.lastSnapshot still there ----------------------------------------------------


def check_key(last: Any, target: Any) -> str:
    """The key of `status.lastSnapshot` in the target's destination, for the check that it
    is still there; empty when there is none to check, or it is not in this destination (its
    location is not under the target's root: the destination changed since)."""
    location = str((last or {}).get("location") or "") if isinstance(last, dict) else ""
    root = str((target or {}).get("root") or "") if isinstance(target, dict) else ""
    if not location or not root or not location.startswith(root):
        return ""
    return location.removeprefix(root)


def check_record(checked: Any, last: Any, target: Any, now: Any, request: Any = "") -> dict:
    """`status.lastCheck` from what the store module found at `status.lastSnapshot`'s key
    (`checked`: its state=checked entry): Found only when the snapshot and its manifest are
    there and the manifest records the sha256 status has; Missing, saying what is gone or
    changed, otherwise; Failed when there was nothing to check in this destination."""
    last = last if isinstance(last, dict) else {}
    checked = checked if isinstance(checked, dict) else {}
    record = {
        "time": format_time(parse_time(now, "now")),
        "location": str(last.get("location") or ""),
        "request": str(request or ""),
    }
    if not check_key(last, target):
        return {
            **record,
            "result": "Failed",
            "message": "status.lastSnapshot is not in spec.destination (it changed since): "
            "the next snapshot replaces it",
        }
    if not checked.get("verified"):
        why = str(checked.get("why") or "it cannot be verified")
        return {**record, "result": "Missing", "message": f"{record['location']}: {why}"}
    if checked.get("sha256") != last.get("sha256"):
        return {
            **record,
            "result": "Missing",
            "message": f"{record['location']} was replaced: its manifest records sha256 "
            f"{checked.get('sha256')}, not the {last.get('sha256')} status recorded",
        }
    return {**record, "result": "Found", "message": "the snapshot and its manifest are there"}


def check_failed(last: Any, now: Any, message: Any, request: Any = "") -> dict[str, Any]:
    """`status.lastCheck` when the check could not be made (the store did not answer, the
    credentials were refused): one short line, as the module explained it."""
    last = last if isinstance(last, dict) else {}
    line = " ".join(str(message or "the check failed").split())
    return {
        "time": format_time(parse_time(now, "now")),
        "location": str(last.get("location") or ""),
        "request": str(request or ""),
        "result": "Failed",
        "message": line if len(line) <= 300 else line[:297] + "...",
    }


def or_refusal(function: Any) -> Any:
    """The filter form: a refusal comes back as {"refused": message} for the runbook to
    report in its own words, not as a templating error."""

    def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return {"refused": "", **function(*args, **kwargs)}
        except BackupPlanError as error:
            return {"refused": str(error)}

    return wrapper
