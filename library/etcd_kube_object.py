#!/usr/bin/python
"""Ansible module: create or merge-patch the Kubernetes objects a runbook writes, in one process."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_kube_object
short_description: Create or merge-patch the objects the runbooks write, or their status
description:
  - Writes each of O(objects) in turn, in one module process, over the API server's REST
    API (no API discovery, no C(kubernetes) package import). The runbooks' most frequent
    writes (a member's claim and Pod, their records and labels) cost a second or two each
    through kubernetes.core.k8s and a few hundredths of one here.
  - Only these kinds can be written (any other is refused before anything is sent) - C(v1)
    Pod, PersistentVolumeClaim, Service, Secret and ServiceAccount, C(policy/v1)
    PodDisruptionBudget, C(batch/v1) Job and CronJob, C(rbac.authorization.k8s.io/v1)
    Role and RoleBinding, and C(etcd.runbook.io/v1alpha1) EtcdCluster, EtcdBackup and EtcdRestore.
  - O(state=status) writes only the status subresource, of EtcdBackup and EtcdRestore.
  - An object is written only when it would change (every field it gives is already so, list
    items compared item by item); RV(changed) is that comparison. In check mode nothing is
    sent but the reads, and RV(objects) is what the objects would be.
version_added: "0.2.0"
author: etcd runbook operator maintainers
extends_documentation_fragment:
  - etcd_kube
options:
  objects:
    description:
      - The objects, each with C(apiVersion), C(kind), C(metadata.name) and
        C(metadata.namespace). With O(state=patched), only the fields to set.
    type: list
    elements: dict
    required: true
  state:
    description:
      - V(present) creates an object that does not exist, and merge-patches one that does
        with the fields given. V(created) creates an object that does not exist and leaves
        one that does as it is. V(patched) merge-patches objects that must exist; a missing
        one fails the task. V(status) merge-patches the C(status) of objects that must
        exist, through their status subresource; everything but C(status) is ignored.
    type: str
    choices: [present, created, patched, status]
    default: present
  timeout:
    description: Seconds each API request may take.
    type: float
    default: 30
"""

EXAMPLES = r"""
- name: Create a member's claim unless it exists
  etcd_kube_object:
    objects:
      - "{{ claim }}"

- name: Label two Pods
  etcd_kube_object:
    state: patched
    objects:
      - apiVersion: v1
        kind: Pod
        metadata: {name: example-0, namespace: default, labels: {a: "1"}}
      - apiVersion: v1
        kind: Pod
        metadata: {name: example-1, namespace: default, labels: {a: "1"}}

- name: Record a backup's newest snapshot in its status
  etcd_kube_object:
    state: status
    objects:
      - apiVersion: etcd.runbook.io/v1alpha1
        kind: EtcdBackup
        metadata: {name: nightly, namespace: default}
        status:
          lastSnapshot: {location: "s3://backups/default/example/20261124T030000Z-rev42.db"}
"""

RETURN = r"""
objects:
  description: Each object as the API server answered after the write (or read it, when
    nothing changed; in check mode, as it would be), in the order of O(objects).
  returned: success
  type: list
  elements: dict
reason:
  description: A short word for the failure (for example V(Forbidden), V(NotFound)).
  returned: failed
  type: str
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.etcd_errors import EtcdModuleError
from ansible.module_utils.etcd_kube import KubeReader, credentials, kube_argument_spec
from ansible.module_utils.etcd_kube_objects import put_objects


def argument_spec() -> dict[str, Any]:
    return {
        "objects": {"type": "list", "elements": "dict", "required": True},
        "state": {
            "type": "str",
            "choices": ["present", "created", "patched", "status"],
            "default": "present",
        },
        **kube_argument_spec(),
        "timeout": {"type": "float", "default": 30},
    }


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    try:
        client = KubeReader(credentials(params["kubeconfig"], params["context"]), params["timeout"])
        result = put_objects(client, params["objects"], params["state"], module.check_mode)
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    if not module._diff:
        result.pop("diff")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
