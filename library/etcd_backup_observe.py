#!/usr/bin/python
"""Ansible module: one read-only look at what an EtcdBackup's reconcile decides on."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_backup_observe
short_description: Read what the operator's side of an EtcdBackup decides on, in one go
description:
  - Lists the Jobs and Pods labelled C(etcd.runbook.io/backup=<name>) in O(namespace), and
    reads the CronJob named O(name), the RoleBinding C(etcd-backup-<name>) and, after those,
    the EtcdBackup's status.
  - With O(cluster), O(credentials_secret) or O(claim), says whether that EtcdCluster and
    claim exist (with the cluster's C(spec.tls) and the claim's labels) and which keys that
    Secret holds. The Secret's values never leave the module.
  - With O(own_pod), returns the image that Pod's container runs (the operator's own, which
    the backup Jobs run too).
  - Never changes anything; runs the same in check mode.
version_added: "0.3.0"
author: etcd runbook operator maintainers
extends_documentation_fragment:
  - etcd_kube
  - etcd_own_pod
  - etcd_own_pod.timeout
options:
  namespace:
    description: Namespace of the EtcdBackup.
    type: str
    required: true
  name:
    description: Name of the EtcdBackup.
    type: str
    required: true
  cluster:
    description: An EtcdCluster name to look for in O(namespace).
    type: str
  credentials_secret:
    description: A Secret in O(namespace) whose key names to return.
    type: str
  claim:
    description: A PersistentVolumeClaim name to look for in O(namespace).
    type: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Look at a backup's Jobs and what its spec names
  etcd_backup_observe:
    namespace: prod
    name: nightly
    cluster: example
    credentials_secret: s3-credentials
  register: seen
"""

RETURN = r"""
jobs:
  description: The backup's Jobs.
  returned: success
  type: list
  elements: dict
  sample:
    - apiVersion: batch/v1
      kind: Job
      metadata:
        name: nightly-29384730
        namespace: prod
        labels:
          etcd.runbook.io/backup: nightly
        ownerReferences:
        - apiVersion: etcd.runbook.io/v1alpha1
          kind: EtcdBackup
          name: nightly
          uid: 0d4c5f0e-8a53-4b57-9d1a-2f4d3c1b0a99
          controller: true
          blockOwnerDeletion: true
      status:
        succeeded: 1
        startTime: '2026-11-27T03:00:02Z'
        completionTime: '2026-11-27T03:00:19Z'
pods:
  description: The Pods of the backup's Jobs.
  returned: success
  type: list
  elements: dict
  sample:
    - apiVersion: v1
      kind: Pod
      metadata:
        name: nightly-29384730-x7k2p
        namespace: prod
        labels:
          etcd.runbook.io/backup: nightly
          job-name: nightly-29384730
      status:
        phase: Succeeded
        containerStatuses:
        - name: backup
          state:
            terminated:
              exitCode: 0
              reason: Completed
cronjob:
  description: The CronJob named O(name), or null.
  returned: success
  type: dict
  sample:
    apiVersion: batch/v1
    kind: CronJob
    metadata:
      name: nightly
      namespace: prod
      ownerReferences:
      - apiVersion: etcd.runbook.io/v1alpha1
        kind: EtcdBackup
        name: nightly
        uid: 0d4c5f0e-8a53-4b57-9d1a-2f4d3c1b0a99
        controller: true
        blockOwnerDeletion: true
    spec:
      schedule: 0 3 * * *
      suspend: false
    status:
      lastScheduleTime: '2026-11-27T03:00:00Z'
status:
  description: The EtcdBackup's status, read after its Jobs (so it holds the snapshot of every
    Job listed as finished); null when the EtcdBackup is gone or has no status yet.
  returned: success
  type: dict
  sample:
    phase: Scheduled
    observedGeneration: 2
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
    lastCheck:
      time: '2026-11-27T04:00:11Z'
      location: s3://etcd-backups/prod/example/nightly/20261127T030004Z-rev48210.db at https://s3.example.com
      result: Found
cluster_found:
  description: Whether O(cluster) exists; null without O(cluster).
  returned: success
  type: bool
  sample: true
cluster:
  description: Of O(cluster), C(metadata.name) and C(spec.tls) (which TLS Secrets its members
    use); null when it does not exist or was not asked for.
  returned: success
  type: dict
  sample:
    metadata:
      name: example
    spec:
      tls:
        enabled: true
binding:
  description: The RoleBinding C(etcd-backup-<name>), or null.
  returned: success
  type: dict
  sample:
    apiVersion: rbac.authorization.k8s.io/v1
    kind: RoleBinding
    metadata:
      name: etcd-backup-nightly
      namespace: prod
    roleRef:
      apiGroup: rbac.authorization.k8s.io
      kind: Role
      name: etcd-backup-nightly
    subjects:
    - kind: ServiceAccount
      name: etcd-backup-nightly
      namespace: prod
secret_keys:
  description: The key names of O(credentials_secret), sorted; null when it does not exist
    or was not asked for.
  returned: success
  type: list
  elements: str
  sample: [accessKeyId, secretAccessKey]
claim_found:
  description: Whether O(claim) exists; null without O(claim).
  returned: success
  type: bool
  sample: true
claim_labels:
  description: The labels of O(claim) (its mark C(etcd.runbook.io/backup-destination=true)
    says it is meant for backups); null when it does not exist or was not asked for.
  returned: success
  type: dict
  sample:
    etcd.runbook.io/backup-destination: 'true'
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
    observe_backup,
    own_pod_argument_spec,
)


def argument_spec() -> dict[str, Any]:
    return {
        "namespace": {"type": "str", "required": True},
        "name": {"type": "str", "required": True},
        "cluster": {"type": "str"},
        "credentials_secret": {"type": "str", "no_log": False},
        "claim": {"type": "str"},
        **kube_argument_spec(),
        **own_pod_argument_spec(),
        **api_timeout_argument_spec(),
    }


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    try:
        reader = KubeReader(credentials(params["kubeconfig"], params["context"]), params["timeout"])
        facts = observe_backup(reader, params)
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    module.exit_json(changed=False, **facts)


if __name__ == "__main__":
    main()
