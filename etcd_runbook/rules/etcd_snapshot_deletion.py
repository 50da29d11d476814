"""Which stored objects a retention may delete, from a listing (SnapshotCatalog.snapshots):
only keys under its prefix, only snapshots its owner's manifests name (`ownership`), never
the owner's newest verified one, and each snapshot with its manifest, manifest first (so a
half-done deletion leaves an unverified snapshot, never a manifest vouching for nothing).
"""

from __future__ import annotations

from typing import Any

from etcd_runbook.rules.etcd_snapshot_catalog import manifest_key, ownership


def keys_outside(keys: list[str], prefix: str) -> list[str]:
    return [k for k in keys if not k.startswith(prefix)]


def deletion_refusal(
    listing: dict[str, Any], keys: list[str], prefix: str, owner: dict[str, Any]
) -> str:
    """Why deleting `keys` is refused ("" when it is not): a key that is not `owner`'s
    verified snapshot, or the newest of those."""
    snapshots = {s["key"]: s for s in listing["snapshots"]}
    foreign = {k: why for k in keys if k in snapshots and (why := ownership(snapshots[k], owner))}
    if foreign:
        listed = "; ".join(f"{k}: {why}" for k, why in sorted(foreign.items()))
        return (
            f"refusing to delete what EtcdBackup {owner['name']} did not write for this "
            f"cluster ({listed}); nothing was deleted"
        )
    newest = next((s for s in listing["snapshots"] if not ownership(s, owner)), None)
    if newest is not None and newest["key"] in keys:
        return (
            f"refusing to delete {newest['key']}: it is the newest verified snapshot of "
            f"EtcdBackup {owner['name']} under {prefix} (retention never deletes it); nothing "
            "was deleted"
        )
    return ""


def doomed_objects(listing: dict[str, Any], keys: list[str]) -> list[str]:
    """The objects to delete for `keys`, manifest first, then snapshot; a key not listed
    (gone already) is nothing to do."""
    listed = {s["key"] for s in listing["snapshots"]}
    doomed: list[str] = []
    for key in dict.fromkeys(keys):
        if key in listed:
            doomed += [manifest_key(key), key]
    return doomed


def deletion_diff(listing: dict[str, Any], doomed: list[str], header: str) -> dict[str, str]:
    """The keys under the prefix before and after deleting `doomed`, as a module's diff."""
    before = sorted({s["key"] for s in listing["snapshots"]} | set(listing["orphans"]))
    after = sorted(set(before) - set(doomed))
    return {
        "before": "\n".join(before) + "\n" if before else "",
        "after": "\n".join(after) + "\n" if after else "",
        "before_header": header,
        "after_header": header,
    }
