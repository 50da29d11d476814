#!/usr/bin/python
"""Ansible module: one read-only look at what an EtcdRestore's reconcile decides on."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_restore_observe
short_description: Read what the operator's side of an EtcdRestore decides on, in one go
description:
  - Reads the EtcdCluster named O(cluster), the claims labelled
    C(etcd.runbook.io/cluster=<cluster>), the Job C(<name>-restore) and the Pods labelled
    C(etcd.runbook.io/restore=<name>) in O(namespace). Which of them are the restore's own
    (by their controller's uid) is the plan's to decide.
  - With O(first_claim), reads that claim by name, whatever its labels (a claim of another
    app under the name of the new cluster's first member).
  - With O(backup), reads that EtcdBackup, and returns the key names of the credentials
    Secret its S3 destination names (or O(credentials_secret) when given). The Secret's
    values never leave the module.
  - Says whether the claim holding the snapshot exists (O(source_claim), else the claim of
    the EtcdBackup's volume destination).
  - With O(own_pod), returns the image that Pod's container runs (the operator's own, which
    the restore Job's first step runs too).
  - Never changes anything; runs the same in check mode.
version_added: "0.3.0"
author: etcd runbook operator maintainers
extends_documentation_fragment:
  - etcd_kube
  - etcd_own_pod
  - etcd_own_pod.timeout
options:
  namespace:
    description: Namespace of the EtcdRestore.
    type: str
    required: true
  name:
    description: Name of the EtcdRestore.
    type: str
    required: true
  cluster:
    description: Name of the EtcdCluster the restore creates.
    type: str
    required: true
  backup:
    description: An EtcdBackup in O(namespace) to read.
    type: str
  credentials_secret:
    description: A Secret in O(namespace) whose key names to return.
    type: str
  source_claim:
    description: A PersistentVolumeClaim in O(namespace) holding the snapshot.
    type: str
  first_claim:
    description: The name of the claim the restore writes (the new cluster's first member's).
    type: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Look at a restore's Job and at what its spec names
  etcd_restore_observe:
    namespace: prod
    name: from-nightly
    cluster: example-restored
    backup: nightly
  register: seen
"""

RETURN = r"""
cluster:
  description: The EtcdCluster O(cluster), or null.
  returned: success
  type: dict
  sample:
    apiVersion: etcd.runbook.io/v1alpha1
    kind: EtcdCluster
    metadata:
      name: example
      namespace: prod
      annotations:
        etcd.runbook.io/restore: from-nightly
    spec:
      size: 3
      version: 3.6.16
claims:
  description: The claims of O(cluster)'s members.
  returned: success
  type: list
  elements: dict
  sample:
    - apiVersion: v1
      kind: PersistentVolumeClaim
      metadata:
        name: example-0-data
        namespace: prod
        labels:
          app.kubernetes.io/name: etcd
          etcd.runbook.io/cluster: example
          app.kubernetes.io/instance: example
          app.kubernetes.io/managed-by: etcd-runbook-operator
          etcd.runbook.io/member: example-0
      spec:
        accessModes:
        - ReadWriteOnce
        resources:
          requests:
            storage: 8Gi
        volumeName: pvc-2c7e9d1a-5b3f-4a6e-8d0c-9f1e2a3b4c5d
      status:
        phase: Bound
first_claim:
  description: The claim O(first_claim), or null (missing, or not asked for).
  returned: success
  type: dict
  sample:
    apiVersion: v1
    kind: PersistentVolumeClaim
    metadata:
      name: example-0-data
      namespace: prod
      labels:
        app.kubernetes.io/name: etcd
        etcd.runbook.io/cluster: example
        app.kubernetes.io/instance: example
        app.kubernetes.io/managed-by: etcd-runbook-operator
        etcd.runbook.io/member: example-0
    spec:
      accessModes:
      - ReadWriteOnce
      resources:
        requests:
          storage: 8Gi
      volumeName: pvc-2c7e9d1a-5b3f-4a6e-8d0c-9f1e2a3b4c5d
    status:
      phase: Bound
job:
  description: The Job C(<name>-restore), or null; whoever made it.
  returned: success
  type: dict
  sample:
    apiVersion: batch/v1
    kind: Job
    metadata:
      name: from-nightly-restore
      namespace: prod
      labels:
        etcd.runbook.io/restore: from-nightly
      ownerReferences:
      - apiVersion: etcd.runbook.io/v1alpha1
        kind: EtcdRestore
        name: from-nightly
        uid: c3a9e1f2-6b4d-4e8a-8f1c-7d2e5a9b0c14
        controller: true
    status:
      succeeded: 1
      completionTime: '2026-11-27T05:12:40Z'
pods:
  description: The Pods of the restore Job.
  returned: success
  type: list
  elements: dict
  sample:
    - apiVersion: v1
      kind: Pod
      metadata:
        name: from-nightly-restore-5qz8w
        namespace: prod
        labels:
          etcd.runbook.io/restore: from-nightly
          job-name: from-nightly-restore
      status:
        phase: Succeeded
backup:
  description: The EtcdBackup O(backup), or null (missing, or not asked for).
  returned: success
  type: dict
  sample:
    apiVersion: etcd.runbook.io/v1alpha1
    kind: EtcdBackup
    metadata:
      name: nightly
      namespace: prod
      uid: 0d4c5f0e-8a53-4b57-9d1a-2f4d3c1b0a99
    spec:
      clusterName: example
      destination:
        s3:
          endpoint: https://s3.example.com
          bucket: etcd-backups
          credentialsSecret: etcd-backup-s3
    status:
      lastSnapshot:
        location: s3://etcd-backups/prod/example/nightly/20261127T030004Z-rev48210.db at https://s3.example.com
        time: '2026-11-27T03:00:04Z'
        revision: 48210
        size: 25485344
        sha256: 9f2c3b4a5d6e7f80112233445566778899aabbccddeeff00112233445566778a
        etcdVersion: 3.6.16
        clusterID: cdf818194e3a8c32
        member: example-1
        duration: 4.52s
secret_keys:
  description: The key names of the credentials Secret, sorted; null when it does not exist
    or none was named.
  returned: success
  type: list
  elements: str
  sample: [accessKeyId, secretAccessKey]
source_claim_found:
  description: Whether the claim holding the snapshot exists; null when the source is not
    on a volume.
  returned: success
  type: bool
  sample: true
image:
  description: The image of O(own_pod)'s container; empty without O(own_pod).
  returned: success
  type: str
  sample: localhost/etcd-runbook-operator:0.1.0
reason:
  description: A short word for the failure (for example V(Forbidden)).
  returned: failed
  type: str
  sample: Forbidden
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.clients.etcd_kube import KubeReader, credentials, kube_argument_spec
from etcd_runbook.observe.etcd_backup_observe import (
    api_timeout_argument_spec,
    own_pod_argument_spec,
)
from etcd_runbook.observe.etcd_restore_observe import observe_restore


def argument_spec() -> dict[str, Any]:
    return {
        "namespace": {"type": "str", "required": True},
        "name": {"type": "str", "required": True},
        "cluster": {"type": "str", "required": True},
        "backup": {"type": "str"},
        "credentials_secret": {"type": "str", "no_log": False},
        "source_claim": {"type": "str"},
        "first_claim": {"type": "str"},
        **kube_argument_spec(),
        **own_pod_argument_spec(),
        **api_timeout_argument_spec(),
    }


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    try:
        reader = KubeReader(credentials(params["kubeconfig"], params["context"]), params["timeout"])
        facts = observe_restore(reader, params)
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    module.exit_json(changed=False, **facts)


if __name__ == "__main__":
    main()
