#!/usr/bin/python
"""Ansible module: save an etcd snapshot from a member (to a file or an S3-compatible store),
fetch one from the store (or copy a stopped member's database out), or restore one into a new
data dir."""

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
  - O(state=fetched) with O(member_data_dir) copies a stopped member's own database
    (C(member/snap/db)) whole to O(path), read-only at the source, for a restore with the
    etcd tool's C(--skip-hash-check) (the database has no hash trailer). Its bbolt meta pages
    are checked first (a foreign file, or one shorter than the pages they count, is refused
    before a byte is copied); the file appears atomically. When O(path) already holds the same
    bytes (the same sha256), nothing changes. A data dir that a running etcd holds (its WAL
    files locked) is refused.
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
  - O(state=restored) with O(member_data_dir) restores a stopped member's own database (the
    newest data a majority's loss left) as the snapshot. It is copied to O(path), read-only
    at the source, walked whole by the tool's C(snapshot status), then restored with
    C(--skip-hash-check) (a member's database has no hash trailer). A data dir that a running
    etcd holds (its WAL files locked) is refused.
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
        V(fetched) downloads O(key) from O(s3) (or O(directory)) to O(path), or copies the
        database of O(member_data_dir) there; V(restored) restores O(path) (with O(s3), first
        fetched from O(key); with O(member_data_dir), first copied) into O(data_dir).
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
  member_data_dir:
    description:
      - The data dir (its etcd C(--data-dir)) of a stopped member whose own database is the
        snapshot. O(state=fetched) copies it to O(path); O(state=restored) copies it to
        O(path), then restores it. Never written to.
      - Not with O(state=saved), nor with O(s3), O(directory), O(key), O(prefix) or O(sha256).
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

- name: Recover a cluster from its stopped survivor's own database, into a new data dir
  etcd_snapshot:
    state: restored
    member_data_dir: /var/lib/etcd/survivor
    path: /var/lib/etcd-recover/survivor.db
    data_dir: /var/lib/etcd/recovered
    name: etcd-0
    initial_advertise_peer_urls: ["https://etcd-0.etcd.prod.svc:2380"]
    bin_dir: /usr/local/bin

- name: Copy a stopped survivor's own database out, for etcd's own restore to read
  etcd_snapshot:
    state: fetched
    member_data_dir: /var/lib/etcd/survivor
    path: /var/lib/etcd-recover/survivor.db

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
  sample: /backup/prod/example/nightly/20261127T030004Z-rev48210.db
key:
  description: The key of the snapshot in the store or directory.
  returned: with O(s3) or O(directory)
  type: str
  sample: prod/example/nightly/20261127T030004Z-rev48210.db
manifest:
  description: The snapshot's manifest, as written (O(state=saved)) or read.
  returned: with O(s3) or O(directory), when there is one
  type: dict
  sample:
    format: etcd.runbook.io/snapshot-manifest/v1
    key: prod/example/nightly/20261127T030004Z-rev48210.db
    sha256: 790bb9769eeec42fb3b47499fd224a6433e5c02c2b00cae50ebdddc14ec1be75
    size: 25485344
    revision: 48210
    etcdVersion: 3.6.16
    clusterID: cdf818194e3a8c32
    member:
      name: example-0
      id: 292c728c0145c718
    endpoint: https://example-0.example.prod.svc.cluster.local:2379
    time: '2026-11-27T03:00:04Z'
    duration: 4.52
    backup:
      namespace: prod
      name: nightly
      uid: 0d4c5f0e-8a53-4b57-9d1a-2f4d3c1b0a99
size:
  description: Size of the snapshot file in bytes (in check mode with O(state=saved), the
    member's current database size, which the snapshot will be close to).
  returned: always
  type: int
  sample: 25485344
sha256:
  description: sha256 of the whole snapshot file, as C(sha256sum) prints it.
  returned: when the file or object exists or was written
  type: str
  sample: 790bb9769eeec42fb3b47499fd224a6433e5c02c2b00cae50ebdddc14ec1be75
revision:
  description:
    - O(state=saved), the snapshot's revision (see the description for how exact it is).
    - O(state=restored), the revision in the snapshot before the bump, when the tool reports it.
  returned: when known
  type: int
  sample: 48210
member:
  description: The member snapshotted, as C(etcd_member) returns members.
  returned: O(state=saved) and the snapshot was taken (or would be)
  type: dict
  sample:
    id: 292c728c0145c718
    name: example-0
    peer_urls:
    - https://example-0.example.prod.svc.cluster.local:2380
    client_urls:
    - https://example-0.example.prod.svc.cluster.local:2379
    is_learner: false
endpoint:
  description: The URL the snapshot was streamed from.
  returned: O(state=saved) and the snapshot was taken (or would be)
  type: str
  sample: https://example-0.example.prod.svc.cluster.local:2379
duration:
  description: Seconds the stream took.
  returned: O(state=saved) and the snapshot was taken
  type: float
  sample: 4.52
snapshot_status:
  description: What C(snapshot status -w json) of O(etcdutl) reported.
  returned: when O(etcdutl) or O(bin_dir) was given and the file was read
  type: dict
  sample:
    hash: 1771075404
    revision: 48210
    totalKey: 1250
    totalSize: 25485312
    version: 3.6.0
data_dir:
  description: The restored data dir.
  returned: O(state=restored)
  type: str
  sample: /var/lib/etcd/data
restore:
  description: The restore settings (as recorded in the data dir's marker).
  returned: O(state=restored)
  type: dict
  sample:
    snapshot_sha256: 790bb9769eeec42fb3b47499fd224a6433e5c02c2b00cae50ebdddc14ec1be75
    name: example-0
    initial_cluster: example-0=https://example-0.example.prod.svc.cluster.local:2380
    initial_cluster_token: restore-790bb9769eeec42f
    initial_advertise_peer_urls: https://example-0.example.prod.svc.cluster.local:2380
    bump_revision: 1000000000
command:
  description: The restore command run (or that would run).
  returned: O(state=restored) and a restore was (or would be) done
  type: list
  elements: str
  sample:
    - /usr/local/bin/etcdutl
    - snapshot
    - restore
    - /snapshot/snapshot.db
    - --data-dir=/var/lib/etcd/data
    - --name=example-0
    - --initial-cluster=example-0=https://example-0.example.prod.svc.cluster.local:2380
    - --initial-cluster-token=restore-790bb9769eeec42f
    - --initial-advertise-peer-urls=https://example-0.example.prod.svc.cluster.local:2380
    - --bump-revision=1000000000
    - --mark-compacted
msg:
  description: What was done, or why nothing needed doing.
  returned: always
  type: str
  sample: saved a snapshot of example-0 (292c728c0145c718) to
    /backup/prod/example/nightly/20261127T030004Z-rev48210.db (25485344 bytes)
reason:
  description: A short word for the failure (for example V(SnapshotCorrupt), V(Refused),
    V(S3AuthFailed), V(S3BucketMissing), V(S3ObjectMissing), V(S3Unreachable),
    V(VolumeMissing), V(VolumeNotWritable), V(VolumeFull), V(SnapshotMissing)).
  returned: failed
  type: str
  sample: SnapshotCorrupt
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from etcd_runbook.clients.etcd_common import connection_argument_spec, connection_required_together
from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.clients.etcd_s3 import s3_argument_spec
from etcd_runbook.operations.etcd_snapshot_states import snapshot_state


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
        "member_data_dir": {"type": "path"},
        "name": {"type": "str"},
        "initial_advertise_peer_urls": {"type": "list", "elements": "str"},
        "initial_cluster": {"type": "str"},
        "initial_cluster_token": {"type": "str"},
        "bump_revision": {"type": "int", "default": 1_000_000_000},
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_together=connection_required_together(),
        mutually_exclusive=[["etcdutl", "bin_dir"], ["key", "prefix"], ["s3", "directory"]],
        supports_check_mode=True,
    )
    try:
        result = snapshot_state(module.params, module.check_mode)
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
