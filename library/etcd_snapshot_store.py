#!/usr/bin/python
"""Ansible module: list the snapshots under a prefix of an S3-compatible store or a directory,
or delete some."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_snapshot_store
short_description: List etcd snapshots in an S3-compatible store or a directory, or delete some
description:
  - O(state=listed) lists the snapshots under O(prefix) (the objects
    M(etcd_snapshot) saved there), newest first, each with what its manifest records and
    whether it is verified (a manifest records its size and sha256). Nothing changes.
  - O(state=absent) deletes the snapshots named in O(keys), each with its manifest (the
    manifest first, so an interrupted deletion leaves an unverified snapshot rather than a
    manifest vouching for a missing one). A key that is not there is nothing to do.
  - The newest verified snapshot under O(prefix) is never deleted; asking for it is refused
    and nothing is deleted. Retention decides what to prune (the etcd_backup_plan filter's
    C(etcd_backup_prune)); this module carries it out.
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
      - V(listed) only lists; V(absent) deletes O(keys).
    type: str
    choices: [listed, absent]
    default: listed
  prefix:
    description:
      - The key prefix the snapshots live under (one cluster's, for example
        C(backups/prod/etcd/)). Listing is recursive. Every key in O(keys) must start with it.
    type: str
    required: true
  keys:
    description:
      - With O(state=absent), the object keys of the snapshots to delete (not their
        manifests, which go with them).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
notes:
  - The listing reads one manifest per snapshot; keep one cluster's snapshots under a prefix
    of their own.
"""

EXAMPLES = r"""
- name: List one cluster's snapshots
  etcd_snapshot_store:
    prefix: backups/prod/etcd/
    s3:
      endpoint: https://s3.example.com
      bucket: etcd-backups
      path_style: true
  register: listing

- name: List the snapshots on a mounted volume
  etcd_snapshot_store:
    prefix: prod/etcd/
    directory: /backup
  register: on_volume

- name: Delete what retention prunes
  etcd_snapshot_store:
    state: absent
    prefix: backups/prod/etcd/
    keys: "{{ (listing.snapshots | etcd_backup_prune({'keep': 7}, now, saved.key)).prune
              | map(attribute='key') }}"
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
      C(etcdVersion), C(clusterID), C(member) and C(duration).
  returned: always
  type: list
  elements: dict
orphans:
  description: Manifests under O(prefix) whose snapshot is gone (delete them by the
    snapshot's key, without the C(.json)).
  returned: always
  type: list
  elements: str
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
    V(S3Unreachable), V(VolumeMissing), V(VolumeNotWritable), V(Refused), V(InvalidInput)).
  returned: failed
  type: str
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.etcd_errors import EtcdInputError, EtcdModuleError, EtcdRefusedError
from ansible.module_utils.etcd_s3 import S3Params, SnapshotStore, s3_argument_spec
from ansible.module_utils.etcd_snapshot_catalog import SnapshotCatalog, manifest_key
from ansible.module_utils.etcd_snapshot_dir import DirectoryStore


def argument_spec() -> dict[str, Any]:
    return {
        "s3": s3_argument_spec(),
        "directory": {"type": "path"},
        "state": {"type": "str", "choices": ["listed", "absent"], "default": "listed"},
        "prefix": {"type": "str", "required": True},
        "keys": {"type": "list", "elements": "str", "default": [], "no_log": False},
    }


def deletions(listing: dict[str, Any], keys: list[str], prefix: str) -> list[str]:
    """The objects to delete for `keys` (manifest first, then snapshot), refusing a key
    outside the prefix and the newest verified snapshot."""
    outside = [k for k in keys if not k.startswith(prefix)]
    if outside:
        raise EtcdInputError(f"keys outside prefix {prefix!r}: {', '.join(outside)}")
    snapshots = {s["key"]: s for s in listing["snapshots"]}
    newest = next((s for s in listing["snapshots"] if s["verified"]), None)
    if newest is not None and newest["key"] in keys:
        raise EtcdRefusedError(
            f"refusing to delete {newest['key']}: it is the newest verified snapshot under "
            f"{prefix} (retention never deletes it); nothing was deleted"
        )
    doomed: list[str] = []
    for key in dict.fromkeys(keys):
        if manifest_key(key) in listing["orphans"] or snapshots.get(key, {}).get("manifest"):
            doomed.append(manifest_key(key))
        if key in snapshots:
            doomed.append(key)
    return doomed


def run(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    store: SnapshotCatalog = (
        SnapshotStore(S3Params.from_option(params["s3"]))
        if params["s3"]
        else DirectoryStore(params["directory"])
    )
    prefix = params["prefix"]
    listing = store.snapshots(prefix)
    if params["state"] == "listed":
        if params["keys"]:
            raise EtcdInputError("keys is only used with state=absent")
        count = len(listing["snapshots"])
        verified = sum(1 for s in listing["snapshots"] if s["verified"])
        return {
            "changed": False,
            **listing,
            "msg": f"{count} snapshots under {store.where(prefix)}, {verified} verified",
        }
    doomed = deletions(listing, params["keys"], prefix)
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
        **store.snapshots(prefix),
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
