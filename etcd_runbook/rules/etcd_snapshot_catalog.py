"""What every place that keeps snapshots shares: an S3-compatible store (etcd_s3) and a
directory, a mounted volume or a local one (etcd_snapshot_dir).

Layout (docs/backup-storage.md): a snapshot is the bytes `etcdctl snapshot save` writes
(etcd's sha256 trailer included) under a key, which appears only once complete; beside it
`<key>.json`, the manifest, written after the snapshot. A snapshot is *verified* when its
manifest exists and records the snapshot's size and a sha256. Listing, and what a listing
says of each snapshot, is the same wherever the bytes are: a place says how to list its keys
and read a manifest, and `SnapshotCatalog` does the rest.

A manifest names who wrote the snapshot: `backup` (the EtcdBackup's namespace, name and uid)
and `clusterID` (the etcd cluster's). A retention deletes only what its own manifests name
(`ownership`: the backup plan prunes by it, and etcd_snapshot_store refuses to delete
anything else by it).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

MANIFEST_SUFFIX = ".json"
MANIFEST_FORMAT = "etcd.runbook.io/snapshot-manifest/v1"
MANIFEST_MAX_BYTES = 64 * 1024


def manifest_key(key: str) -> str:
    return key + MANIFEST_SUFFIX


def rfc3339(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_manifest(body: bytes) -> dict[str, Any]:
    """A manifest's bytes as a dict; {} when they are too long or not a JSON object (the
    snapshot then counts as unverified)."""
    if len(body) > MANIFEST_MAX_BYTES:
        return {}
    try:
        manifest = json.loads(body)
    except ValueError:
        return {}
    return manifest if isinstance(manifest, dict) else {}


def manifest_body(manifest: dict[str, Any]) -> bytes:
    return json.dumps(manifest, indent=2, sort_keys=True).encode()


def describe_snapshot(obj: dict[str, Any], manifest: dict[str, Any] | None) -> dict[str, Any]:
    """A listed snapshot with what its manifest says; verified when the manifest records the
    snapshot's size and a sha256."""
    entry: dict[str, Any] = {
        "location": obj["key"],
        "key": obj["key"],
        "size": obj["size"],
        "time": obj["time"],
        "sha256": "",
        "verified": False,
        "manifest": manifest is not None,
    }
    if manifest:
        sha = manifest.get("sha256")
        entry["verified"] = (
            isinstance(sha, str) and len(sha) == 64 and manifest.get("size") == obj["size"]
        )
        if entry["verified"]:
            entry["sha256"] = sha
        if isinstance(manifest.get("time"), str):
            entry["time"] = manifest["time"]
        for name in ("revision", "etcdVersion", "clusterID", "member", "duration", "backup"):
            if name in manifest:
                entry[name] = manifest[name]
    return entry


def ownership(entry: dict[str, Any], owner: dict[str, Any]) -> str:
    """Empty when the listed snapshot `entry` is `owner`'s to delete, else why it is not.

    `owner` is {name, uid, cluster_id}: the EtcdBackup and the etcd cluster ID the cluster
    has now. Only a verified snapshot whose manifest names that EtcdBackup (name and uid) and
    that cluster ID is; anything else (no manifest, another backup's, a re-created cluster's
    old data, a file a person put there) is left alone."""
    if entry.get("verified") is not True or not entry.get("sha256"):
        return "no manifest that verifies it"
    written = entry.get("backup")
    if not isinstance(written, dict):
        return "its manifest names no EtcdBackup"
    name, uid = str(written.get("name") or ""), str(written.get("uid") or "")
    if (name, uid) != (str(owner.get("name") or ""), str(owner.get("uid") or "")):
        return f"written by EtcdBackup {name or '?'} (uid {uid or 'none'})"
    cluster_id = str(entry.get("clusterID") or "")
    if not cluster_id or cluster_id != str(owner.get("cluster_id") or ""):
        return f"taken from etcd cluster {cluster_id or '?'}, not this cluster's"
    return ""


class SnapshotCatalog:
    """Listing and verification over a place's own `list_keys`, `stat` and `read_manifest`."""

    # The reason word of a snapshot asked for by key that is not there.
    missing_reason = "SnapshotMissing"

    def where(self, key: str | None = None) -> str:
        raise NotImplementedError

    def check_access(self, prefix: str = "", *, write: bool = False) -> None:
        """Fail with a reason word a condition can carry when the place cannot be read (or,
        with `write`, written) before any snapshot is streamed."""
        raise NotImplementedError

    def write_manifest(self, key: str, manifest: dict[str, Any]) -> None:
        raise NotImplementedError

    def remove(self, key: str) -> None:
        """Delete `key`; a key that is not there is nothing to do."""
        raise NotImplementedError

    def list_keys(self, prefix: str, recursive: bool = False) -> list[dict[str, Any]]:
        """The keys that start with `prefix`: {key, size, time}. Not `recursive`, only those
        with no `/` after the prefix (one backup's own snapshots, not what lies below)."""
        raise NotImplementedError

    def stat(self, key: str) -> dict[str, Any] | None:
        """{key, size, time} of a key, or None when there is none."""
        raise NotImplementedError

    def read_manifest(self, key: str) -> dict[str, Any] | None:
        """The manifest of snapshot `key`; None when it has none, {} when it is unreadable."""
        raise NotImplementedError

    def snapshots(self, prefix: str, recursive: bool = False) -> dict[str, Any]:
        """The snapshots under `prefix`, newest first, each as the retention plan reads them
        ({location, key, time, size, sha256, verified, revision, backup, ...}), and the
        manifests whose snapshot is gone (`orphans`)."""
        objects = self.list_keys(prefix, recursive)
        names = {o["key"] for o in objects}
        entries = []
        for obj in objects:
            if obj["key"].endswith(MANIFEST_SUFFIX):
                continue
            manifest = self.read_manifest(obj["key"]) if manifest_key(obj["key"]) in names else None
            entries.append(describe_snapshot(obj, manifest))
        orphans = sorted(
            name
            for name in names
            if name.endswith(MANIFEST_SUFFIX) and name.removesuffix(MANIFEST_SUFFIX) not in names
        )
        entries.sort(key=lambda e: (e["time"], e.get("revision") or -1, e["key"]), reverse=True)
        return {"snapshots": entries, "orphans": orphans}

    def check(self, key: str) -> dict[str, Any]:
        """Whether the snapshot at `key` is still there and verified: {key, found, verified,
        sha256, size, why}. `why` says what is missing (the object, its manifest) or wrong."""
        found = self.stat(key)
        result: dict[str, Any] = {"key": key, "found": found is not None, "verified": False}
        if found is None:
            return {**result, "sha256": "", "size": 0, "why": "the snapshot is gone"}
        manifest = self.read_manifest(key)
        entry = describe_snapshot(found, manifest)
        why = ""
        if manifest is None:
            why = "its manifest is gone"
        elif not entry["verified"]:
            why = "its manifest does not verify it (unreadable, or another size)"
        return {
            **result,
            "verified": entry["verified"],
            "sha256": entry["sha256"],
            "size": found["size"],
            "why": why,
        }

    def verified_manifest(self, key: str) -> dict[str, Any] | None:
        """The manifest of the verified snapshot at `key`, or None when there is none."""
        found = self.stat(key)
        if found is None:
            return None
        manifest = self.read_manifest(key)
        if manifest is None or not describe_snapshot(found, manifest)["verified"]:
            return None
        return manifest
