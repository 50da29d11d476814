#!/usr/bin/python
"""Ansible module: create, merge-patch or delete the Kubernetes objects a runbook owns, in one
process."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_kube_object
short_description: Create, merge-patch or delete the objects the runbooks own, or their status
description:
  - Writes or deletes each of O(objects) in turn, in one module process, over the API
    server's REST API (no API discovery, no C(kubernetes) package import). The runbooks'
    most frequent writes (a member's claim and Pod, their records and labels) cost a second
    or two each through kubernetes.core.k8s and a few hundredths of one here.
  - Only these kinds can be written (any other is refused before anything is sent) - C(v1)
    Pod, PersistentVolumeClaim, Service, Secret and ServiceAccount, C(policy/v1)
    PodDisruptionBudget, C(batch/v1) Job and CronJob, C(rbac.authorization.k8s.io/v1)
    Role and RoleBinding, and C(etcd.runbook.io/v1alpha1) EtcdCluster, EtcdBackup and EtcdRestore.
  - Writes only what the run owns. An object that does not exist is created; one that exists
    is written or deleted only when its controller ownerReference has the uid of the
    resource the run acts for (the uid of the object's own controller ownerReference as
    given, else O(owner.uid)). A PersistentVolumeClaim or an EtcdCluster without any
    controller (the runbooks make member claims and restored clusters so) is the run's when
    it carries every label of O(owner.labels) and annotation of O(owner.annotations).
    The resource the run acts for itself (its uid is O(owner.uid)) is the run's too.
    Anything else fails the task with RV(reason) V(NameTaken), naming the object and its
    owner, before anything is written (every object is read and checked first). An existing
    object's ownerReferences are never written.
  - Every patch or deletion of an object read carries its uid as a precondition, so an
    object deleted and made again under the same name meanwhile is never the one changed.
  - O(state=status) writes only the status subresource, of EtcdBackup and EtcdRestore (the
    resource the run acts for itself; no ownership applies).
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
        C(metadata.namespace). With O(state=patched), only the fields to set. With
        O(state=absent), the labels and annotations given are written before the deletion
        (a mark saying who deleted it), and with O(selector) the name may be left out.
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
        V(absent) deletes the objects that exist; one already gone is no change.
    type: str
    choices: [present, created, patched, status, absent]
    default: present
  owner:
    description:
      - The resource the run acts for. Objects whose own C(ownerReferences) name a
        controller need nothing here; patches, deletions and objects made without a
        controller do.
    type: dict
    suboptions:
      uid:
        description: Its uid; an existing object is the run's when its controller
          ownerReference has this uid.
        type: str
      labels:
        description: Labels a PersistentVolumeClaim or EtcdCluster without a controller
          must carry, every one, to be the run's.
        type: dict
      annotations:
        description: Annotations such an object must carry, every one, to be the run's.
        type: dict
  selector:
    description:
      - With O(state=absent), a label selector. An object given without C(metadata.name)
        stands for every object of its kind and namespace the selector matches; of those,
        the ones that are not the run's are left, and returned in RV(kept). Never deletes
        by the selector alone.
    type: str
  force:
    description:
      - With O(state=absent), the names of objects deleted at once (grace period 0) - Pods
        on a node that is gone, which no kubelet would confirm gone.
    type: list
    elements: str
    default: []
  wait_timeout:
    description:
      - With O(state=absent), seconds to wait after each deletion until the object is gone
        (one made since under the same name is another); 0 does not wait. Fails with
        RV(reason) V(Timeout) when it is still there.
    type: float
    default: 0
  timeout:
    description: Seconds each API request may take.
    type: float
    default: 30
"""

EXAMPLES = r"""
- name: Create a member's claim unless it exists (and is this cluster's)
  etcd_kube_object:
    owner:
      labels: {app.kubernetes.io/name: etcd, etcd.runbook.io/cluster: example}
    objects:
      - "{{ claim }}"

- name: Label two Pods of the cluster
  etcd_kube_object:
    state: patched
    owner:
      uid: "{{ cluster.metadata.uid }}"
    objects:
      - apiVersion: v1
        kind: Pod
        metadata: {name: example-0, namespace: default, labels: {a: "1"}}
      - apiVersion: v1
        kind: Pod
        metadata: {name: example-1, namespace: default, labels: {a: "1"}}

- name: Delete a member Pod, marked as the runbook's deletion, and wait until it is gone
  etcd_kube_object:
    state: absent
    owner:
      uid: "{{ cluster.metadata.uid }}"
    wait_timeout: 120
    objects:
      - apiVersion: v1
        kind: Pod
        metadata:
          name: example-2
          namespace: default
          annotations: {etcd.runbook.io/deleted-by-runbook: roll}

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
    nothing changed; in check mode, as it would be), in the order of O(objects). With
    O(state=absent), the objects deleted (in check mode, that would be), as they were.
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
kept:
  description: With O(state=absent) and O(selector), the objects the selector matched that
    are not the run's, left as they are - C(kind), C(name) and C(why).
  returned: success and O(state=absent)
  type: list
  elements: dict
  sample:
    - kind: Pod
      name: example-9
      why: its controller is EtcdCluster other (uid 9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d)
reason:
  description: A short word for the failure (V(NameTaken), V(Forbidden), V(NotFound),
    V(Conflict), V(Timeout), ...).
  returned: failed
  type: str
  sample: NameTaken
object:
  description: With RV(reason=NameTaken), the object that is not the run's - C(kind),
    C(namespace) and C(name).
  returned: failed with NameTaken
  type: dict
  sample:
    kind: Service
    namespace: prod
    name: example
owner:
  description: With RV(reason=NameTaken), who controls that object, in words.
  returned: failed with NameTaken
  type: str
  sample: Deployment other-app (uid 1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9)
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.clients.etcd_kube import KubeReader, credentials, kube_argument_spec
from etcd_runbook.operations.etcd_kube_objects import delete_objects, put_objects


def argument_spec() -> dict[str, Any]:
    return {
        "objects": {"type": "list", "elements": "dict", "required": True},
        "state": {
            "type": "str",
            "choices": ["present", "created", "patched", "status", "absent"],
            "default": "present",
        },
        "owner": {
            "type": "dict",
            "options": {
                "uid": {"type": "str"},
                "labels": {"type": "dict"},
                "annotations": {"type": "dict"},
            },
        },
        "selector": {"type": "str"},
        "force": {"type": "list", "elements": "str", "default": []},
        "wait_timeout": {"type": "float", "default": 0},
        **kube_argument_spec(),
        "timeout": {"type": "float", "default": 30},
    }


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    owner = {k: v for k, v in (params["owner"] or {}).items() if v}
    try:
        client = KubeReader(credentials(params["kubeconfig"], params["context"]), params["timeout"])
        if params["state"] == "absent":
            result = delete_objects(
                client,
                params["objects"],
                module.check_mode,
                owner,
                selector=params["selector"] or "",
                force=params["force"],
                wait_timeout=params["wait_timeout"],
            )
        else:
            result = put_objects(
                client, params["objects"], params["state"], module.check_mode, owner
            )
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    if not module._diff:
        result.pop("diff")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
