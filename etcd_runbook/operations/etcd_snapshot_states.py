"""The etcd_snapshot module's three states, from its params: a snapshot saved
(etcd_snapshot_save), fetched from where it is kept (or a stopped member's own database) to a
file, or restored into a new data dir.

A fetch checks the stored snapshot against its manifest (or the sha256 given) before a byte is
written, and the file appears only whole and verified; a restore from a store fetches first
and writes nothing to the data dir unless that succeeded.
"""

from __future__ import annotations

import os
from typing import Any

from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError
from etcd_runbook.clients.etcd_s3 import S3Params, SnapshotStore
from etcd_runbook.clients.etcd_snapshot_io import (
    SnapshotFile,
    SnapshotIntegrityError,
    file_sha256,
    verify_file,
)
from etcd_runbook.clients.etcd_snapshot_tool import find_tool
from etcd_runbook.operations.etcd_member_db import (
    check_database,
    check_outside,
    check_stopped,
    copy_member_db,
)
from etcd_runbook.operations.etcd_snapshot_dir import DirectoryStore
from etcd_runbook.operations.etcd_snapshot_restore import (
    RestoreSpec,
    already_restored,
    restore,
    restore_command,
)
from etcd_runbook.operations.etcd_snapshot_s3 import download_snapshot
from etcd_runbook.operations.etcd_snapshot_save import Store, save_snapshot
from etcd_runbook.rules.etcd_snapshot_requests import (
    expected_sha256,
    manifest_problem,
    request_problem,
    restore_problem,
    restore_settings,
)

Params = dict[str, Any]


def open_store(params: Params) -> Store | None:
    if params["s3"]:
        return SnapshotStore(S3Params.from_option(params["s3"]))
    if params["directory"]:
        return DirectoryStore(params["directory"])
    return None


def fetch_snapshot(params: Params, check_mode: bool, *, read_back: bool = False) -> dict[str, Any]:
    """Bring object `key` to `path`, verified; the result says whether it was downloaded.
    `read_back`: the caller reads the file at once (a restore)."""
    store = open_store(params)
    if store is None:
        raise EtcdInputError("state=fetched needs s3 or directory")
    key, path = params["key"], params["path"]
    where = store.where(key)
    store.check_access(key)
    found = store.stat(key)
    if found is None:
        raise EtcdModuleError(
            f"no snapshot at {where}: nothing was fetched", reason=store.missing_reason
        )
    manifest = store.read_manifest(key)
    expected = expected_sha256(params["sha256"], manifest)
    if not expected:
        raise SnapshotIntegrityError(
            f"snapshot {where} has no manifest recording its sha256 (it was never verified, "
            "or its upload did not finish): give sha256 to fetch it anyway",
            reason="SnapshotUnverified",
        )
    size = found["size"]
    problem = manifest_problem(where, expected, manifest, size)
    if problem:
        raise SnapshotIntegrityError(problem)
    result: dict[str, Any] = {"path": path, "key": key, "sha256": expected, "size": size}
    if manifest:
        result["manifest"] = manifest
        if isinstance(manifest.get("revision"), int):
            result["revision"] = manifest["revision"]
    if os.path.isfile(path) and file_sha256(path) == expected:
        return {**result, "changed": False, "msg": f"{path} already holds {where}"}
    if check_mode:
        return {**result, "changed": True, "msg": f"would download {where} to {path}"}
    if isinstance(store, DirectoryStore):
        store.copy_out(key, path, sha256=expected, size=size, read_back=read_back)
        return {**result, "changed": True, "msg": f"copied {where} to {path} ({size} bytes)"}
    download_snapshot(store, key, path, sha256=expected, size=size, read_back=read_back)
    return {**result, "changed": True, "msg": f"downloaded {where} to {path} ({size} bytes)"}


def fetch_member_db(params: Params, check_mode: bool) -> dict[str, Any]:
    """state=fetched with member_data_dir: the stopped member's database copied whole to
    `path`, once. Its restore (the next step, with etcd's own tool) reads no hash trailer, so
    the file is checked here as bbolt would open it, before a byte is copied."""
    data_dir, path = params["member_data_dir"], params["path"]
    check_outside(data_dir, path)
    source = check_stopped(data_dir)
    check_database(source)
    size = os.path.getsize(source)
    result: dict[str, Any] = {"path": path, "size": size}
    # A stopped member's database does not change: the same bytes at `path` are this copy.
    if os.path.isfile(path) and os.path.getsize(path) == size:
        sha256 = file_sha256(source)
        if file_sha256(path) == sha256:
            return {
                **result,
                "sha256": sha256,
                "changed": False,
                "msg": f"{path} already holds the database of {data_dir}",
            }
    if check_mode:
        return {
            **result,
            "sha256": file_sha256(source),
            "changed": True,
            "msg": f"would copy {source} to {path} ({size} bytes)",
        }
    copied = copy_member_db(data_dir, path)
    return {**copied.as_dict(), "changed": True, "msg": f"copied {source} to {path} ({size} bytes)"}


def restore_spec(params: Params, sha256: str) -> RestoreSpec:
    problem = restore_problem(params)
    if problem:
        raise EtcdInputError(problem)
    return RestoreSpec(snapshot_sha256=sha256, **restore_settings(params, sha256))


def member_snapshot(params: Params, check_mode: bool) -> SnapshotFile:
    """The stopped member's database at `member_data_dir`, copied to `path` (in check mode,
    read where it is)."""
    if check_mode:
        source = check_stopped(params["member_data_dir"])
        return SnapshotFile(
            path=params["path"], size=os.path.getsize(source), sha256=file_sha256(source)
        )
    return copy_member_db(params["member_data_dir"], params["path"])


def restore_snapshot(params: Params, check_mode: bool) -> dict[str, Any]:
    """state=restored: the snapshot at `path` (first fetched, with s3 or directory, or copied
    from a stopped member's data dir) into the new data dir, once; a data dir holding anything
    else is refused."""
    if not (params["etcdutl"] or params["bin_dir"]):
        raise EtcdInputError("state=restored needs etcdutl or bin_dir (the target version's)")
    tool = find_tool(params["etcdutl"], params["bin_dir"])
    fetched: dict[str, Any] = {}
    if params["s3"] or params["directory"]:
        fetched = fetch_snapshot(params, check_mode, read_back=True)
        if check_mode and fetched["changed"]:
            restore_spec(params, fetched["sha256"])  # refuse bad input in check mode too
            return {
                **fetched,
                "data_dir": params["data_dir"],
                "msg": f"would download {fetched['key']} to {params['path']} and restore it "
                f"into {params['data_dir']}",
            }
    from_member = bool(params["member_data_dir"])
    snapshot = member_snapshot(params, check_mode) if from_member else verify_file(params["path"])
    expected = (params["sha256"] or fetched.get("sha256") or "").strip().lower()
    if expected and expected != snapshot.sha256:
        raise SnapshotIntegrityError(
            f"snapshot {snapshot.path} has sha256 {snapshot.sha256}, not the expected {expected}"
        )
    spec = restore_spec(params, snapshot.sha256)
    data_dir = params["data_dir"]
    result: dict[str, Any] = {
        **{k: v for k, v in fetched.items() if k in ("key", "manifest")},
        **snapshot.as_dict(),
        "data_dir": data_dir,
        "restore": spec.as_dict(),
    }
    if already_restored(data_dir, spec):
        return {
            **result,
            "changed": bool(fetched.get("changed")),
            "msg": f"{data_dir} already holds this restore",
        }
    if spec.bump_revision > 0 and not tool.supports_bump_revision():
        raise EtcdInputError(
            f"{tool.path} ({tool.kind} {tool.version}) has no --bump-revision: restore with an "
            "etcd 3.4.31+ etcdctl or etcdutl, or set bump_revision=0 knowing that watchers of "
            "the old cluster may then see revisions go backwards"
        )
    if check_mode:
        command = restore_command(tool, snapshot.path, data_dir, spec, skip_hash_check=from_member)
        return {**result, "changed": True, "command": command, "msg": f"would restore {data_dir}"}
    status = tool.status(snapshot.path)
    result["revision"] = int(status["revision"])
    result["snapshot_status"] = status
    result["command"] = restore(tool, snapshot.path, data_dir, spec, skip_hash_check=from_member)
    return {**result, "changed": True, "msg": f"restored {snapshot.path} into {data_dir}"}


def snapshot_state(params: Params, check_mode: bool) -> dict[str, Any]:
    """The etcd_snapshot module's work for its params; its result, or an EtcdModuleError."""
    problem = request_problem(params)
    if problem:
        raise EtcdInputError(problem)
    if params["state"] == "saved":
        return save_snapshot(params, open_store(params), check_mode)
    if params["state"] == "fetched" and params["member_data_dir"]:
        return fetch_member_db(params, check_mode)
    if params["state"] == "fetched":
        return fetch_snapshot(params, check_mode)
    return restore_snapshot(params, check_mode)
