#!/usr/bin/python
"""Ansible module: one etcd member present (learner or voter) or absent, safely."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_member
short_description: Add, promote, update or remove one etcd cluster member, safely
description:
  - Makes one etcd member present (as a learner or a voting member) or absent, over the etcd
    v3 API, one membership change at a time.
  - O(state=present) adds the member when no member has its name or one of its peer URLs
    (as a learner with O(learner=true), else as a voting member), updates its peer URLs when
    they differ, and promotes an existing learner when O(learner=false). A member that was
    added but has not started yet has no name in etcd; it is found by its peer URLs.
  - Promotion is retried while etcd answers that the learner has not caught up with the
    leader, until O(promote_timeout) runs out.
  - O(state=absent) removes the member. When it is the leader, leadership first moves to the
    healthy voting member furthest along the raft log, then the member is removed.
  - Refuses, without changing anything, a second learner (etcd allows one), any change while
    the cluster has no quorum, and unless O(force=true) removing a voting member from a
    cluster of two voting members or when the remaining healthy voting members would fall
    below the quorum of the smaller cluster. The refusals for too few healthy members stand
    only after O(quorum_wait) seconds of looking again.
  - An absent member with O(state=absent) is not an error - nothing changes and RV(msg) says
    that no such member exists.
  - O(learner=true) never demotes an existing voting member; that case reports no change and
    a warning.
version_added: "0.1.0"
author: etcd runbook operator maintainers
extends_documentation_fragment:
  - etcd_connection
options:
  name:
    description:
      - Name of the member (its etcd C(--name)).
    type: str
    required: true
  peer_urls:
    description:
      - Peer URLs of the member. Needed to add a member; when given for an existing member,
        its peer URLs are updated to exactly this list.
      - With O(state=absent), used to find a member that was added but never started, and
        a member that only has the name O(name) but none of these peer URLs is refused, not
        removed (the name is a member's own word; a member of another cluster of the same
        name may carry it).
    type: list
    elements: str
    default: []
  learner:
    description:
      - Add the member as a learner (non-voting). With V(false), a learner is promoted to a
        voting member.
    type: bool
    default: false
  state:
    description:
      - Whether the member should be in the cluster.
    type: str
    choices: [present, absent]
    default: present
  force:
    description:
      - Remove the member even when the quorum safety checks refuse it. Data safety then
        rests with you.
    type: bool
    default: false
  promote_timeout:
    description:
      - Seconds to keep retrying a promotion that etcd refuses because the learner has not
        caught up with the leader yet.
    type: float
    default: 120.0
  quorum_wait:
    description:
      - Seconds to look again, once a second, when a change is refused because too few voting
        members answer healthy (no quorum, or too few left healthy after a removal). A member
        under load misses a health check now and then; the refusal stands if the quorum is
        still missing when this runs out. V(0) refuses on the first look.
    type: float
    default: 30.0
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
notes:
  - Start a newly added member with C(--initial-cluster-state=existing) and an empty data
    directory.
"""

EXAMPLES = r"""
- name: Add etcd-3 as a learner
  etcd_member:
    name: etcd-3
    peer_urls: ["https://etcd-3.etcd.prod.svc:2380"]
    learner: true
    endpoints: ["https://etcd-0.etcd.prod.svc:2379"]
    ca_cert: /etc/etcd/pki/ca.crt
    client_cert: /etc/etcd/pki/client.crt
    client_key: /etc/etcd/pki/client.key

- name: Promote etcd-3 once it has caught up (retried for up to 5 minutes)
  etcd_member:
    name: etcd-3
    learner: false
    promote_timeout: 300
    endpoints: ["https://etcd-0.etcd.prod.svc:2379"]
    ca_cert: /etc/etcd/pki/ca.crt

- name: Remove the failed member etcd-1 (leadership moves away first if it leads)
  etcd_member:
    name: etcd-1
    state: absent
    endpoints: ["http://10.0.0.10:2379", "http://10.0.0.12:2379"]
"""

RETURN = r"""
member:
  description:
    - The member after the change (for O(state=absent), the member that was removed).
    - Absent when no such member exists and O(state=absent).
  returned: when the member exists or was added
  type: dict
  sample:
    id: ab5e6d249ab8d5b5
    name: ''
    peer_urls:
    - https://example-3.example.prod.svc.cluster.local:2380
    client_urls: []
    is_learner: true
  contains:
    id:
      description: Member ID as lowercase hex, as C(etcdctl member list) prints it.
      type: str
      sample: 8e9e05c52164694d
    name:
      description: Member name; empty until the member has started.
      type: str
      sample: example-3
    peer_urls:
      description: Peer URLs.
      type: list
      elements: str
      sample: ['https://example-3.example.prod.svc.cluster.local:2380']
    client_urls:
      description: Client URLs; empty until the member has started.
      type: list
      elements: str
      sample: ['https://example-3.example.prod.svc.cluster.local:2379']
    is_learner:
      description: Whether the member is a learner.
      type: bool
      sample: true
members:
  description: Every member after the change (predicted in check mode), same keys as RV(member).
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
    - id: 976de8aec86c6d0c
      name: example-1
      peer_urls:
      - https://example-1.example.prod.svc.cluster.local:2380
      client_urls:
      - https://example-1.example.prod.svc.cluster.local:2379
      is_learner: false
    - id: b9fa2fd1c659694d
      name: example-2
      peer_urls:
      - https://example-2.example.prod.svc.cluster.local:2380
      client_urls:
      - https://example-2.example.prod.svc.cluster.local:2379
      is_learner: false
    - id: ab5e6d249ab8d5b5
      name: ''
      peer_urls:
      - https://example-3.example.prod.svc.cluster.local:2380
      client_urls: []
      is_learner: true
msg:
  description: What was done, or why nothing needed doing.
  returned: always
  type: str
  sample: promoted etcd-3 (8e9e05c52164694d)
steps:
  description: The membership steps taken (or that check mode would take), in order.
  returned: always
  type: list
  elements: str
  sample: [move_leader, remove]
retries:
  description: How many times the promotion was retried because the learner had not caught up.
  returned: always
  type: int
  sample: 3
leader_moved_to:
  description: The member that took over leadership before the leader was removed.
  returned: when the removed member was the leader
  type: dict
  sample:
    id: 292c728c0145c718
    name: example-0
    peer_urls:
    - https://example-0.example.prod.svc.cluster.local:2380
    client_urls:
    - https://example-0.example.prod.svc.cluster.local:2379
    is_learner: false
reason:
  description: A short word for the failure (for example V(Refused), V(Unreachable), V(TLSError)).
  returned: failed
  type: str
  sample: Refused
"""

from typing import Any

from ansible.module_utils.basic import AnsibleModule

from etcd_runbook.clients.etcd_common import connection_argument_spec, connection_required_together
from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.operations.etcd_member_state import member_state


def argument_spec() -> dict[str, Any]:
    return {
        "name": {"type": "str", "required": True},
        "peer_urls": {"type": "list", "elements": "str", "default": []},
        "learner": {"type": "bool", "default": False},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "force": {"type": "bool", "default": False},
        "promote_timeout": {"type": "float", "default": 120.0},
        "quorum_wait": {"type": "float", "default": 30.0},
        **connection_argument_spec(),
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_together=connection_required_together(),
        supports_check_mode=True,
    )
    try:
        result = member_state(
            module.params, check_mode=module.check_mode, diff=module._diff, warn=module.warn
        )
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
