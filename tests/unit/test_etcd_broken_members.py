"""A member that cannot start on its data (gone, or broken: etcd's CRC, member-count and
database errors) is replaced while quorum holds, with etcd's own words in the reason; one that
cannot start for any other cause (the spec, the node) is not (etcd_runbook/rules/cluster/
observed.py: data_fault, data_lost)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from etcd_runbook.rules import etcd_plan as ep
from etcd_runbook.rules.cluster.observed import data_fault
from tests.unit.test_etcd_plan import claim, healthy3, info, member, mid, pod


def line(msg: str, error: str) -> str:
    return json.dumps(
        {
            "level": "fatal",
            "ts": "2026-11-27T09:00:00Z",
            "caller": "etcdmain/etcd.go:204",
            "msg": msg,
            "error": error,
            "stacktrace": "main.main\n\t/go/src/main.go:40",
        }
    )


STARTED = line("starting etcd", "")
CASES = [
    # (what etcd's last lines say, what the reason quotes; '' when the data is not at fault)
    (
        line(
            "discovery failed",
            "cannot fetch cluster info from peer urls: could not "
            "retrieve cluster information from the given URLs",
        ),
        "discovery failed: cannot fetch cluster info from peer urls",
    ),
    (line("failed to read WAL", "walpb: crc mismatch"), "failed to read WAL: walpb: crc mismatch"),
    (line("failed to open WAL", "wal: crc mismatch"), "failed to open WAL: wal: crc mismatch"),
    (
        line(
            "discovery failed",
            "error validating peerURLs {ClusterID:cdf8}: member count is unequal",
        ),
        "member count is unequal",
    ),
    (
        line("failed to open backend", "invalid database"),
        "failed to open backend: invalid database",
    ),
    (
        "panic: tocommit(57) is out of range [lastIndex(12)]. Was the raft log corrupted, "
        "truncated, or lost?",
        "tocommit(57) is out of range",
    ),
    # etcd 3.4 writes plain lines.
    ("2026-11-27 09:00:00.000 C | etcdmain: walpb: crc mismatch", "etcdmain: walpb: crc mismatch"),
    # Not the data: the spec, the machine, the network.
    (line("failed to parse flags", "flag provided but not defined: -quota"), ""),
    (line("listen tcp 0.0.0.0:2380", "bind: address already in use"), ""),
    ("fatal error: runtime: out of memory", ""),
]


@pytest.mark.parametrize("words, quoted", CASES)
def test_data_fault_quotes_etcd_only_when_the_data_is_at_fault(words, quoted):
    fault = data_fault(pod(2, phase="Running", message=f"{STARTED}\n{words}", ready=False))
    assert (quoted in fault) if quoted else fault == "", fault
    assert len(fault) <= 300 and "stacktrace" not in fault


@pytest.mark.parametrize("words, quoted", CASES)
def test_a_member_broken_on_its_data_is_replaced_while_quorum_holds(words, quoted):
    facts = healthy3()
    facts["pods"][2] = pod(2, phase="Running", message=words, ready=False)
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    p = ep.plan(facts)
    replaced = {r["name"]: r["reason"] for r in p["replace"]}
    if not quoted:
        assert replaced == {} and p["lost_data"] == []
        return
    assert list(replaced) == ["e-2"] and p["lost_data"] == ["e-2"]
    assert replaced["e-2"].startswith(f"member {mid(2)} cannot start on its data; etcd says: ")
    assert quoted in replaced["e-2"]
    assert "e-2" not in p["heal"]
    r = ep.report(facts)
    assert r["conditions"]["Degraded"]["reason"] == "MemberDataLost"
    assert quoted in r["conditions"]["Degraded"]["message"]


def test_a_broken_member_that_never_joined_is_not_taken_for_one_with_data():
    """Without a member ID on its claim the member never joined: its words say nothing of
    data it had (a first start that failed), and it is not replaced for them."""
    facts = healthy3()
    facts["claims"][2] = claim(2, joined=False)
    facts["pods"][2] = pod(2, message=line("failed to read WAL", "walpb: crc mismatch"))
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    assert ep.plan(facts)["lost_data"] == []


def test_a_broken_member_without_quorum_is_only_said():
    facts = healthy3()
    for n in (1, 2):
        facts["pods"][n] = pod(n, message=line("failed to read WAL", "walpb: crc mismatch"))
    facts["info"] = info([member(0), member(1, healthy=False), member(2, healthy=False)], None)
    p = ep.plan(facts)
    assert p["replace"] == [] and p["lost_data"] == ["e-1", "e-2"]
    assert p["majority_lost"]["lost"] == ["e-1", "e-2"]


# --- a learner that never catches up ------------------------------------------------------

NOW = "2026-11-27T10:00:00Z"
IMAGE_PULL = {
    "name": "etcd",
    "state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}},
}


def learner_facts(ages: dict[int, int], trouble: dict[int, str] | None = None) -> dict[str, Any]:
    """Three voters and a learner e-3 (and e-4, when in `ages`) added `ages[n]` s before
    NOW; `trouble` marks a learner's Pod 'image' (cannot be pulled) or 'unscheduled'."""
    trouble = trouble or {}
    facts = healthy3(size=3 + len(ages))
    learners = sorted(ages)
    for n in learners:
        c = claim(n)
        c["metadata"]["creationTimestamp"] = (
            datetime.fromisoformat(NOW.replace("Z", "+00:00")) - timedelta(seconds=ages[n])
        ).strftime("%Y-%m-%dT%H:%M:%SZ")
        facts["claims"].append(c)
        p = pod(n, voter="false", ready=False)
        if trouble.get(n) == "image":
            p["status"]["containerStatuses"] = [IMAGE_PULL]
            p["status"]["phase"] = "Pending"
        elif trouble.get(n) == "unscheduled":
            p["status"] = {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/3 nodes are available",
                    }
                ],
            }
        facts["pods"].append(p)
    members = [member(i) for i in range(3)] + [
        member(n, healthy=False, learner=True) for n in learners
    ]
    facts["info"] = info(members)
    facts["observed_at"] = NOW
    return facts


@pytest.mark.parametrize(
    "ages, trouble, replaced, requeue",
    [
        ({3: 30}, {}, [], 571.0),  # catching up: looked at again when due
        ({3: 599}, {}, [], 2.0),
        ({3: 600}, {}, ["e-3"], None),  # due: replaced
        ({3: 3600}, {}, ["e-3"], None),
        ({3: 3600}, {3: "image"}, [], None),  # the spec's fault: the roll's to say, not replaced
        ({3: 3600}, {3: "unscheduled"}, [], None),  # no node takes it: said, not replaced
        ({3: 900, 4: 700}, {}, ["e-3"], None),  # one at a time
    ],
)
def test_a_learner_that_never_catches_up_is_replaced_one_at_a_time(
    ages, trouble, replaced, requeue
):
    facts = learner_facts(ages, trouble)
    p = ep.plan(facts)
    assert [r["name"] for r in p["replace"]] == replaced
    for r in p["replace"]:
        assert "has not caught up with the leader (bound 600 s)" in r["reason"]
    assert "e-3" not in p["promote"] or not replaced
    if requeue is not None:
        assert ep.report(facts)["requeue_after"] == pytest.approx(requeue)


def test_a_learner_left_behind_waits_for_a_member_whose_data_is_broken():
    facts = learner_facts({3: 3600})
    facts["pods"][2] = pod(2, message=line("failed to read WAL", "walpb: crc mismatch"))
    facts["info"]["members"][2]["healthy"] = False
    assert [r["name"] for r in ep.plan(facts)["replace"]] == ["e-2"]
