#!/usr/bin/python
"""Ansible module: etcd maintenance (defragment, compact, move leader, alarms, downgrade)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_maintenance
short_description: Defragment, compact, move the leader, disarm alarms or drive a downgrade
description:
  - Runs one etcd maintenance O(action) over the etcd v3 API, safely and idempotently.
  - V(defragment) defragments O(member), or every member, one at a time, followers first
    (by name) and the leader last, waiting for the cluster to be healthy again after each.
    Before the leader's turn, leadership moves to another healthy voter (O(leader_away)).
    It is refused unless every member answers, all agree on one leader, no learner is
    joining and no CORRUPT alarm is raised. RV(changed) is true when a member's database
    size changed or leadership moved. In check mode RV(changed) predicts whether any member
    has free pages to reclaim (its database size exceeds the size in use).
  - V(compact) compacts the keyspace history to O(revision), or so that the last O(keep)
    revisions stay readable. RV(changed) is false when the history is already compacted at
    or after that revision. The current compaction point is found by bisection with reads at
    a revision (a read below it fails with "compacted"); etcd has no cheap call reporting it.
  - V(move_leader) hands leadership to the voting member O(to); nothing changes when it
    already leads. Refused for a learner or an unhealthy member.
  - V(disarm_alarms) deactivates NOSPACE alarms once their cause is gone, that is when
    every member's database size is below the quota by O(space_margin) percent (compact
    and defragment first). The quota is what etcd 3.6 reports, else O(quota_backend_bytes).
    A CORRUPT alarm is never disarmed by this module; a corrupt member must be replaced.
    Nothing changes when no alarm is raised.
  - V(downgrade) runs etcd's downgrade O(downgrade_action) (V(validate), V(enable) or
    V(cancel)) towards O(target_version), one minor version below the cluster's. It needs
    etcd 3.6 on every member (3.4 has no downgrade API; 3.5's is experimental and its enable
    times out, so only V(validate) is allowed there). V(validate) never changes anything;
    V(enable) is unchanged when the same downgrade is already enabled and V(cancel) when
    none is.
version_added: "0.1.0"
author: etcd runbook operator maintainers
extends_documentation_fragment:
  - etcd_connection
options:
  action:
    description: The maintenance to run.
    type: str
    required: true
    choices: [defragment, compact, move_leader, disarm_alarms, downgrade]
  member:
    description:
      - With V(defragment), the only member to defragment (name, hex ID or client URL).
        Default every member.
    type: str
  leader_away:
    description:
      - With V(defragment), hand leadership to another healthy voting member (one defragmented
        in this call first) before defragmenting the leader, whose pause would otherwise stall
        every write of the cluster. Nothing moves when the leader is the only voter.
    type: bool
    default: true
  defrag_timeout:
    description: Seconds one member's defragmentation may take.
    type: float
    default: 600.0
  wait_timeout:
    description:
      - Seconds to wait for the cluster to be healthy again after a member's defragmentation,
        or for a new leader after V(move_leader).
    type: float
    default: 60.0
  revision:
    description: With V(compact), the revision to compact to. Mutually exclusive with O(keep).
    type: int
  keep:
    description:
      - With V(compact), how many of the latest revisions stay readable.
    type: int
  physical:
    description:
      - With V(compact), wait until the compaction is applied to the backend of every member.
    type: bool
    default: true
  to:
    description: With V(move_leader), the member to lead (name, hex ID or client URL).
    type: str
  quota_backend_bytes:
    description:
      - The members' C(--quota-backend-bytes), used by V(disarm_alarms) when etcd does not
        report its quota (before 3.6).
    type: int
    default: 2147483648
  space_margin:
    description:
      - With V(disarm_alarms), the percentage of the quota that must be free on every member.
    type: float
    default: 10.0
  downgrade_action:
    description: With V(downgrade), etcd's downgrade step.
    type: str
    choices: [validate, enable, cancel]
  target_version:
    description:
      - With V(downgrade), the version to downgrade to, C(3.5) or C(3.5.0).
    type: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Compact keeping the last 10000 revisions, then defragment every member
  etcd_maintenance:
    action: "{{ item.action }}"
    keep: "{{ item.keep | default(omit) }}"
    endpoints: ["https://etcd-0.etcd.prod.svc:2379"]
    ca_cert: /etc/etcd/pki/ca.crt
    client_cert: /etc/etcd/pki/client.crt
    client_key: /etc/etcd/pki/client.key
  loop:
    - {action: compact, keep: 10000}
    - {action: defragment}

- name: Move leadership to etcd-2 before restarting the leader
  etcd_maintenance:
    action: move_leader
    to: etcd-2
    endpoints: ["http://10.0.0.10:2379"]

- name: Disarm NOSPACE once compaction and defragmentation freed space
  etcd_maintenance:
    action: disarm_alarms
    quota_backend_bytes: 8589934592
    endpoints: ["http://10.0.0.10:2379"]

- name: Check that the cluster may be downgraded to 3.5
  etcd_maintenance:
    action: downgrade
    downgrade_action: validate
    target_version: "3.5"
    endpoints: ["http://10.0.0.10:2379"]
"""

RETURN = r"""
msg:
  description: What was done, or why nothing needed doing.
  returned: always
  type: str
  sample: defragmented example-0, example-2, example-1 in this order
order:
  description: Names of the members defragmented (or that would be), in order.
  returned: O(action=defragment)
  type: list
  elements: str
  sample: [example-0, example-2, example-1]
members:
  description:
    - Per defragmented member, in order, C(name), C(id), C(db_size_before),
      C(db_size_in_use_before), C(db_size_after), the C(started_at)/C(finished_at) epoch
      seconds of its defragmentation (null in check mode) and C(leader_moved_to), the member
      leadership moved to before it (null when it did not lead, or none moved).
  returned: O(action=defragment)
  type: list
  elements: dict
  sample:
    - name: example-0
      id: 292c728c0145c718
      db_size_before: 36864
      db_size_in_use_before: 28672
      db_size_after: 32768
      started_at: 1795759240.630556
      finished_at: 1795759240.6424918
      leader_moved_to: null
revision:
  description: The revision compacted to (or that would be).
  returned: O(action=compact)
  type: int
  sample: 42
current_revision:
  description: The cluster's revision when the module ran.
  returned: O(action=compact)
  type: int
  sample: 51
compact_revision_before:
  description: The compaction point before the module ran (0 when never compacted).
  returned: O(action=compact)
  type: int
  sample: 0
compact_revision:
  description: The compaction point afterwards (predicted in check mode).
  returned: O(action=compact)
  type: int
  sample: 42
leader_before:
  description: The leader's name before V(move_leader).
  returned: O(action=move_leader)
  type: str
  sample: example-1
leader:
  description: The leader's name afterwards (predicted in check mode).
  returned: O(action=move_leader)
  type: str
  sample: example-0
alarms_before:
  description: Raised alarms before, each with C(member_id) and C(alarm).
  returned: O(action=disarm_alarms)
  type: list
  elements: dict
  sample:
    - member_id: b9fa2fd1c659694d
      alarm: NOSPACE
alarms:
  description: Raised alarms afterwards (predicted in check mode).
  returned: O(action=disarm_alarms)
  type: list
  elements: dict
  sample: []
quota:
  description: The quota in bytes that V(disarm_alarms) checked the database sizes against.
  returned: O(action=disarm_alarms) and a NOSPACE alarm was raised
  type: int
  sample: 2147483648
cluster_version:
  description: The version etcd answered a downgrade request with (the cluster version).
  returned: O(action=downgrade) and etcd was asked
  type: str
  sample: '3.6'
downgrade:
  description: C(enabled) and C(target_version) of the downgrade job afterwards (etcd 3.6).
  returned: O(action=downgrade)
  type: dict
  sample:
    enabled: false
    target_version: ''
reason:
  description: A short word for the failure (for example V(Refused), V(ClusterUnhealthy)).
  returned: failed
  type: str
  sample: Refused
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from etcd_runbook.clients.etcd_common import connection_argument_spec, connection_required_together
from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.operations.etcd_maintenance_actions import ACTIONS, maintain


def argument_spec() -> dict[str, Any]:
    return {
        **connection_argument_spec(),
        "action": {"type": "str", "required": True, "choices": list(ACTIONS)},
        "member": {"type": "str"},
        "leader_away": {"type": "bool", "default": True},
        "defrag_timeout": {"type": "float", "default": 600.0},
        "wait_timeout": {"type": "float", "default": 60.0},
        "revision": {"type": "int"},
        "keep": {"type": "int"},
        "physical": {"type": "bool", "default": True},
        "to": {"type": "str"},
        "quota_backend_bytes": {"type": "int", "default": 2 * 1024**3},
        "space_margin": {"type": "float", "default": 10.0},
        "downgrade_action": {"type": "str", "choices": ["validate", "enable", "cancel"]},
        "target_version": {"type": "str"},
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_together=connection_required_together(),
        mutually_exclusive=[["revision", "keep"]],
        required_if=[
            ["action", "compact", ["revision", "keep"], True],
            ["action", "move_leader", ["to"]],
            ["action", "downgrade", ["downgrade_action", "target_version"]],
        ],
        supports_check_mode=True,
    )
    try:
        result = maintain(module.params, check_mode=module.check_mode, diff=module._diff)
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
