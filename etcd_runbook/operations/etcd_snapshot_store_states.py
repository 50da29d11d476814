"""The etcd_snapshot_store module's states, from its params: the snapshots under a prefix
listed, some checked (still there and verified), or some deleted for a retention, only as
etcd_snapshot_deletion allows."""

from __future__ import annotations

from typing import Any

from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdRefusedError
from etcd_runbook.clients.etcd_s3 import S3Params, SnapshotStore
from etcd_runbook.operations.etcd_snapshot_dir import DirectoryStore
from etcd_runbook.rules.etcd_snapshot_catalog import SnapshotCatalog
from etcd_runbook.rules.etcd_snapshot_deletion import (
    deletion_diff,
    deletion_refusal,
    doomed_objects,
    keys_outside,
)

Params = dict[str, Any]


def _no_keys_outside(keys: list[str], prefix: str) -> None:
    outside = keys_outside(keys, prefix)
    if outside:
        raise EtcdInputError(f"keys outside prefix {prefix!r}: {', '.join(outside)}")


def check_snapshots(store: SnapshotCatalog, prefix: str, keys: list[str]) -> dict[str, Any]:
    _no_keys_outside(keys, prefix)
    checked = [store.check(key) for key in keys]
    missing = [c["key"] for c in checked if not c["verified"]]
    return {
        "changed": False,
        "checked": checked,
        "msg": f"{len(checked) - len(missing)} of {len(checked)} verified"
        + (f"; not: {', '.join(missing)}" if missing else ""),
    }


def listed_snapshots(
    store: SnapshotCatalog, prefix: str, listing: dict[str, Any]
) -> dict[str, Any]:
    count = len(listing["snapshots"])
    verified = sum(1 for s in listing["snapshots"] if s["verified"])
    return {
        "changed": False,
        **listing,
        "msg": f"{count} snapshots under {store.where(prefix)}, {verified} verified",
    }


def delete_snapshots(
    store: SnapshotCatalog,
    listing: dict[str, Any],
    params: Params,
    check_mode: bool,
    diff: bool,
) -> dict[str, Any]:
    """Delete `params["keys"]` (each with its manifest) for `params["owner"]`, or refuse
    before deleting anything."""
    prefix, keys, owner = params["prefix"], params["keys"], params["owner"]
    if not owner:
        raise EtcdInputError("state=absent needs owner: whose snapshots may be deleted")
    _no_keys_outside(keys, prefix)
    refusal = deletion_refusal(listing, keys, prefix, owner)
    if refusal:
        raise EtcdRefusedError(refusal)
    doomed = doomed_objects(listing, keys)
    result: dict[str, Any] = {"changed": bool(doomed), "deleted": doomed}
    if diff:
        result["diff"] = deletion_diff(listing, doomed, store.where(prefix))
    if not doomed:
        return {**result, **listing, "msg": "nothing to delete"}
    if check_mode:
        return {**result, **listing, "msg": f"would delete {len(doomed)} objects"}
    for key in doomed:
        store.remove(key)
    return {
        **result,
        **store.snapshots(prefix, params["recursive"]),
        "msg": f"deleted {len(doomed)} objects under {store.where(prefix)}",
    }


def snapshot_store_state(params: Params, check_mode: bool, diff: bool) -> dict[str, Any]:
    """The etcd_snapshot_store module's work for its params; its result, or an
    EtcdModuleError."""
    store: SnapshotCatalog = (
        SnapshotStore(S3Params.from_option(params["s3"]))
        if params["s3"]
        else DirectoryStore(params["directory"])
    )
    prefix = params["prefix"]
    if params["state"] == "checked":
        return check_snapshots(store, prefix, params["keys"])
    listing = store.snapshots(prefix, params["recursive"])
    if params["state"] == "listed":
        if params["keys"]:
            raise EtcdInputError("keys is only used with state=absent or state=checked")
        return listed_snapshots(store, prefix, listing)
    return delete_snapshots(store, listing, params, check_mode, diff)
