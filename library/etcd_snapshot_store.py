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
  sample:
    - location: prod/example/nightly/20261127T030004Z-rev48210.db
      key: prod/example/nightly/20261127T030004Z-rev48210.db
      size: 25485344
      time: '2026-11-27T03:00:04Z'
      sha256: 790bb9769eeec42fb3b47499fd224a6433e5c02c2b00cae50ebdddc14ec1be75
      verified: true
      manifest: true
      revision: 48210
      etcdVersion: 3.6.16
      clusterID: cdf818194e3a8c32
      member:
        name: example-0
        id: 292c728c0145c718
      duration: 4.52
      backup:
        namespace: prod
        name: nightly
        uid: 0d4c5f0e-8a53-4b57-9d1a-2f4d3c1b0a99
orphans:
  description: Manifests under O(prefix) whose snapshot is gone.
  returned: O(state=listed) or O(state=absent)
  type: list
  elements: str
  sample: [prod/example/nightly/20261120T030002Z-rev40917.db.json]
checked:
  description: For each of O(keys), C(key), C(found) (the object is there), C(verified) (its
    manifest is there and matches it), C(sha256) and C(size) (when found) and C(why) (what is
    missing or wrong; empty when verified).
  returned: O(state=checked)
  type: list
  elements: dict
  sample:
    - key: prod/example/nightly/20261127T030004Z-rev48210.db
      found: true
      verified: true
      sha256: 790bb9769eeec42fb3b47499fd224a6433e5c02c2b00cae50ebdddc14ec1be75
      size: 25485344
      why: ''
    - key: prod/example/nightly/20261126T030003Z-rev47388.db
      found: false
      verified: false
      sha256: ''
      size: 0
      why: the snapshot is gone
deleted:
  description: The keys deleted (in check mode, that would be), manifests included.
  returned: O(state=absent)
  type: list
  elements: str
  sample:
    - prod/example/nightly/20261120T030002Z-rev40917.db.json
    - prod/example/nightly/20261120T030002Z-rev40917.db
msg:
  description: What was done.
  returned: always
  type: str
  sample: 2 snapshots under s3://etcd-backups/prod/example/nightly/ at https://s3.example.com,
    2 verified
reason:
  description: A short word for the failure (V(S3AuthFailed), V(S3BucketMissing),
    V(S3InvalidResponse), V(S3Unreachable), V(VolumeMissing), V(VolumeNotWritable),
    V(Refused), V(InvalidInput)).
  returned: failed
  type: str
  sample: Refused
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.clients.etcd_s3 import s3_argument_spec
from etcd_runbook.operations.etcd_snapshot_store_states import snapshot_store_state


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


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        mutually_exclusive=[["s3", "directory"]],
        required_one_of=[["s3", "directory"]],
        supports_check_mode=True,
    )
    try:
        result = snapshot_store_state(module.params, module.check_mode, module._diff)
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
