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
pods:
  description: The Pods of the backup's Jobs.
  returned: success
  type: list
  elements: dict
cronjob:
  description: The CronJob named O(name), or null.
  returned: success
  type: dict
status:
  description: The EtcdBackup's status, read after its Jobs (so it holds the snapshot of every
    Job listed as finished); null when the EtcdBackup is gone or has no status yet.
  returned: success
  type: dict
cluster_found:
  description: Whether O(cluster) exists; null without O(cluster).
  returned: success
  type: bool
cluster:
  description: Of O(cluster), C(metadata.name) and C(spec.tls) (which TLS Secrets its members
    use); null when it does not exist or was not asked for.
  returned: success
  type: dict
binding:
  description: The RoleBinding C(etcd-backup-<name>), or null.
  returned: success
  type: dict
secret_keys:
  description: The key names of O(credentials_secret), sorted; null when it does not exist
    or was not asked for.
  returned: success
  type: list
  elements: str
claim_found:
  description: Whether O(claim) exists; null without O(claim).
  returned: success
  type: bool
claim_labels:
  description: The labels of O(claim) (its mark C(etcd.runbook.io/backup-destination=true)
    says it is meant for backups); null when it does not exist or was not asked for.
  returned: success
  type: dict
image:
  description: The image of O(own_pod)'s container; empty without O(own_pod).
  returned: success
  type: str
reason:
  description: A short word for the failure (for example V(Forbidden)).
  returned: failed
  type: str
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.clients.etcd_kube import KubeReader, credentials, kube_argument_spec
from etcd_runbook.observe.etcd_backup_observe import observe_backup, own_pod_argument_spec


def argument_spec() -> dict[str, Any]:
    return {
        "namespace": {"type": "str", "required": True},
        "name": {"type": "str", "required": True},
        "cluster": {"type": "str"},
        "credentials_secret": {"type": "str", "no_log": False},
        "claim": {"type": "str"},
        **kube_argument_spec(),
        **own_pod_argument_spec(),
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
