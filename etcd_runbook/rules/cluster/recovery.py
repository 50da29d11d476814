"""Quorum lost for good: a majority of the voting members have no data left, so waiting brings
nothing back. Told apart from members that are merely down (their claims hold their data, and
the reconcile brings them back), and said with what a person needs to choose a way out: each
survivor's raft index and revision, and when it last answered."""

from __future__ import annotations

from typing import Any

from etcd_runbook.rules.cluster.common import quorum_of
from etcd_runbook.rules.cluster.observed import Decided, _Observed


def _answers(o: _Observed) -> dict[str, dict[str, Any]]:
    """Each member's own answer to Status this run, by member ID: a member answers it without
    a quorum, from what it has applied."""
    return {
        str(s["member_id"]): s
        for s in o.info.get("status") or []
        if s.get("member_id") and s.get("raft_index") is not None
    }


def _last_answered(o: _Observed) -> dict[str, str]:
    """When each survivor last answered, as the previous run recorded it."""
    before = ((o.obj.get("status") or {}).get("majorityDataLost") or {}).get("survivors") or []
    return {str(s.get("id")): str(s.get("lastAnswered") or "") for s in before if s.get("id")}


def newest(survivors: list[dict[str, Any]]) -> str:
    """The survivor holding the most: the highest raft index, then revision, among those that
    answered; '' when none did. A tie goes to the first by name, so the choice is stable."""
    answered = [s for s in survivors if s["raftIndex"] is not None]
    if not answered:
        return ""
    # max() keeps the first of equals: ordered by name, a tie goes to the first name.
    best = max(
        sorted(answered, key=lambda s: s["name"]),
        key=lambda s: (s["raftIndex"], s["revision"] or 0),
    )
    return str(best["name"])


def plan_majority_lost(o: _Observed, d: Decided) -> Decided:
    """Whether a majority of the voting members lost their data while quorum is gone: the
    lost (a member whose guard tripped, or whose claim is gone) and each survivor. Empty while
    a quorum answers, or while enough members keep their data to form one again."""
    if not o.known or o.quorum.get("ok"):
        return {"majority_lost": {}}
    voters = [m for m in o.voters if m["name"]]
    lost = sorted(
        m["name"] for m in voters if m["name"] in d["lost_data"] or m["name"] not in o.claims
    )
    survivors = [m for m in voters if m["name"] not in lost]
    if not lost or len(survivors) >= quorum_of(len(voters)):
        return {"majority_lost": {}}
    answers, before = _answers(o), _last_answered(o)
    rows = []
    for m in sorted(survivors, key=lambda m: m["name"]):
        answer = answers.get(m["id"]) or {}
        rows.append(
            {
                "name": m["name"],
                "id": m["id"],
                "raftIndex": answer.get("raft_index"),
                "revision": answer.get("revision"),
                "lastAnswered": o.observed_at if answer else before.get(m["id"], ""),
            }
        )
    return {
        "majority_lost": {
            "voters": len(voters),
            "needed": quorum_of(len(voters)),
            "lost": lost,
            "survivors": rows,
            "newest": newest(rows),
        }
    }


def majority_lost_message(lost: dict[str, Any]) -> str:
    """What status and the Event say: who is gone, who is left with how much, and where the
    way out is written."""
    survivors = "; ".join(
        f"{s['name']} (raft index {s['raftIndex']}, revision {s['revision']}, answered "
        f"{s['lastAnswered'] or 'never'})"
        if s["raftIndex"] is not None
        else f"{s['name']} (not answering; last answered {s['lastAnswered'] or 'never'})"
        for s in lost["survivors"]
    )
    newest_note = f"; the newest data is on {lost['newest']}" if lost["newest"] else ""
    return (
        f"{', '.join(lost['lost'])} lost their data: {len(lost['survivors'])} of "
        f"{lost['voters']} voting members keep theirs, {lost['needed']} needed, so waiting "
        f"brings no quorum back. Survivors: {survivors or 'none'}{newest_note}. Nothing is "
        "changed until a person chooses a recovery (docs/runbooks.md, 'A majority's data is "
        "gone')"
    )
