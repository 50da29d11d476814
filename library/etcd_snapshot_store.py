#!/usr/bin/python
"""Ansible module: list the snapshots under a prefix of an S3-compatible store or a directory,
check some, or delete some of one EtcdBackup's."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_snapshot_store
short_description: List, check or delete etcd snapshots in an S3-compatible store or a directory
description:
  - O(state=listed) lists the snapshots under O(prefix) (the objects
    M(etcd_snapshot) saved there), newest first, each with what its manifest records and
    whether it is verified (a manifest records its size and sha256). Nothing changes.
  - O(state=checked) says of each of O(keys) whether the snapshot and its manifest are still
    there and the manifest still verifies it. Nothing changes.
  - O(state=absent) deletes the snapshots named in O(keys), each with its manifest (the
    manifest first, so an interrupted deletion leaves an unverified snapshot rather than a
    manifest vouching for a missing one). A key that is not listed is nothing to do.
  - Only what O(owner) wrote is deleted. Each key must be a verified snapshot whose manifest
    names the EtcdBackup O(owner.name) and O(owner.uid) and the etcd cluster ID
    O(owner.cluster_id); any other key (another backup's snapshot, a re-created cluster's old
    one, a file without a manifest) is refused and nothing is deleted.
  - The newest of O(owner)'s verified snapshots under O(prefix) is never deleted; asking for it
    is refused and nothing is deleted. Retention decides what to prune (the etcd_backup_plan
    filter's C(etcd_backup_prune)); this module carries it out.
version_added: "0.1.0"
author: etcd runbook operator maintainers
extends_documentation_fragment:
  - etcd_s3
options:
  s3:
    description:
      - The store (see the suboptions). Exactly one of O(s3) and O(directory) is required.
    type: dict
  directory:
    description:
      - A directory holding snapshots laid out as in a store (a mounted volume, where
        M(etcd_snapshot) saved with O(directory)); O(prefix) and O(keys) are relative paths
        under it.
    type: path
  state:
    description:
      - V(listed) only lists; V(checked) checks O(keys); V(absent) deletes O(keys).
    type: str
    choices: [listed, checked, absent]
    default: listed
  prefix:
    description:
      - The key prefix the snapshots live under (one EtcdBackup's, for example
        C(backups/prod/etcd/nightly/)). Every key in O(keys) must start with it.
    type: str
    required: true
  recursive:
    description:
      - List what lies deeper than O(prefix) too. Unset, only the keys with no C(/) after
        O(prefix) are listed, as a store lists with its delimiter - one backup's snapshots,
        never another's that lives below them.
    type: bool
    default: false
  keys:
    description:
      - With O(state=absent), the object keys of the snapshots to delete (not their
        manifests, which go with them); with O(state=checked), the keys to check.
    type: list
    elements: str
    default: []
  owner:
    description:
      - Required with O(state=absent) - whose snapshots may be deleted.
    type: dict
    suboptions:
      name:
        description: The EtcdBackup's name, as its manifests record it.
        type: str
        required: true
      uid:
        description: The EtcdBackup's uid, as its manifests record it (empty for runs by hand
          without an EtcdBackup).
        type: str
        default: ""
      cluster_id:
        description: The etcd cluster ID the cluster has now; snapshots of another are never
          deleted.
        type: str
        required: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
notes:
  - The listing reads one manifest per snapshot; keep one backup's snapshots under a prefix
    of their own.
"""

EXAMPLES = r"""
- name: List one backup's snapshots
  etcd_snapshot_store:
    prefix: backups/prod/etcd/nightly/
    s3:
      endpoint: https://s3.example.com
      bucket: etcd-backups
      path_style: true
  register: listing

- name: List the snapshots on a mounted volume
  etcd_snapshot_store:
    prefix: prod/etcd/nightly/
    directory: /backup
  register: on_volume

- name: Check that the last snapshot and its manifest are still there
  etcd_snapshot_store:
    state: checked
    prefix: prod/etcd/nightly/
    keys: [prod/etcd/nightly/20260501T030000Z-rev42.db]
    directory: /backup
  register: checked

- name: Delete what retention prunes
  etcd_snapshot_store:
    state: absent
    prefix: backups/prod/etcd/nightly/
    keys: "{{ (listing.snapshots | etcd_backup_prune({'keep': 7}, now, saved.key, owner)).prune
              | map(attribute='key') }}"
    owner:
      name: nightly
      uid: 0d4c5f0e-8a53-4b57-9d1a-2f4d3c1b0a99
      cluster_id: 9a1cf0d7e7c2b8a1
    s3:
      endpoint: https://s3.example.com
      bucket: etcd-backups
      path_style: true
"""

RETURN = r"""
snapshots:
  description:
    - The snapshots under O(prefix), newest first (after a deletion, those left). Each has
      C(location) and C(key) (the object key), C(time) (the manifest's, else the object's
      last modification), C(size), C(sha256) (empty unless verified), C(verified),
      C(manifest) (whether one exists), and from the manifest C(revision),
      C(etcdVersion), C(clusterID), C(member), C(duration) and C(backup) (the EtcdBackup
      that wrote it - namespace, name, uid).
  returned: O(state=listed) or O(state=absent)
  type: list
  elements: dict
orphans:
  description: Manifests under O(prefix) whose snapshot is gone.
  returned: O(state=listed) or O(state=absent)
  type: list
  elements: str
checked:
  description: For each of O(keys), C(key), C(found) (the object is there), C(verified) (its
    manifest is there and matches it), C(sha256) and C(size) (when found) and C(why) (what is
    missing or wrong; empty when verified).
  returned: O(state=checked)
  type: list
  elements: dict
deleted:
  description: The keys deleted (in check mode, that would be), manifests included.
  returned: O(state=absent)
  type: list
  elements: str
msg:
  description: What was done.
  returned: always
  type: str
reason:
  description: A short word for the failure (V(S3AuthFailed), V(S3BucketMissing),
    V(S3InvalidResponse), V(S3Unreachable), V(VolumeMissing), V(VolumeNotWritable),
    V(Refused), V(InvalidInput)).
  returned: failed
  type: str
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError, EtcdRefusedError
from etcd_runbook.clients.etcd_s3 import S3Params, SnapshotStore, s3_argument_spec
from etcd_runbook.operations.etcd_snapshot_dir import DirectoryStore
from etcd_runbook.rules.etcd_snapshot_catalog import SnapshotCatalog, manifest_key, ownership


def argument_spec() -> dict[str, Any]:
    return {
        "s3": s3_argument_spec(),
        "directory": {"type": "path"},
        "state": {
            "type": "str",
            "choices": ["listed", "checked", "absent"],
            "default": "listed",
        },
        "prefix": {"type": "str", "required": True},
        "recursive": {"type": "bool", "default": False},
        "keys": {"type": "list", "elements": "str", "default": [], "no_log": False},
        "owner": {
            "type": "dict",
            "options": {
                "name": {"type": "str", "required": True},
                "uid": {"type": "str", "default": ""},
                "cluster_id": {"type": "str", "required": True},
            },
        },
    }


def deletions(
    listing: dict[str, Any], keys: list[str], prefix: str, owner: dict[str, Any]
) -> list[str]:
    """The objects to delete for `keys` (manifest first, then snapshot), refusing a key
    outside the prefix, a key that is not `owner`'s verified snapshot, and the newest of
    those."""
    outside = [k for k in keys if not k.startswith(prefix)]
    if outside:
        raise EtcdInputError(f"keys outside prefix {prefix!r}: {', '.join(outside)}")
    snapshots = {s["key"]: s for s in listing["snapshots"]}
    foreign = {k: why for k in keys if k in snapshots and (why := ownership(snapshots[k], owner))}
    if foreign:
        listed = "; ".join(f"{k}: {why}" for k, why in sorted(foreign.items()))
        raise EtcdRefusedError(
            f"refusing to delete what EtcdBackup {owner['name']} did not write for this "
            f"cluster ({listed}); nothing was deleted"
        )
    newest = next((s for s in listing["snapshots"] if not ownership(s, owner)), None)
    if newest is not None and newest["key"] in keys:
        raise EtcdRefusedError(
            f"refusing to delete {newest['key']}: it is the newest verified snapshot of "
            f"EtcdBackup {owner['name']} under {prefix} (retention never deletes it); nothing "
            "was deleted"
        )
    doomed: list[str] = []
    for key in dict.fromkeys(keys):
        if key in snapshots:
            doomed += [manifest_key(key), key]
    return doomed


def run(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    store: SnapshotCatalog = (
        SnapshotStore(S3Params.from_option(params["s3"]))
        if params["s3"]
        else DirectoryStore(params["directory"])
    )
    prefix, recursive = params["prefix"], params["recursive"]
    if params["state"] == "checked":
        outside = [k for k in params["keys"] if not k.startswith(prefix)]
        if outside:
            raise EtcdInputError(f"keys outside prefix {prefix!r}: {', '.join(outside)}")
        checked = [store.check(key) for key in params["keys"]]
        missing = [c["key"] for c in checked if not c["verified"]]
        return {
            "changed": False,
            "checked": checked,
            "msg": f"{len(checked) - len(missing)} of {len(checked)} verified"
            + (f"; not: {', '.join(missing)}" if missing else ""),
        }
    listing = store.snapshots(prefix, recursive)
    if params["state"] == "listed":
        if params["keys"]:
            raise EtcdInputError("keys is only used with state=absent or state=checked")
        count = len(listing["snapshots"])
        verified = sum(1 for s in listing["snapshots"] if s["verified"])
        return {
            "changed": False,
            **listing,
            "msg": f"{count} snapshots under {store.where(prefix)}, {verified} verified",
        }
    if not params["owner"]:
        raise EtcdInputError("state=absent needs owner: whose snapshots may be deleted")
    doomed = deletions(listing, params["keys"], prefix, params["owner"])
    before = sorted({s["key"] for s in listing["snapshots"]} | set(listing["orphans"]))
    after_keys = sorted(set(before) - set(doomed))
    result: dict[str, Any] = {"changed": bool(doomed), "deleted": doomed}
    if module._diff:
        result["diff"] = {
            "before": "\n".join(before) + "\n" if before else "",
            "after": "\n".join(after_keys) + "\n" if after_keys else "",
            "before_header": store.where(prefix),
            "after_header": store.where(prefix),
        }
    if not doomed:
        return {**result, **listing, "msg": "nothing to delete"}
    if module.check_mode:
        return {**result, **listing, "msg": f"would delete {len(doomed)} objects"}
    for key in doomed:
        store.remove(key)
    return {
        **result,
        **store.snapshots(prefix, recursive),
        "msg": f"deleted {len(doomed)} objects under {store.where(prefix)}",
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        mutually_exclusive=[["s3", "directory"]],
        required_one_of=[["s3", "directory"]],
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
