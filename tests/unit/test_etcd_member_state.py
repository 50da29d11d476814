"""The etcd_member module's work (etcd_runbook/operations/etcd_member_state.py) over hand-made
cluster health, etcd faked: check mode says what would have been done and changes nothing, the
plan's warnings reach the module, the result and diff say the membership after. The module on
real etcd: tests/modules/test_etcd_member.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from etcd_runbook.clients.etcd_common import EndpointStatus, Member
from etcd_runbook.clients.etcd_errors import (
    EtcdInputError,
    EtcdQuorumRefusedError,
    EtcdRefusedError,
)
from etcd_runbook.operations import etcd_member_state as state
from etcd_runbook.operations.etcd_health import ClusterHealth


def member(n: int, *, learner: bool = False) -> Member:
    return Member(
        id=f"a{n}",
        name=f"m{n}",
        peer_urls=[f"http://127.0.0.1:{2380 + 10 * n}"],
        client_urls=[f"http://127.0.0.1:{2379 + 10 * n}"],
        is_learner=learner,
    )


NOTHING = "; nothing to do"
MEMBERS = [member(1), member(2), member(3), member(4, learner=True)]


def health(*, down: tuple[str, ...] = ()) -> ClusterHealth:
    """Every member healthy, but those named in `down`."""
    h = ClusterHealth(cluster_id="c1", members=list(MEMBERS), statuses=[], leader_id="a1")
    for m in MEMBERS:
        h.member_status[m.id] = EndpointStatus(
            endpoint=m.client_urls[0], healthy=m.name not in down, member_id=m.id, leader="a1"
        )
        h.statuses.append(h.member_status[m.id])
    return h


@pytest.fixture
def etcd(monkeypatch):
    """etcd faked where member_state reaches it; `executed` holds the plans run."""
    fake = SimpleNamespace(executed=[])

    class Client:
        def __init__(self, connection: Any):
            pass

        def __enter__(self) -> Client:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    def execute(client: Any, h: ClusterHealth, plan: Any, params: Any) -> tuple:
        fake.executed.append(plan.steps)
        return plan.member, plan.members_after, 2

    monkeypatch.setattr(state, "EtcdClient", Client)
    monkeypatch.setattr(state, "ConnectionParams", SimpleNamespace(from_module_params=repr))
    monkeypatch.setattr(state, "cluster_health", lambda client: health())
    monkeypatch.setattr(state, "execute", execute)
    return fake


def params(name: str, **given: Any) -> dict[str, Any]:
    base = {
        "name": name,
        "peer_urls": [],
        "learner": False,
        "state": "present",
        "force": False,
        "quorum_wait": 30.0,
    }
    return base | given


def run(asked: dict[str, Any], *, check_mode: bool = False, diff: bool = False) -> tuple:
    warnings: list[str] = []
    result = state.member_state(asked, check_mode=check_mode, diff=diff, warn=warnings.append)
    return result, warnings


@pytest.mark.parametrize(
    ("asked", "check_mode", "changed", "msg", "steps", "retries"),
    [
        (params("m4"), False, True, "promoted m4 (a4)", [["promote"]], 2),
        (params("m4"), True, True, "would have promoted m4 (a4)", [], 0),
        (params("m1"), False, False, f"m1 (a1) is as wanted{NOTHING}", [], 0),
        (params("m1"), True, False, f"m1 (a1) is as wanted{NOTHING}", [], 0),
        (params("m9", state="absent"), True, False, f"no member named m9 exists{NOTHING}", [], 0),
        (params("m2", state="absent"), True, True, "would have removed m2 (a2)", [], 0),
    ],
)
def test_the_message_and_what_is_run(etcd, asked, check_mode, changed, msg, steps, retries):
    result, _ = run(asked, check_mode=check_mode)
    assert (result["changed"], result["msg"], result["retries"]) == (changed, msg, retries)
    assert etcd.executed == steps


def test_check_mode_reports_the_membership_the_plan_predicts(etcd):
    result, _ = run(params("m4"), check_mode=True, diff=True)
    assert result["steps"] == ["promote"]
    assert result["member"] == {**member(4).as_dict(), "is_learner": False}
    assert [m["is_learner"] for m in result["members"]] == [False] * 4
    assert result["diff"]["before"].splitlines()[3].endswith("learner")
    assert result["diff"]["after"].splitlines()[3].endswith("voter")


def test_the_plans_warnings_reach_the_module_and_no_diff_unless_asked(etcd):
    result, warnings = run(params("m1", learner=True))
    assert warnings == ["m1 (a1) is already a voting member; learner=true never demotes"]
    assert "diff" not in result and result["member"] == member(1).as_dict()


def test_removing_the_leader_says_who_takes_over(etcd):
    result, _ = run(params("m1", state="absent"))
    assert etcd.executed == [["move_leader", "remove"]]
    assert result["leader_moved_to"] == member(2).as_dict()
    assert [m["name"] for m in result["members"]] == ["m2", "m3", "m4"]


def test_a_malformed_peer_url_is_refused_before_etcd_is_asked(etcd, monkeypatch):
    monkeypatch.setattr(state, "cluster_health", pytest.fail)
    with pytest.raises(EtcdInputError, match="peer URL"):
        run(params("m4", peer_urls=["http//127.0.0.1:2380"]))


@pytest.mark.parametrize(
    ("looks", "asked", "outcome"),
    [
        # Two voters out on the first two looks, back on the third: the change goes on.
        (
            [("m2", "m3"), ("m2", "m3"), ()],
            params("m4"),
            "promoted m4 (a4)",
        ),
        # Removing m2 would leave m3 alone healthy of two: looked at again, then it goes on.
        ([("m3",), ()], params("m2", state="absent"), "removed m2 (a2)"),
        # Never back: refused once the wait ran out, nothing run.
        ([("m2", "m3")] * 40, params("m4"), "no quorum"),
        # No wait asked: refused on the first look.
        ([("m2", "m3"), ()], params("m4", quorum_wait=0), "no quorum"),
    ],
    ids=["back-on-third-look", "removal-waits", "never-back", "no-wait"],
)
def test_a_refusal_for_too_few_healthy_voters_stands_only_after_the_wait(
    etcd, monkeypatch, looks, asked, outcome
):
    """Under load a healthy member misses a health check now and then: the module looks
    again each second for quorum_wait seconds before refusing (the clock is faked)."""
    clock = {"now": 0.0, "looks": 0}

    def look(client: Any) -> ClusterHealth:
        clock["looks"] += 1
        return health(down=looks[clock["looks"] - 1])

    def sleep(seconds: float) -> None:
        clock["now"] += seconds

    monkeypatch.setattr(state, "cluster_health", look)
    monkeypatch.setattr(state.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(state.time, "sleep", sleep)
    if outcome == "no quorum":
        with pytest.raises(EtcdQuorumRefusedError, match="no quorum"):
            run(asked)
        assert etcd.executed == []
        assert clock["looks"] == int(asked["quorum_wait"]) + 1
    else:
        result, _ = run(asked)
        assert result["msg"] == outcome
        assert clock["looks"] == len(looks)


def test_a_refusal_that_no_later_look_changes_is_not_waited_for(etcd, monkeypatch):
    """A second learner is refused on the first look: waiting cannot change it."""
    monkeypatch.setattr(state.time, "sleep", pytest.fail)
    with pytest.raises(EtcdRefusedError, match="already has learner"):
        run(params("m5", peer_urls=["http://127.0.0.1:2430"], learner=True))
