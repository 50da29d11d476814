"""Quorum lost with a majority's data gone, told apart from members merely down: the table of
what the plan concludes and what status says (etcd_runbook/rules/cluster/recovery.py)."""

from __future__ import annotations

from typing import Any

import pytest

from etcd_runbook.rules import etcd_plan as ep
from etcd_runbook.rules.cluster.recovery import newest
from tests.unit.test_etcd_plan import CID, claim, cond, healthy3, info, member, mid, obj, pod

GONE = "cannot fetch cluster info from peer urls: could not retrieve cluster information"
NOW = "2026-11-27T09:00:00Z"


def lost_facts(
    down: dict[int, str], answers: dict[int, tuple[int, int]], status: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Three members; each in `down` is either 'claim' (its claim is gone), 'guard' (its
    guard tripped: its data dir is empty) or 'pod' (its Pod is gone, its claim holds its
    data). `answers` maps a member answering Status to its (raft index, revision)."""
    facts = healthy3()
    if status is not None:
        facts["object"] = obj(status=status)
    facts["observed_at"] = NOW
    facts["claims"] = [claim(i) for i in range(3) if down.get(i) != "claim"]
    facts["pods"] = [
        pod(i, phase="Running", message=GONE, ready=False) if down.get(i) == "guard" else pod(i)
        for i in range(3)
        if down.get(i) not in ("claim", "pod")
    ]
    i = info([member(i, healthy=False) for i in range(3)], leader=None)
    i["status"] = [
        {"member_id": mid(n), "healthy": False, "raft_index": ri, "revision": rev}
        for n, (ri, rev) in answers.items()
    ]
    facts["info"] = i
    return facts


@pytest.mark.parametrize(
    "down, answers, reason, lost",
    [
        # Two of three without data: waiting brings nothing back.
        ({1: "claim", 2: "claim"}, {0: (40, 30)}, "MajorityDataLost", ["e-1", "e-2"]),
        ({1: "guard", 2: "guard"}, {0: (40, 30)}, "MajorityDataLost", ["e-1", "e-2"]),
        ({1: "guard", 2: "claim"}, {0: (40, 30)}, "MajorityDataLost", ["e-1", "e-2"]),
        # One without data, one merely down: it comes back with its data and quorum with it.
        ({1: "claim", 2: "pod"}, {0: (40, 30)}, "QuorumLost", []),
        # Both down with their data: the reconcile brings them back.
        ({1: "pod", 2: "pod"}, {0: (40, 30)}, "QuorumLost", []),
        # Every member's data gone: no survivor, the backup is the only way out.
        ({0: "claim", 1: "claim", 2: "claim"}, {}, "MajorityDataLost", ["e-0", "e-1", "e-2"]),
    ],
)
def test_majority_data_lost_is_told_from_members_merely_down(down, answers, reason, lost):
    facts = lost_facts(down, answers)
    p = ep.plan(facts)
    assert sorted(p["majority_lost"].get("lost", [])) == lost
    r = ep.report(facts)
    assert r["phase"] == reason and r["failed"]
    assert cond(r, "Available") == ("False", reason)
    assert cond(r, "Degraded") == ("True", reason)
    assert [e["reason"] for e in r["events"] if e["type"] == "Warning"][:1] == [reason]
    assert bool(r["status"]["majorityDataLost"]) == (reason == "MajorityDataLost")
    # Nothing is acted on: no membership change, no Pod made for a member without data.
    assert not any(p[k] for k in ("replace", "add", "remove", "stale", "lost", "roll"))
    assert not set(p["heal"]) & set(lost)


def test_the_survivors_are_said_with_their_index_revision_and_last_answer():
    before = {
        "clusterID": CID,
        "majorityDataLost": {
            "survivors": [{"id": mid(0), "lastAnswered": "2026-11-27T08:00:00Z"}],
        },
    }
    # A five-member cluster would need three; here e-0 stops answering, e-1 still does.
    facts = lost_facts({2: "claim"}, {1: (57, 44)}, status=before)
    facts["claims"] = [claim(i) for i in range(2)]
    facts["info"]["members"] = [member(i, healthy=False) for i in range(3)]
    facts["pods"] = [pod(0), pod(1)]
    # e-1's data is gone too (guard), e-0 is the only survivor and is silent.
    facts["pods"][1] = pod(1, message=GONE, ready=False)
    r = ep.report(facts)
    lost = r["status"]["majorityDataLost"]
    assert lost["lost"] == ["e-1", "e-2"]
    assert lost["survivors"] == [
        {
            "name": "e-0",
            "id": mid(0),
            "raftIndex": None,
            "revision": None,
            "lastAnswered": "2026-11-27T08:00:00Z",
        }
    ]
    message = r["conditions"]["Available"]["message"]
    assert "e-0 (not answering; last answered 2026-11-27T08:00:00Z)" in message
    assert "docs/runbooks.md" in message


def test_a_survivor_answering_now_is_stamped_with_this_look():
    r = ep.report(lost_facts({1: "claim", 2: "guard"}, {0: (40, 30)}))
    (s,) = r["status"]["majorityDataLost"]["survivors"]
    assert (s["raftIndex"], s["revision"], s["lastAnswered"]) == (40, 30, NOW)
    assert r["status"]["majorityDataLost"]["newest"] == "e-0"
    assert (
        "e-0 (raft index 40, revision 30, answered 2026-11-27T09:00:00Z)"
        in (r["conditions"]["Available"]["message"])
    )


def test_a_quorum_back_clears_what_was_said_of_the_loss():
    facts = healthy3()
    facts["object"] = obj(status={"clusterID": CID, "majorityDataLost": {"lost": ["e-1"]}})
    r = ep.report(facts)
    assert r["status"]["majorityDataLost"] is None and r["phase"] == "Running"


def row(name: str, raft: int | None, rev: int | None) -> dict[str, Any]:
    return {"name": name, "raftIndex": raft, "revision": rev}


@pytest.mark.parametrize(
    "rows, chosen",
    [
        ([row("e-0", 40, 30), row("e-3", 55, 20)], "e-3"),  # raft index first
        ([row("e-0", 40, 31), row("e-3", 40, 30)], "e-0"),  # then revision
        ([row("e-3", 40, 30), row("e-0", 40, 30)], "e-0"),  # a tie: the first by name
        ([row("e-0", None, None), row("e-3", 12, 9)], "e-3"),  # one that answers beats none
        ([row("e-0", None, None)], ""),  # none answers: no choice to offer
        ([], ""),
    ],
)
def test_newest_is_the_survivor_holding_the_most(rows, chosen):
    assert newest(rows) == chosen
