#!/usr/bin/python
"""Ansible module: save an etcd snapshot from a member (to a file or an S3-compatible store),
fetch one from the store, or restore one into a new data dir."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_snapshot
short_description: Save an etcd snapshot to a file, S3 or a directory, or restore one
description:
  - O(state=saved) streams a snapshot of one member's database (the leader unless O(member)
    names another) into O(path), the way C(etcdctl snapshot save) does, over the etcd v3
    API.
  - The file appears atomically. The stream goes to a temporary file in the same directory,
    etcd's own integrity hash (the sha256 of the database that etcd appends to the stream) is
    checked, the file is fsynced, and only then renamed to O(path). A corrupt or truncated
    stream never replaces O(path). The file is created with mode 0600, as a snapshot holds
    every key, secrets included. Where the filesystem allows, it is written past the page
    cache (O_DIRECT), so a backup does not push etcd's own database out of the node's
    memory; with O(etcdutl) or O(bin_dir) it goes through the page cache, where the status
    read below finds it.
  - When O(path) exists, nothing is saved and the existing file is reported (RV(changed) is
    false) unless O(force=true).
  - With O(etcdutl) or O(bin_dir), the saved file is also opened by C(etcdutl snapshot
    status), which walks the whole database; RV(revision) is then the snapshot's exact
    revision. Without it, RV(revision) is the member's revision read just before the stream
    started (the snapshot holds at least that revision).
  - With O(s3), O(state=saved) streams the snapshot into the object O(key) (or a new object
    under O(prefix)) of an S3-compatible store instead of a file, with no local copy and no
    more memory than a few parts of 16 MiB, whatever the snapshot's size. The multipart upload
    completes only after etcd's integrity hash was checked; otherwise it is aborted and
    nothing is listed under the key. A manifest, C(<key>.json) (sha256, size, revision, etcd
    version, cluster ID, member, time, duration, and O(backup)), is then written beside it; a
    snapshot without one is unverified. RV(revision) is the member's revision read just before the
    stream started. When O(key) already holds a verified snapshot, nothing is saved unless
    O(force=true).
  - With O(directory) instead of O(s3) (a mounted volume, or a local directory), O(key) and
    O(prefix) name files under O(directory) laid out as in a store, manifest included; the
    snapshot is written to a hidden temp file, checked, fsynced and renamed, so a
    half-written one is never listed. New directories are created with mode 0700.
  - The store's credentials and bucket are checked (by a listing) before etcd is asked for
    anything.
  - O(state=fetched) downloads the object O(key) from O(s3) (or copies it from O(directory))
    to O(path), checking its size
    and sha256 against its manifest (or O(sha256) when given) and etcd's integrity hash on
    the way; the file appears atomically, and a corrupt, truncated or missing object leaves
    O(path) as it was. A snapshot without a manifest needs O(sha256).
  - O(state=restored) restores the snapshot at O(path) into the new data dir O(data_dir)
    with the etcdutl of the target etcd version (for etcd 3.4, which has no etcdutl, its
    C(etcdctl snapshot restore)). The restored member belongs to a new cluster with a new
    cluster token, and its revision is bumped by O(bump_revision) with the bumped revision
    marked compacted, so that clients watching the old cluster never see revisions go
    backwards.
  - Before restoring, etcd's integrity hash inside the file is checked, and the file's
    sha256 is compared with O(sha256) when given.
  - O(state=restored) with O(s3) or O(directory) and O(key) first fetches it to O(path) as
    O(state=fetched) does; nothing is written to O(data_dir) unless that succeeded.
  - A non-empty O(data_dir) is never overwritten. When it holds a restore made by this module
    from the same snapshot with the same settings (a marker file
    C(.etcd-runbook-restore.json) records them), nothing changes; anything else is refused.
version_added: "0.1.0"
author: etcd runbook operator maintainers
extends_documentation_fragment:
  - etcd_connection
  - etcd_s3
options:
  endpoints:
    description:
      - Client URLs of etcd members, C(http://host:port) or C(https://host:port).
      - Required with O(state=saved); not used with O(state=restored), which works offline.
    type: list
    elements: str
    required: false
  state:
    description:
      - V(saved) takes a snapshot into O(path) (or, with O(s3), into the store);
        V(fetched) downloads O(key) from O(s3) to O(path); V(restored) restores O(path)
        (with O(s3), first fetched from O(key)) into O(data_dir).
    type: str
    choices: [saved, fetched, restored]
    default: saved
  path:
    description:
      - The snapshot file. Its directory must exist.
      - Required, except with O(state=saved) and O(s3) or O(directory), which write there.
    type: path
  directory:
    description:
      - A directory holding snapshots laid out as in a store (a mounted volume); O(key) and
        O(prefix) are then relative paths under it. Mutually exclusive with O(s3).
      - With O(state=saved), it must exist and be writable.
    type: path
  key:
    description:
      - With O(s3) or O(directory), the key of the snapshot to save, fetch or restore.
      - Required with O(s3) or O(directory) and O(state=fetched) or O(state=restored).
        Mutually exclusive with O(prefix).
    type: str
  prefix:
    description:
      - With O(s3) or O(directory) and O(state=saved), save to a new key named
        C(<prefix>/<YYYYMMDDTHHMMSSZ>-rev<revision>.db) (UTC time; such keys sort by time),
        the naming of the etcd_backup_plan filter's C(etcd_backup_key).
    type: str
  backup:
    description:
      - With O(s3) or O(directory) and O(state=saved), the EtcdBackup the snapshot is taken
        for, recorded in its manifest. A retention deletes only snapshots whose manifest names
        its EtcdBackup (name and uid) and the cluster ID the cluster has now (the
        C(etcd_snapshot_store) module's O(owner)); a snapshot saved without O(backup) is never
        pruned by one.
    type: dict
    suboptions:
      namespace:
        description: The EtcdBackup's namespace.
        type: str
        required: true
      name:
        description: The EtcdBackup's name.
        type: str
        required: true
      uid:
        description: The EtcdBackup's uid (empty for a run by hand without an EtcdBackup).
        type: str
        default: ""
  member:
    description:
      - The member to snapshot (O(state=saved)), by name, member ID (hex) or client URL.
      - Default the current leader.
    type: str
  force:
    description:
      - With O(state=saved), take a new snapshot even when O(path) exists (with O(s3), when
        O(key) holds a verified snapshot), replacing it.
    type: bool
    default: false
  snapshot_timeout:
    description:
      - Seconds the whole snapshot stream may take.
    type: float
    default: 1800.0
  etcdutl:
    description:
      - Path of the C(etcdutl) binary of the target etcd version (for etcd 3.4, its
        C(etcdctl)). Mutually exclusive with O(bin_dir).
      - Not used by O(state=saved) with O(s3), which leaves no local file to read.
      - Required (or O(bin_dir)) with O(state=restored).
    type: path
  bin_dir:
    description:
      - Directory holding C(etcdutl), or only C(etcdctl) for etcd 3.4.
    type: path
  sha256:
    description:
      - Expected sha256 of the whole snapshot file (as C(sha256sum) prints it). The restore
        is refused when the file's differs.
      - With O(s3), the object's expected sha256 (its manifest's is used when not given);
        a download that does not match is discarded.
    type: str
  data_dir:
    description:
      - The new member's data dir for O(state=restored). Must not exist, or be empty.
    type: path
  name:
    description:
      - The restored member's name (its etcd C(--name)). Required with O(state=restored).
    type: str
  initial_advertise_peer_urls:
    description:
      - The restored member's peer URLs. Required with O(state=restored).
    type: list
    elements: str
  initial_cluster:
    description:
      - The new cluster's C(name=peer-url,...) list. Default this member alone.
      - When restoring every member of a multi-member cluster from the same snapshot, give
        each the same full list and the same O(initial_cluster_token).
    type: str
  initial_cluster_token:
    description:
      - The new cluster's token. Default C(restore-) followed by the first 16 hex digits of
        the snapshot's sha256, the same for every member restored from one snapshot and new
        for each snapshot. Give your own when restoring the same snapshot into two clusters.
    type: str
  bump_revision:
    description:
      - How far to raise the revision of the restored data; the bumped revision is marked
        compacted (C(--mark-compacted), which etcd requires with a bump).
      - It must exceed the number of revisions the old cluster may have made after the
        snapshot; etcd's docs suggest a billion. V(0) disables the bump (not recommended, as
        watchers may miss events or see revisions go backwards).
      - Refused for etcd 3.4 releases whose C(etcdctl snapshot restore) lacks the flag
        (before 3.4.31); set V(0) there.
    type: int
    default: 1000000000
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
notes:
  - Start a restored member with C(--initial-cluster-state=new) and the same name, peer URLs,
    initial cluster and token as given here.
"""

EXAMPLES = r"""
- name: Save a snapshot from the leader
  etcd_snapshot:
    path: /var/backups/etcd/etcd-2024-05-01T0300.db
    endpoints: ["https://etcd-0.etcd.prod.svc:2379"]
    ca_cert: /etc/etcd/pki/ca.crt
    client_cert: /etc/etcd/pki/client.crt
    client_key: /etc/etcd/pki/client.key
  register: backup

- name: Save a snapshot from a follower and check it with etcdutl
  etcd_snapshot:
    path: /var/backups/etcd/latest.db
    member: etcd-2
    force: true
    bin_dir: /usr/local/bin
    endpoints: ["http://10.0.0.10:2379"]

- name: Stream a snapshot from a follower into an S3 bucket, under a prefix
  etcd_snapshot:
    member: etcd-1
    prefix: backups/prod/etcd
    s3:
      endpoint: https://s3.example.com
      bucket: etcd-backups
      path_style: true
      access_key: "{{ s3_access_key }}"
      secret_key: "{{ s3_secret_key }}"
    endpoints: ["https://etcd-0.etcd.prod.svc:2379"]
  register: uploaded

- name: Stream a snapshot onto a mounted volume, under an EtcdBackup's prefix
  etcd_snapshot:
    prefix: prod/etcd/nightly
    directory: /backup
    backup:
      namespace: prod
      name: nightly
      uid: 0d4c5f0e-8a53-4b57-9d1a-2f4d3c1b0a99
    endpoints: ["https://etcd-0.etcd.prod.svc:2379"]

- name: Fetch it back, checked against its manifest, then restore it
  etcd_snapshot:
    state: restored
    key: "{{ uploaded.key }}"
    path: /var/lib/etcd-restore/snapshot.db
    s3:
      endpoint: https://s3.example.com
      bucket: etcd-backups
      path_style: true
    data_dir: /var/lib/etcd/restored
    name: etcd-0
    initial_advertise_peer_urls: ["https://etcd-0.etcd.prod.svc:2380"]
    bin_dir: /usr/local/bin

- name: Restore it as the seed member of a new cluster
  etcd_snapshot:
    state: restored
    path: /var/backups/etcd/etcd-2024-05-01T0300.db
    sha256: "{{ backup.sha256 }}"
    data_dir: /var/lib/etcd/restored
    name: etcd-0
    initial_advertise_peer_urls: ["https://etcd-0.etcd.prod.svc:2380"]
    etcdutl: /usr/local/bin/etcdutl
"""

RETURN = r"""
path:
  description: The snapshot file (with O(s3) and O(state=saved), C(s3://bucket/key at
    endpoint); with O(directory), the file under it).
  returned: always
  type: str
key:
  description: The key of the snapshot in the store or directory.
  returned: with O(s3) or O(directory)
  type: str
manifest:
  description: The snapshot's manifest, as written (O(state=saved)) or read.
  returned: with O(s3) or O(directory), when there is one
  type: dict
size:
  description: Size of the snapshot file in bytes (in check mode with O(state=saved), the
    member's current database size, which the snapshot will be close to).
  returned: always
  type: int
sha256:
  description: sha256 of the whole snapshot file, as C(sha256sum) prints it.
  returned: when the file or object exists or was written
  type: str
revision:
  description:
    - O(state=saved), the snapshot's revision (see the description for how exact it is).
    - O(state=restored), the revision in the snapshot before the bump, when the tool reports it.
  returned: when known
  type: int
member:
  description: The member snapshotted, as C(etcd_member) returns members.
  returned: O(state=saved) and the snapshot was taken (or would be)
  type: dict
endpoint:
  description: The URL the snapshot was streamed from.
  returned: O(state=saved) and the snapshot was taken (or would be)
  type: str
duration:
  description: Seconds the stream took.
  returned: O(state=saved) and the snapshot was taken
  type: float
snapshot_status:
  description: What C(snapshot status -w json) of O(etcdutl) reported.
  returned: when O(etcdutl) or O(bin_dir) was given and the file was read
  type: dict
data_dir:
  description: The restored data dir.
  returned: O(state=restored)
  type: str
restore:
  description: The restore settings (as recorded in the data dir's marker).
  returned: O(state=restored)
  type: dict
command:
  description: The restore command run (or that would run).
  returned: O(state=restored) and a restore was (or would be) done
  type: list
  elements: str
msg:
  description: What was done, or why nothing needed doing.
  returned: always
  type: str
reason:
  description: A short word for the failure (for example V(SnapshotCorrupt), V(Refused),
    V(S3AuthFailed), V(S3BucketMissing), V(S3ObjectMissing), V(S3Unreachable),
    V(VolumeMissing), V(VolumeNotWritable), V(VolumeFull), V(SnapshotMissing)).
  returned: failed
  type: str
"""

import os
import time
from datetime import UTC, datetime
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from etcd_runbook.clients.etcd_client import EtcdClient
from etcd_runbook.clients.etcd_common import (
    ConnectionParams,
    connection_argument_spec,
    connection_required_together,
    describe,
)
from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError
from etcd_runbook.clients.etcd_s3 import S3Params, SnapshotStore, s3_argument_spec
from etcd_runbook.clients.etcd_snapshot_io import (
    SnapshotFile,
    SnapshotIntegrityError,
    file_sha256,
    save_atomically,
    verify_file,
)
from etcd_runbook.clients.etcd_snapshot_stream import stream_snapshot
from etcd_runbook.clients.etcd_snapshot_tool import SnapshotTool, find_tool
from etcd_runbook.operations.etcd_maintenance_ops import (
    maintenance_health,
    member_endpoint,
    read_revision,
    resolve_member,
)
from etcd_runbook.operations.etcd_snapshot_dir import DirectoryStore
from etcd_runbook.operations.etcd_snapshot_restore import RestoreSpec, already_restored, restore
from etcd_runbook.operations.etcd_snapshot_s3 import (
    download_snapshot,
    snapshot_name,
    upload_snapshot,
)
from etcd_runbook.rules.etcd_snapshot_catalog import MANIFEST_FORMAT, SnapshotCatalog


def argument_spec() -> dict[str, Any]:
    connection = connection_argument_spec()
    connection["endpoints"] = {**connection["endpoints"], "required": False}
    return {
        **connection,
        "state": {"type": "str", "choices": ["saved", "fetched", "restored"], "default": "saved"},
        "path": {"type": "path"},
        "key": {"type": "str", "no_log": False},
        "prefix": {"type": "str"},
        "s3": s3_argument_spec(),
        "directory": {"type": "path"},
        "backup": {
            "type": "dict",
            "options": {
                "namespace": {"type": "str", "required": True},
                "name": {"type": "str", "required": True},
                "uid": {"type": "str", "default": ""},
            },
        },
        "member": {"type": "str"},
        "force": {"type": "bool", "default": False},
        "snapshot_timeout": {"type": "float", "default": 1800.0},
        "etcdutl": {"type": "path"},
        "bin_dir": {"type": "path"},
        "sha256": {"type": "str"},
        "data_dir": {"type": "path"},
        "name": {"type": "str"},
        "initial_advertise_peer_urls": {"type": "list", "elements": "str"},
        "initial_cluster": {"type": "str"},
        "initial_cluster_token": {"type": "str"},
        "bump_revision": {"type": "int", "default": 1_000_000_000},
    }


def check_combination(params: dict[str, Any]) -> None:
    """What each state needs, beyond what the argument spec can say."""
    state = params["state"]
    stored = "s3" if params["s3"] else "directory" if params["directory"] else ""
    if (params["key"] or params["prefix"]) and not stored:
        raise EtcdInputError("key and prefix name snapshots in a store: give s3 or directory")
    if params["backup"] and not (state == "saved" and stored):
        raise EtcdInputError("backup goes into a manifest: only with state=saved and a store")
    if state == "saved" and stored:
        if bool(params["key"]) == bool(params["prefix"]):
            raise EtcdInputError(f"state=saved with {stored} needs exactly one of key or prefix")
        if params["path"]:
            raise EtcdInputError(f"state=saved with {stored} writes no other file: drop path")
        return
    if state == "fetched" and not stored:
        raise EtcdInputError("state=fetched needs s3 or directory, and key")
    if stored and not params["key"]:
        raise EtcdInputError(f"state={state} with {stored} needs key (the snapshot to read)")
    if stored and params["prefix"]:
        raise EtcdInputError(f"state={state} reads one snapshot: give key, not prefix")
    if not params["path"]:
        raise EtcdInputError(f"state={state} needs path")


def optional_tool(params: dict[str, Any]) -> SnapshotTool | None:
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


def open_store(params: dict[str, Any]) -> SnapshotStore | DirectoryStore | None:
    if params["s3"]:
        return SnapshotStore(S3Params.from_option(params["s3"]))
    if params["directory"]:
        return DirectoryStore(params["directory"])
    return None


def save(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    store = open_store(params)
    if store is not None:
        # Credentials, bucket or volume first: a wrong one must not cost a snapshot stream.
        store.check_access(params["prefix"] or params["key"], write=True)
        if params["key"] and not params["force"]:
            manifest = store.verified_manifest(params["key"])
            if manifest is not None:
                return {
                    "changed": False,
                    "msg": f"{store.where(params['key'])} holds a verified snapshot; "
                    "nothing saved (force=false)",
                    **manifest_result(store, params["key"], manifest),
                }
    else:
        path = params["path"]
        tool = optional_tool(params)
        if os.path.exists(path) and not params["force"]:
            existing = described_file(verify_file(path), tool)
            return {
                "changed": False,
                "msg": f"{path} exists; nothing saved (force=false)",
                **existing,
            }
    if not params["endpoints"]:
        raise EtcdInputError("state=saved needs endpoints")
    with EtcdClient(ConnectionParams.from_module_params(params)) as client:
        health = maintenance_health(client)
        if params["member"]:
            member = resolve_member(health, params["member"])
        elif health.leader is not None:
            member = health.leader
        else:
            raise EtcdModuleError(
                "the cluster has no leader (quorum lost?): name a member to snapshot",
                reason="NoLeader",
            )
        endpoint = member_endpoint(client, health, member)
        revision = read_revision(endpoint)
        taken_at, stamp = utc_stamp(datetime.now(UTC))
        target = params["path"]
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
        if module.check_mode:
            db_size = health.member_status[member.id].db_size or 0
            message = f"would save a snapshot of {describe(member)} to {target}"
            return {**result, "size": db_size, "msg": message}
        started = time.monotonic()
        timeout = params["snapshot_timeout"]

        def stream_into(sink: Any) -> int:
            return stream_snapshot(
                client.params, endpoint.url, sink, timeout, client.expected_cluster_id
            )

        if store is None:
            saved = save_atomically(target, stream_into, read_back=tool is not None)
        elif isinstance(store, DirectoryStore):
            saved = store.save(key, stream_into)
        else:
            saved = upload_snapshot(store, key, stream_into)
        result["duration"] = round(time.monotonic() - started, 3)
    if store is None:
        result.update(described_file(saved, tool))
    else:
        status = health.member_status[member.id]
        manifest = {
            "format": MANIFEST_FORMAT,
            "key": key,
            "sha256": saved.sha256,
            "size": saved.size,
            "revision": revision,
            "etcdVersion": status.version or "",
            "clusterID": health.cluster_id,
            "member": {"name": member.name, "id": member.id},
            "endpoint": endpoint.url,
            "time": taken_at,
            "duration": result["duration"],
        }
        if params["backup"]:
            manifest["backup"] = dict(params["backup"])
        store.write_manifest(key, manifest)
        result.update({"size": saved.size, "sha256": saved.sha256, "manifest": manifest})
    result["msg"] = f"saved a snapshot of {describe(member)} to {target} ({saved.size} bytes)"
    return result


def manifest_result(store: SnapshotCatalog, key: str, manifest: dict[str, Any]) -> dict[str, Any]:
    return {
        "path": store.where(key),
        "key": key,
        "size": manifest.get("size"),
        "sha256": manifest.get("sha256"),
        "revision": manifest.get("revision"),
        "manifest": manifest,
    }


def fetch(module: AnsibleModule, *, read_back: bool = False) -> dict[str, Any]:
    """Bring object `key` to `path`, verified; the result says whether it was downloaded.
    `read_back`: the caller reads the file at once (a restore)."""
    params = module.params
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
    recorded = (manifest or {}).get("sha256")
    expected = (params["sha256"] or "").strip().lower() or recorded
    if not expected:
        raise SnapshotIntegrityError(
            f"snapshot {where} has no manifest recording its sha256 (it was never verified, "
            "or its upload did not finish): give sha256 to fetch it anyway",
            reason="SnapshotUnverified",
        )
    if recorded and recorded != expected:
        raise SnapshotIntegrityError(
            f"snapshot {where} is recorded with sha256 {recorded}, not the expected {expected}"
        )
    size = found["size"]
    if manifest and recorded == expected and manifest.get("size") != size:
        raise SnapshotIntegrityError(
            f"snapshot {where} is {size} bytes, not the {manifest.get('size')} its manifest "
            "records: it is truncated or was replaced"
        )
    result: dict[str, Any] = {"path": path, "key": key, "sha256": expected, "size": size}
    if manifest:
        result["manifest"] = manifest
        if isinstance(manifest.get("revision"), int):
            result["revision"] = manifest["revision"]
    if os.path.isfile(path) and file_sha256(path) == expected:
        return {**result, "changed": False, "msg": f"{path} already holds {where}"}
    if module.check_mode:
        return {**result, "changed": True, "msg": f"would download {where} to {path}"}
    if isinstance(store, DirectoryStore):
        store.copy_out(key, path, sha256=expected, size=size, read_back=read_back)
        return {**result, "changed": True, "msg": f"copied {where} to {path} ({size} bytes)"}
    download_snapshot(store, key, path, sha256=expected, size=size, read_back=read_back)
    return {**result, "changed": True, "msg": f"downloaded {where} to {path} ({size} bytes)"}


def restore_spec(params: dict[str, Any], sha256: str) -> RestoreSpec:
    missing = [k for k in ("data_dir", "name", "initial_advertise_peer_urls") if not params[k]]
    if missing:
        raise EtcdInputError(f"state=restored needs {', '.join(missing)}")
    if params["bump_revision"] < 0:
        raise EtcdInputError("bump_revision must be 0 or more")
    peer_urls = ",".join(params["initial_advertise_peer_urls"])
    return RestoreSpec(
        snapshot_sha256=sha256,
        name=params["name"],
        initial_cluster=params["initial_cluster"] or f"{params['name']}={peer_urls}",
        initial_cluster_token=params["initial_cluster_token"] or f"restore-{sha256[:16]}",
        initial_advertise_peer_urls=peer_urls,
        bump_revision=params["bump_revision"],
    )


def restored(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    if not (params["etcdutl"] or params["bin_dir"]):
        raise EtcdInputError("state=restored needs etcdutl or bin_dir (the target version's)")
    tool = find_tool(params["etcdutl"], params["bin_dir"])
    fetched: dict[str, Any] = {}
    if params["s3"] or params["directory"]:
        fetched = fetch(module, read_back=True)
        if module.check_mode and fetched["changed"]:
            restore_spec(params, fetched["sha256"])  # refuse bad input in check mode too
            return {
                **fetched,
                "data_dir": params["data_dir"],
                "msg": f"would download {fetched['key']} to {params['path']} and restore it "
                f"into {params['data_dir']}",
            }
    snapshot = verify_file(params["path"])
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
    command = tool.restore_command(
        snapshot.path,
        data_dir,
        name=spec.name,
        initial_cluster=spec.initial_cluster,
        initial_cluster_token=spec.initial_cluster_token,
        initial_advertise_peer_urls=spec.initial_advertise_peer_urls,
        bump_revision=spec.bump_revision,
    )
    if module.check_mode:
        return {**result, "changed": True, "command": command, "msg": f"would restore {data_dir}"}
    status = tool.status(snapshot.path)
    result["revision"] = int(status["revision"])
    result["snapshot_status"] = status
    result["command"] = restore(tool, snapshot.path, data_dir, spec)
    return {**result, "changed": True, "msg": f"restored {snapshot.path} into {data_dir}"}


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_together=connection_required_together(),
        mutually_exclusive=[["etcdutl", "bin_dir"], ["key", "prefix"], ["s3", "directory"]],
        supports_check_mode=True,
    )
    state = module.params["state"]
    try:
        check_combination(module.params)
        if state == "saved":
            result = save(module)
        elif state == "fetched":
            result = fetch(module)
        else:
            result = restored(module)
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
