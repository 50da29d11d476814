#!/usr/bin/python
"""Ansible module: one read-only look at an etcd cluster on Kubernetes and at etcd itself."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_cluster_observe
short_description: Read an etcd cluster's Kubernetes objects and etcd's own view in one go
description:
  - Lists the member Pods, PersistentVolumeClaims, Services and PodDisruptionBudgets that
    carry O(selector), and the Secrets that carry O(secret_selector), in O(namespace).
  - With O(recovery_selector), also lists the Jobs and Pods that carry it (a quorum
    recovery's), and fails (RV(reason) V(Forbidden)) when they may not be listed.
  - With O(own_pod), returns the image that Pod's container runs (the operator's own, which
    a recovery Job runs too).
  - With O(etcd.enabled), reaches every running member Pod (by the headless Service's DNS name,
    or through C(kubectl port-forward) with O(etcd.port_forward)) and returns what
    M(etcd_cluster_info) would, using the CA of the server Secret and the client pair of the
    client Secret.
  - No answer from etcd is not a failure; RV(info) is then empty and RV(info_error) says why.
  - With O(wait_for.member) or O(wait_for.members), asks those members for their own status
    twice a second, and looks at everything again once they answer, until etcd reports each
    of them healthy. Fails with every fact of the last look when O(wait_for.timeout) passes
    or O(wait_for.stop_file) appears, or at once when the scheduler finds no node for the Pod
    of one still awaited (or, with O(wait_for.stop_when_failing), the kubelet cannot run it).
  - With O(wait_for.pods_gone), first reads only the member Pods, four times a second, until
    none of the Pods it names is being deleted; then looks as usual. When some are still there
    once O(wait_for.timeout) has passed or O(wait_for.stop_file) appeared, it fails with every
    fact of the look. (A Pod being deleted on a lost node never goes, so leave it out.)
  - A running member Pod whose node this look saw gone or not Ready is never dialled.
  - Never changes anything; runs the same in check mode. RV(secrets) holds Secret data, so
    register it under C(no_log).
version_added: "0.2.0"
author: etcd runbook operator maintainers
extends_documentation_fragment:
  - etcd_kube
  - etcd_own_pod
options:
  namespace:
    description: Namespace of the cluster's objects.
    type: str
    required: true
  selector:
    description: Label selector of the member Pods, claims, Services and the budget.
    type: str
    required: true
  secret_selector:
    description: Label selector of the TLS Secrets; omitted, no Secret is read.
    type: str
  secret_names:
    description:
      - Read only these Secrets, each by name (a GET), keeping those that carry
        O(secret_selector), instead of listing the Secrets that carry it. For an account
        whose Role names the Secrets it may read (a backup Job's) and lists none.
    type: list
    elements: str
  backups:
    description: Also list the EtcdBackups of O(namespace) (RV(backups)).
    type: bool
    default: false
  recovery_selector:
    description:
      - Label selector of the cluster's quorum-recovery Jobs and their Pods
        (C(app.kubernetes.io/name=etcd-recovery,etcd.runbook.io/cluster=<cluster>)), listed
        as RV(recovery_jobs) and RV(recovery_pods).
      - Omitted or empty, neither is listed.
    type: str
  etcd:
    description: Whether and how to ask etcd.
    type: dict
    default: {}
    suboptions:
      enabled:
        description: Ask etcd.
        type: bool
        default: false
      tls:
        description: The members serve clients over TLS.
        type: bool
        default: false
      server_secret:
        description:
          - Secret (among those read) whose C(ca.crt) verifies the members.
          - When it is gone or lacks C(ca.crt), the C(ca.crt) of another Secret read stands in
            (O(etcd.client_secret) first, then the others in name order).
        type: str
      client_secret:
        description:
          - Secret (among those read) whose C(tls.crt) and C(tls.key) authenticate.
          - When it is gone or lacks them, the pair of the O(etcd.server_secret), else of
            another C(kubernetes.io/tls) Secret read (in name order), stands in.
        type: str
      dns_suffix:
        description: >-
          What follows a member Pod's name in its DNS name
          (C(<headless service>.<namespace>.svc.<domain>)); used without O(etcd.port_forward).
        type: str
      cluster_id:
        description: Only members of this cluster are trusted (see M(etcd_cluster_info)).
        type: str
      timeout:
        description: Seconds to wait for each etcd call.
        type: float
        default: 5
      port_forward:
        description: Reach the members through port-forwards kept by this script.
        type: dict
        suboptions:
          script:
            description: Path of the role's C(port_forward.py).
            type: path
            required: true
          state_dir:
            description: The run's port-forward directory; created (and returned) when empty.
            type: str
            default: ""
          kubectl:
            description: The kubectl to run.
            type: str
            default: kubectl
          max_seconds:
            description: A forward ends by itself after this long.
            type: int
            default: 3600
  wait_for:
    description: Look until these members are healthy, or until the named Pods are no longer
      being deleted.
    type: dict
    suboptions:
      member:
        description:
          - Member name. With O(etcd.dns_suffix), the member is the one whose peer URL is
            C(<scheme>://<member>.<dns_suffix>:2380), the whole URL, whatever name it gives
            itself; without, the member that calls itself so.
        type: str
      members:
        description: More member names, each waited for as O(wait_for.member) is.
        type: list
        elements: str
        default: []
      pods_gone:
        description: Member Pods to wait for, before the look, until none of them has a deletion
          timestamp.
        type: list
        elements: str
        default: []
      timeout:
        description: Seconds to keep looking.
        type: float
        required: true
      stop_when_failing:
        description:
          - Also end the wait at once, failing with every fact of the look and RV(reason)
            C(CannotRun), when the kubelet cannot run the etcd container of an awaited member
            (its image cannot be pulled, the container cannot be made, it ended in failure) or
            it has restarted since its Pod was made.
        type: bool
        default: false
      stop_file:
        description:
          - A file whose existence ends the wait early, with the facts of the last look and
            RV(reason) C(Stopped) (the runbooks pass the watcher's C(ERO_STOP_FILE), with which
            it asks a run to stop at its next task boundary).
          - Unset or empty, only O(wait_for.timeout) ends the wait.
        type: path
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Look at the cluster
  etcd_cluster_observe:
    namespace: prod
    selector: app.kubernetes.io/name=etcd,etcd.runbook.io/cluster=main
    secret_selector: app.kubernetes.io/name=etcd,etcd.runbook.io/cluster=main
    etcd:
      enabled: true
      tls: true
      server_secret: main-server-tls
      client_secret: main-client-tls
      dns_suffix: main.prod.svc.cluster.local
  register: seen
  no_log: true  # seen.secrets holds the Secrets' data
"""

RETURN = r"""
pods:
  description: The member Pods.
  returned: always
  type: list
  elements: dict
  sample:
    - apiVersion: v1
      kind: Pod
      metadata:
        name: example-0
        namespace: prod
        uid: 8b1f6c2d-4e3a-4f5b-9c7d-1a2b3c4d5e6f
        labels:
          app.kubernetes.io/name: etcd
          etcd.runbook.io/cluster: example
          app.kubernetes.io/instance: example
          app.kubernetes.io/managed-by: etcd-runbook-operator
          etcd.runbook.io/member: example-0
          etcd.runbook.io/version: 3.6.16
          etcd.runbook.io/voter: 'true'
        annotations:
          etcd.runbook.io/member-id: 8e9e05c52164694d
          etcd.runbook.io/cluster-id: cdf818194e3a8c32
        ownerReferences:
        - apiVersion: etcd.runbook.io/v1alpha1
          kind: EtcdCluster
          name: example
          uid: 5f0c2a5e-3d7b-4c1e-9a8f-2b6d4e1c7a90
          controller: true
          blockOwnerDeletion: true
      spec:
        hostname: example-0
        subdomain: example
        nodeName: node-1
      status:
        phase: Running
        podIP: 10.88.0.12
        conditions:
        - type: Ready
          status: 'True'
          lastTransitionTime: '2026-11-27T02:04:31Z'
claims:
  description: The member PersistentVolumeClaims.
  returned: always
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
services:
  description: The cluster's Services.
  returned: always
  type: list
  elements: dict
  sample:
    - apiVersion: v1
      kind: Service
      metadata:
        name: example
        namespace: prod
        labels:
          app.kubernetes.io/name: etcd
          etcd.runbook.io/cluster: example
          app.kubernetes.io/instance: example
          app.kubernetes.io/managed-by: etcd-runbook-operator
        ownerReferences:
        - apiVersion: etcd.runbook.io/v1alpha1
          kind: EtcdCluster
          name: example
          uid: 5f0c2a5e-3d7b-4c1e-9a8f-2b6d4e1c7a90
          controller: true
          blockOwnerDeletion: true
      spec:
        clusterIP: None
        publishNotReadyAddresses: true
        ports:
        - name: client
          port: 2379
        - name: peer
          port: 2380
budgets:
  description: The cluster's PodDisruptionBudgets.
  returned: always
  type: list
  elements: dict
  sample:
    - apiVersion: policy/v1
      kind: PodDisruptionBudget
      metadata:
        name: example
        namespace: prod
        ownerReferences:
        - apiVersion: etcd.runbook.io/v1alpha1
          kind: EtcdCluster
          name: example
          uid: 5f0c2a5e-3d7b-4c1e-9a8f-2b6d4e1c7a90
          controller: true
          blockOwnerDeletion: true
      spec:
        minAvailable: 2
      status:
        currentHealthy: 3
        desiredHealthy: 2
        disruptionsAllowed: 1
secrets:
  description: The TLS Secrets, data included.
  returned: always
  type: list
  elements: dict
  sample:
    - apiVersion: v1
      kind: Secret
      type: kubernetes.io/tls
      metadata:
        name: example-server-tls
        namespace: prod
        labels:
          etcd.runbook.io/tls-for: example
      data:
        tls.crt: LS0tLS1CRUdJTi...
        tls.key: LS0tLS1CRUdJTi...
        ca.crt: LS0tLS1CRUdJTi...
nodes:
  description: >-
    For each node a member Pod was placed on, and each node a volume in RV(volumes) may be
    mounted on, by name: whether it exists (V(found)), its Ready condition's status and
    transition time (V(ready), V(ready_since)), when its kubelet last renewed its Lease
    (V(renewed), the kubelet's clock), for how many seconds it has not (V(silent_for), on the
    API server's clock: its record of the renewal against its Date header; null when unknown)
    and when the API server answered (V(read_at)); null when Nodes cannot be read.
  returned: always
  type: dict
  sample:
    node-1:
      found: true
      ready: 'True'
      ready_since: '2026-11-26T22:41:07Z'
      renewed: '2026-11-27T02:09:58.412337Z'
      silent_for: 1.6
      read_at: '2026-11-27T02:10:00Z'
observed_at:
  description: >-
    When the look was taken (UTC, RFC 3339), on the operator's clock: compared only with times
    the runbook wrote itself (a rolled member's healthy-since mark), never with a node's.
  returned: always
  type: str
  sample: "2026-11-27T02:10:00Z"
volumes:
  description: >-
    By claim name, for the members whose Pod is missing, not placed, or on a node that is gone,
    not Ready or silent: where the claim's volume can be mounted. V(bound) false while no
    volume is bound; else V(pv), V(found), and for a volume found V(anywhere) (no node
    affinity) or V(nodes) (up to five Nodes its affinity admits, the Ready first) and
    V(pinned) (node names the affinity spells out). Null when Nodes or PersistentVolumes
    cannot be read.
  returned: always
  type: dict
  sample:
    example-2-data:
      bound: true
      pv: pvc-7a1e0c3f-2d4b-4e9a-b6c5-3f8d1e2a9b07
      found: true
      anywhere: false
      nodes:
      - node-2
      - node-3
      pinned:
      - node-2
      - node-3
backups:
  description: The EtcdBackups of O(namespace).
  returned: with O(backups)
  type: list
  elements: dict
  sample:
    - apiVersion: etcd.runbook.io/v1alpha1
      kind: EtcdBackup
      metadata:
        name: nightly
        namespace: prod
      spec:
        clusterName: example
        schedule: 0 3 * * *
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
recovery_jobs:
  description: The Jobs that carry O(recovery_selector); empty without it.
  returned: always
  type: list
  elements: dict
  sample:
    - apiVersion: batch/v1
      kind: Job
      metadata:
        name: example-recover-3f9a1c2b7d
        namespace: prod
        labels:
          app.kubernetes.io/name: etcd-recovery
          app.kubernetes.io/instance: example
          etcd.runbook.io/cluster: example
          etcd.runbook.io/recovery: 3f9a1c2b7d4e5f60
          app.kubernetes.io/managed-by: etcd-runbook-operator
        ownerReferences:
        - apiVersion: etcd.runbook.io/v1alpha1
          kind: EtcdCluster
          name: example
          uid: 5f0c2a5e-3d7b-4c1e-9a8f-2b6d4e1c7a90
          controller: true
          blockOwnerDeletion: true
      spec:
        backoffLimit: 0
        activeDeadlineSeconds: 3600
      status:
        active: 1
        startTime: '2026-11-27T02:12:05Z'
recovery_pods:
  description: The Pods that carry O(recovery_selector) (a recovery Job's); empty without it.
  returned: always
  type: list
  elements: dict
  sample:
    - apiVersion: v1
      kind: Pod
      metadata:
        name: example-recover-3f9a1c2b7d-q8v4n
        namespace: prod
        labels:
          app.kubernetes.io/name: etcd-recovery
          etcd.runbook.io/cluster: example
          etcd.runbook.io/recovery: 3f9a1c2b7d4e5f60
          job-name: example-recover-3f9a1c2b7d
      status:
        phase: Running
image:
  description: The image of O(own_pod)'s container; empty without O(own_pod).
  returned: always
  type: str
  sample: localhost/etcd-runbook-operator:0.1.0
endpoints:
  description: Member name to the client URL this look reached it at.
  returned: always
  type: dict
  sample:
    example-0: https://example-0.example.prod.svc.cluster.local:2379
addresses:
  description: >-
    The host name of each client URL in RV(endpoints) to its Pod's IP address, which this look
    connected to (TLS checked the host name); empty through port-forwards. Give it to the etcd
    modules as their O(etcd_member#module:addresses).
  returned: always
  type: dict
  sample:
    example-0.example.prod.svc.cluster.local: 10.88.0.12
forward_failed:
  description: Member name to why its port-forward could not be opened.
  returned: always
  type: dict
  sample:
    example-2: port-forward supervisor exited with 1
state_dir:
  description: The port-forward directory to close at the end of the run; empty without.
  returned: always
  type: str
  sample: /tmp/etcd-runbook-k3j9x2_q
info:
  description: >-
    What M(etcd_cluster_info) returns; empty when etcd was not asked or no member answered.
  returned: always
  type: dict
  sample:
    cluster_id: cdf818194e3a8c32
    cluster_version: 3.6.0
    members:
    - id: 8e9e05c52164694d
      name: example-0
      peer_urls:
      - https://example-0.example.prod.svc.cluster.local:2380
      client_urls:
      - https://example-0.example.prod.svc.cluster.local:2379
      is_learner: false
      healthy: true
    status:
    - endpoint: https://example-0.example.prod.svc.cluster.local:2379
      healthy: true
      member_id: 8e9e05c52164694d
      cluster_id: cdf818194e3a8c32
      version: 3.6.16
      db_size: 36864
      db_size_in_use: 28672
      leader: 8e9e05c52164694d
      raft_index: 58
      raft_applied_index: 58
      raft_term: 2
      revision: 41
      is_learner: false
      errors: []
    views:
    - endpoint: https://example-0.example.prod.svc.cluster.local:2379
      member_id: 8e9e05c52164694d
      cluster_id: cdf818194e3a8c32
      member_ids:
      - 8e9e05c52164694d
      linearizable: true
      errors: []
    leader:
      id: 8e9e05c52164694d
      name: example-0
    quorum:
      voters: 1
      healthy_voters: 1
      needed: 1
      ok: true
    healthy: true
    alarms: []
info_error:
  description: Why RV(info) is empty.
  returned: always
  type: str
  sample: no member Pod is running
reason:
  description: A short word for the failure (for example V(Forbidden), V(Timeout),
    V(Unschedulable), V(CannotRun), V(Stopped)).
  returned: failed
  type: str
  sample: Forbidden
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.clients.etcd_kube import kube_argument_spec
from etcd_runbook.observe.etcd_backup_observe import own_pod_argument_spec
from etcd_runbook.observe.etcd_observe import observe


def argument_spec() -> dict[str, Any]:
    forward = {
        "script": {"type": "path", "required": True},
        "state_dir": {"type": "str", "default": ""},
        "kubectl": {"type": "str", "default": "kubectl"},
        "max_seconds": {"type": "int", "default": 3600},
    }
    etcd = {
        "enabled": {"type": "bool", "default": False},
        "tls": {"type": "bool", "default": False},
        "server_secret": {"type": "str"},
        "client_secret": {"type": "str"},
        "dns_suffix": {"type": "str"},
        "cluster_id": {"type": "str"},
        "timeout": {"type": "float", "default": 5},
        "port_forward": {"type": "dict", "options": forward},
    }
    return {
        "namespace": {"type": "str", "required": True},
        "selector": {"type": "str", "required": True},
        "secret_selector": {"type": "str"},
        "secret_names": {"type": "list", "elements": "str", "no_log": False},
        "backups": {"type": "bool", "default": False},
        "recovery_selector": {"type": "str"},
        **kube_argument_spec(),
        **own_pod_argument_spec(),
        "etcd": {"type": "dict", "default": {}, "options": etcd},
        "wait_for": {
            "type": "dict",
            "options": {
                "member": {"type": "str"},
                "members": {"type": "list", "elements": "str", "default": []},
                "pods_gone": {"type": "list", "elements": "str", "default": []},
                "timeout": {"type": "float", "required": True},
                "stop_when_failing": {"type": "bool", "default": False},
                "stop_file": {"type": "path"},
            },
        },
    }


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    try:
        result = observe(module.params)
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    if result.get("wait_error"):
        reason = result.pop("wait_reason", "Timeout")
        module.fail_json(msg=result.pop("wait_error"), reason=reason, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
