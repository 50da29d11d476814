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
claims:
  description: The claims of O(cluster)'s members.
  returned: success
  type: list
  elements: dict
first_claim:
  description: The claim O(first_claim), or null (missing, or not asked for).
  returned: success
  type: dict
job:
  description: The Job C(<name>-restore), or null; whoever made it.
  returned: success
  type: dict
pods:
  description: The Pods of the restore Job.
  returned: success
  type: list
  elements: dict
backup:
  description: The EtcdBackup O(backup), or null (missing, or not asked for).
  returned: success
  type: dict
secret_keys:
  description: The key names of the credentials Secret, sorted; null when it does not exist
    or none was named.
  returned: success
  type: list
  elements: str
source_claim_found:
  description: Whether the claim holding the snapshot exists; null when the source is not
    on a volume.
  returned: success
  type: bool
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
from etcd_runbook.observe.etcd_backup_observe import own_pod_argument_spec
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
