#!/usr/bin/python
"""Ansible module: read-only view of an etcd cluster's members, health, leader and quorum."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_cluster_info
short_description: Members, per-member health, leader, quorum and alarms of an etcd cluster
description:
  - Asks every endpoint for its own member list (a view), takes the list most of them report
    (of O(cluster_id) when given), then asks every member for its status - through a given
    endpoint that answered as that member, else through the client URLs the member
    advertises - so the health of all members is known even when only one endpoint is given.
  - An endpoint that answers for another cluster ID is never trusted; its view is returned
    so the caller can fence it.
  - A member that does not answer is reported unhealthy (with the reason in its C(errors)),
    which is not a failure of the module; the module fails only when no endpoint answers the
    member list.
  - An endpoint that did not answer its status is asked nothing more while another one
    answered (its view carries only C(errors)), and the calls made through any one endpoint
    go first to those that answered; so a hung member costs the look one call timeout.
  - A member counts as healthy when it answers its status, reports no errors and knows a
    leader.
  - Never changes anything; runs the same in check mode.
version_added: "0.1.0"
author: etcd runbook operator maintainers
extends_documentation_fragment:
  - etcd_connection
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Read the cluster
  etcd_cluster_info:
    endpoints: ["https://etcd-0.etcd.prod.svc:2379"]
    ca_cert: /etc/etcd/pki/ca.crt
    client_cert: /etc/etcd/pki/client.crt
    client_key: /etc/etcd/pki/client.key
  register: etcd

- name: Stop when quorum is at risk
  ansible.builtin.assert:
    that: etcd.quorum.healthy_voters > etcd.quorum.needed
    fail_msg: "no failure tolerance left: {{ etcd.quorum }}"
"""

RETURN = r"""
cluster_id:
  description: Cluster ID as lowercase hex.
  returned: always
  type: str
  sample: cdf818194e3a8c32
cluster_version:
  description: The cluster version etcd settled on (from C(/version)); empty if unreadable.
  returned: always
  type: str
  sample: 3.5.0
members:
  description: The member list.
  returned: always
  type: list
  elements: dict
  sample:
    - id: 292c728c0145c718
      name: example-0
      peer_urls:
      - https://example-0.example.prod.svc.cluster.local:2380
      client_urls:
      - https://example-0.example.prod.svc.cluster.local:2379
      is_learner: false
      healthy: true
    - id: 976de8aec86c6d0c
      name: example-1
      peer_urls:
      - https://example-1.example.prod.svc.cluster.local:2380
      client_urls:
      - https://example-1.example.prod.svc.cluster.local:2379
      is_learner: false
      healthy: true
    - id: b9fa2fd1c659694d
      name: example-2
      peer_urls:
      - https://example-2.example.prod.svc.cluster.local:2380
      client_urls:
      - https://example-2.example.prod.svc.cluster.local:2379
      is_learner: false
      healthy: true
  contains:
    id:
      description: Member ID as lowercase hex, as C(etcdctl member list) prints it.
      type: str
      sample: 292c728c0145c718
    name:
      description: Member name; empty until the member has started.
      type: str
      sample: example-0
    peer_urls:
      description: Peer URLs.
      type: list
      elements: str
      sample: ['https://example-0.example.prod.svc.cluster.local:2380']
    client_urls:
      description: Client URLs; empty until the member has started.
      type: list
      elements: str
      sample: ['https://example-0.example.prod.svc.cluster.local:2379']
    is_learner:
      description: Whether the member is a learner.
      type: bool
      sample: false
    healthy:
      description: Whether the member answered as healthy.
      type: bool
      sample: true
status:
  description: One entry per endpoint asked (given endpoints, then members' own client URLs).
  returned: always
  type: list
  elements: dict
  sample:
    - endpoint: https://example-0.example.prod.svc.cluster.local:2379
      healthy: true
      member_id: 292c728c0145c718
      cluster_id: cdf818194e3a8c32
      version: 3.6.16
      db_size: 36864
      db_size_in_use: 28672
      leader: 976de8aec86c6d0c
      raft_index: 58
      raft_applied_index: 58
      raft_term: 2
      revision: 41
      is_learner: false
      errors: []
  contains:
    endpoint:
      description: The URL asked.
      type: str
      sample: https://example-0.example.prod.svc.cluster.local:2379
    healthy:
      description: >-
        Answered, a leader is known, and no error but a raised NOSPACE alarm (a member under
        NOSPACE still serves reads, deletes and maintenance; the alarm is in RV(alarms)).
      type: bool
      sample: true
    member_id:
      description: ID of the member that answered.
      type: str
      sample: 292c728c0145c718
    cluster_id:
      description: Cluster ID the member that answered belongs to.
      type: str
      sample: cdf818194e3a8c32
    version:
      description: etcd server version.
      type: str
      sample: 3.6.16
    db_size:
      description: Backend size in bytes.
      type: int
      sample: 36864
    db_size_in_use:
      description: Bytes of the backend in use (the rest is freed by defragmentation).
      type: int
      sample: 28672
    leader:
      description: The leader's ID as this member sees it.
      type: str
      sample: 976de8aec86c6d0c
    raft_index:
      description: Raft log index.
      type: int
      sample: 58
    raft_applied_index:
      description: Applied raft index (0 on etcd 3.4).
      type: int
      sample: 58
    raft_term:
      description: Raft term.
      type: int
      sample: 2
    revision:
      description: >-
        The store's revision this member has applied, answered without a quorum (a
        survivor's measure of what it holds).
      type: int
      sample: 41
    is_learner:
      description: Whether this member is a learner.
      type: bool
      sample: false
    errors:
      description: Errors the member reports, or why it did not answer.
      type: list
      elements: str
      sample:
        - 'cannot reach etcd at https://example-2.example.prod.svc.cluster.local:2379:
          connection refused (nothing listens there, or it is down) [gRPC: failed to connect
          to all addresses]'
views:
  description:
    - Each endpoint's own answer to the member list, to judge whether members agree.
    - Linearizable where the member could reach the leader, else from its local state
      (etcd 3.4 always answers from local state).
  returned: always
  type: list
  elements: dict
  sample:
    - endpoint: https://example-0.example.prod.svc.cluster.local:2379
      member_id: 292c728c0145c718
      cluster_id: cdf818194e3a8c32
      member_ids:
      - 292c728c0145c718
      - 976de8aec86c6d0c
      - b9fa2fd1c659694d
      linearizable: true
      errors: []
  contains:
    endpoint:
      description: The URL asked.
      type: str
      sample: https://example-0.example.prod.svc.cluster.local:2379
    member_id:
      description: ID of the member that answered; null when it did not.
      type: str
      sample: 292c728c0145c718
    cluster_id:
      description: Cluster ID it answered for; null when it did not answer.
      type: str
      sample: cdf818194e3a8c32
    member_ids:
      description: The member IDs it listed, sorted.
      type: list
      elements: str
      sample: [292c728c0145c718, 976de8aec86c6d0c, b9fa2fd1c659694d]
    linearizable:
      description: Whether the answer went through the leader.
      type: bool
      sample: true
    errors:
      description: Why it did not answer.
      type: list
      elements: str
      sample:
        - 'cannot reach etcd at https://example-2.example.prod.svc.cluster.local:2379:
          connection refused (nothing listens there, or it is down) [gRPC: failed to connect
          to all addresses]'
leader:
  description: The leader most healthy members agree on; null when there is none.
  returned: always
  type: dict
  sample:
    id: 976de8aec86c6d0c
    name: example-1
  contains:
    id:
      description: Leader member ID.
      type: str
      sample: 976de8aec86c6d0c
    name:
      description: Leader member name.
      type: str
      sample: example-1
quorum:
  description: Voting members and how many of them are healthy.
  returned: always
  type: dict
  sample:
    voters: 3
    healthy_voters: 3
    needed: 2
    ok: true
  contains:
    voters:
      description: Voting members (learners excluded).
      type: int
      sample: 3
    healthy_voters:
      description: Voting members that answered as healthy.
      type: int
      sample: 3
    needed:
      description: Quorum size, voters / 2 + 1.
      type: int
      sample: 2
    ok:
      description: Whether healthy_voters reaches needed.
      type: bool
      sample: true
healthy:
  description: Every member is healthy.
  returned: always
  type: bool
  sample: true
alarms:
  description:
    - Active alarms.
    - Empty when the cluster has no quorum, since etcd reads alarms through raft.
  returned: always
  type: list
  elements: dict
  sample:
    - member_id: b9fa2fd1c659694d
      alarm: NOSPACE
  contains:
    member_id:
      description: Member that raised the alarm.
      type: str
      sample: b9fa2fd1c659694d
    alarm:
      description: V(NOSPACE) or V(CORRUPT).
      type: str
      sample: NOSPACE
reason:
  description: A short word for the failure (for example V(Unreachable), V(TLSError)).
  returned: failed
  type: str
  sample: Unreachable
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from etcd_runbook.clients.etcd_client import EtcdClient
from etcd_runbook.clients.etcd_common import (
    ConnectionParams,
    connection_argument_spec,
    connection_required_together,
)
from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.operations.etcd_health import cluster_info


def argument_spec() -> dict[str, Any]:
    return connection_argument_spec()


def run(params: dict[str, Any]) -> dict[str, Any]:
    with EtcdClient(ConnectionParams.from_module_params(params)) as client:
        return {"changed": False, **cluster_info(client)}


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_together=connection_required_together(),
        supports_check_mode=True,
    )
    try:
        result = run(module.params)
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
