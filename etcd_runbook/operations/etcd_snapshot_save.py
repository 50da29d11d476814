"""Save a snapshot of one member (the etcd_snapshot module's state=saved): into a file, or
into a place that keeps snapshots under keys (an S3-compatible store, a directory) with a
manifest beside it.

The place is proven first and a snapshot already there is kept (unless forced), so neither a
wrong credential nor a rerun costs a snapshot stream.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Any

from etcd_runbook.clients.etcd_client import EndpointClient, EtcdClient
from etcd_runbook.clients.etcd_common import ConnectionParams, Member, describe
from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError
from etcd_runbook.clients.etcd_s3 import SnapshotStore
from etcd_runbook.clients.etcd_snapshot_io import SnapshotFile, save_atomically, verify_file
from etcd_runbook.clients.etcd_snapshot_stream import stream_snapshot
from etcd_runbook.clients.etcd_snapshot_tool import SnapshotTool, find_tool
from etcd_runbook.operations.etcd_health import ClusterHealth, cluster_health
from etcd_runbook.operations.etcd_maintenance_ops import (
    member_endpoint,
    read_revision,
    resolve_member,
)
from etcd_runbook.operations.etcd_snapshot_dir import DirectoryStore
from etcd_runbook.operations.etcd_snapshot_s3 import snapshot_name, upload_snapshot
from etcd_runbook.rules.etcd_snapshot_catalog import MANIFEST_FORMAT, SnapshotCatalog

Params = dict[str, Any]
Store = SnapshotStore | DirectoryStore


def optional_tool(params: Params) -> SnapshotTool | None:
    if params["etcdutl"] or params["bin_dir"]:
        return find_tool(params["etcdutl"], params["bin_dir"])
    return None


def described_file(snapshot: SnapshotFile, tool: SnapshotTool | None) -> dict[str, Any]:
    result = snapshot.as_dict()
    if tool is not None:
        status = tool.status(snapshot.path)
        result["snapshot_status"] = status
        result["revision"] = int(status["revision"])
    return result


def utc_stamp(moment: datetime) -> tuple[str, str]:
    """(RFC 3339, key stamp) of a UTC time, to the second."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ"), moment.strftime("%Y%m%dT%H%M%SZ")


def manifest_result(store: SnapshotCatalog, key: str, manifest: dict[str, Any]) -> dict[str, Any]:
    return {
        "path": store.where(key),
        "key": key,
        "size": manifest.get("size"),
        "sha256": manifest.get("sha256"),
        "revision": manifest.get("revision"),
        "manifest": manifest,
    }


def kept_snapshot(
    params: Params, store: Store | None, tool: SnapshotTool | None
) -> dict[str, Any] | None:
    """The result when the snapshot asked for is there already and not to be replaced."""
    if params["force"]:
        return None
    if store is not None:
        manifest = store.verified_manifest(params["key"]) if params["key"] else None
        if manifest is None:
            return None
        return {
            "changed": False,
            "msg": f"{store.where(params['key'])} holds a verified snapshot; "
            "nothing saved (force=false)",
            **manifest_result(store, params["key"], manifest),
        }
    path = params["path"]
    if not os.path.exists(path):
        return None
    return {
        "changed": False,
        "msg": f"{path} exists; nothing saved (force=false)",
        **described_file(verify_file(path), tool),
    }


def snapshot_member(health: ClusterHealth, wanted: str | None) -> Member:
    """The member named, else the leader."""
    if wanted:
        return resolve_member(health, wanted)
    if health.leader is not None:
        return health.leader
    raise EtcdModuleError(
        "the cluster has no leader (quorum lost?): name a member to snapshot", reason="NoLeader"
    )


def stream_into_place(
    client: EtcdClient,
    endpoint: EndpointClient,
    params: Params,
    store: Store | None,
    key: str,
    read_back: bool,
) -> SnapshotFile:
    """Stream the member's snapshot into the file `params["path"]`, or under `key`."""

    def stream_into(sink: Any) -> int:
        return stream_snapshot(
            client.params,
            endpoint.url,
            sink,
            params["snapshot_timeout"],
            client.expected_cluster_id,
        )

    if store is None:
        return save_atomically(params["path"], stream_into, read_back=read_back)
    if isinstance(store, DirectoryStore):
        return store.save(key, stream_into)
    return upload_snapshot(store, key, stream_into)


def snapshot_manifest(
    saved: SnapshotFile,
    health: ClusterHealth,
    member: Member,
    result: dict[str, Any],
    taken_at: str,
    backup: dict[str, Any] | None,
) -> dict[str, Any]:
    """The manifest of the snapshot `saved` under `result["key"]`, from `member` of the
    cluster seen in `health`; `result` is the save's (key, revision, endpoint, duration)."""
    manifest = {
        "format": MANIFEST_FORMAT,
        "key": result["key"],
        "sha256": saved.sha256,
        "size": saved.size,
        "revision": result["revision"],
        "etcdVersion": health.member_status[member.id].version or "",
        "clusterID": health.cluster_id,
        "member": {"name": member.name, "id": member.id},
        "endpoint": result["endpoint"],
        "time": taken_at,
        "duration": result["duration"],
    }
    if backup:
        manifest["backup"] = dict(backup)
    return manifest


def save_snapshot(params: Params, store: Store | None, check_mode: bool) -> dict[str, Any]:
    """state=saved: the snapshot of `params["member"]` (default the leader) into
    `params["path"]`, or into `store` under `key` or a new key under `prefix`."""
    tool = None
    if store is not None:
        # Credentials, bucket or volume first: a wrong one must not cost a snapshot stream.
        store.check_access(params["prefix"] or params["key"], write=True)
    else:
        tool = optional_tool(params)
    kept = kept_snapshot(params, store, tool)
    if kept is not None:
        return kept
    if not params["endpoints"]:
        raise EtcdInputError("state=saved needs endpoints")
    with EtcdClient(ConnectionParams.from_module_params(params)) as client:
        health = cluster_health(client)
        member = snapshot_member(health, params["member"])
        endpoint = member_endpoint(client, health, member)
        revision = read_revision(endpoint)
        taken_at, stamp = utc_stamp(datetime.now(UTC))
        key, target = "", params["path"]
        if store is not None:
            key = params["key"] or snapshot_name(params["prefix"], stamp, revision)
            target = store.where(key)
        result: dict[str, Any] = {
            "changed": True,
            "path": target,
            "member": member.as_dict(),
            "endpoint": endpoint.url,
            "revision": revision,
        }
        if store is not None:
            result["key"] = key
        if check_mode:
            db_size = health.member_status[member.id].db_size or 0
            message = f"would save a snapshot of {describe(member)} to {target}"
            return {**result, "size": db_size, "msg": message}
        started = time.monotonic()
        saved = stream_into_place(client, endpoint, params, store, key, tool is not None)
        result["duration"] = round(time.monotonic() - started, 3)
    if store is None:
        result.update(described_file(saved, tool))
    else:
        manifest = snapshot_manifest(saved, health, member, result, taken_at, params["backup"])
        store.write_manifest(key, manifest)
        result.update({"size": saved.size, "sha256": saved.sha256, "manifest": manifest})
    result["msg"] = f"saved a snapshot of {describe(member)} to {target} ({saved.size} bytes)"
    return result
