"""Membership decisions (etcd_runbook/operations/etcd_membership.py) over hand-made cluster
health."""

from __future__ import annotations

import pytest

from etcd_runbook.clients.etcd_common import EndpointStatus, Member, MemberView
from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdRefusedError
from etcd_runbook.operations.etcd_health import (
    ClusterHealth,
    choose_view,
    is_stranger,
)
from etcd_runbook.operations.etcd_membership import (
    PREDICTED_ID,
    plan_absent,
    plan_present,
)


def member(n: int, *, learner: bool = False, started: bool = True) -> Member:
    return Member(
        id=f"a{n}",
        name=f"m{n}" if started else "",
        peer_urls=[f"http://127.0.0.1:{2380 + 10 * n}"],
        client_urls=[f"http://127.0.0.1:{2379 + 10 * n}"] if started else [],
        is_learner=learner,
    )


def health(members: list[Member], *, down=(), leader="a1", progress=None) -> ClusterHealth:
    """Cluster where members named in `down` do not answer; `progress` sets raft indexes."""
    progress = progress or {}
    h = ClusterHealth(cluster_id="c1", members=members, statuses=[], leader_id=leader)
    for m in members:
        ok = m.name not in down and m.started
        h.member_status[m.id] = EndpointStatus(
            endpoint=m.client_urls[0] if m.client_urls else "",
            healthy=ok,
            member_id=m.id,
            leader=leader if ok else None,
            raft_index=progress.get(m.name, 100),
            raft_applied_index=progress.get(m.name, 100),
        )
        h.statuses.append(h.member_status[m.id])
    return h


THREE = [member(1), member(2), member(3)]


def test_add_learner_predicts_an_unnamed_member():
    plan = plan_present(health(THREE), "m4", ["http://127.0.0.1:2420"], learner=True)
    assert plan.steps == ["add"]
    assert plan.members_after[-1].id == PREDICTED_ID
    assert plan.members_after[-1].is_learner
    assert len(plan.members_after) == 4


def test_second_learner_is_refused_before_etcd_is_asked():
    cluster = [*THREE, member(4, learner=True, started=False)]
    with pytest.raises(EtcdRefusedError, match=r"already has learner \(not started\) \(a4\)"):
        plan_present(health(cluster), "m5", ["http://127.0.0.1:2430"], learner=True)


def test_unstarted_member_is_found_by_peer_url():
    cluster = [*THREE, member(4, learner=True, started=False)]
    plan = plan_present(health(cluster), "m4", ["http://127.0.0.1:2420"], learner=True)
    assert plan.steps == []
    assert plan.member is not None and plan.member.id == "a4"


def test_a_member_only_named_like_the_one_to_remove_is_not_removed():
    """It calls itself m2, but its peer URL is another's (another namespace's m2)."""
    stranger = Member(id="b2", name="m2", peer_urls=["http://10.9.9.9:2380"])
    cluster = [member(1), stranger, member(3)]
    with pytest.raises(EtcdRefusedError, match="not taken for m2"):
        plan_absent(health(cluster), "m2", [member(2).peer_urls[0]], force=False)
    assert plan_absent(health(cluster), "m2", ["http://10.9.9.9:2380"], False).steps == ["remove"]
    assert plan_absent(health(cluster), "m2", [], False).steps == ["remove"]


def test_promote_and_update_peer_urls():
    cluster = [*THREE, member(4, learner=True)]
    plan = plan_present(health(cluster), "m4", [], learner=False)
    assert plan.steps == ["promote"]
    plan = plan_present(health(cluster), "m4", ["http://127.0.0.1:9999"], learner=False)
    assert plan.steps == ["update", "promote"]
    assert plan.member is not None
    assert plan.member.peer_urls == ["http://127.0.0.1:9999"]
    assert not plan.member.is_learner


def test_learner_true_never_demotes():
    plan = plan_present(health(THREE), "m2", [], learner=True)
    assert plan.steps == []
    assert "never demotes" in plan.warnings[0]


def test_peer_url_of_another_member_is_an_input_error():
    with pytest.raises(EtcdInputError, match="belong to member m2"):
        plan_present(health(THREE), "m9", ["http://127.0.0.1:2400"], learner=True)


def test_adding_without_peer_urls_or_quorum_is_refused():
    with pytest.raises(EtcdInputError, match="peer_urls are needed to add it"):
        plan_present(health(THREE), "m4", [], learner=True)
    with pytest.raises(EtcdRefusedError, match="no quorum"):
        plan_present(health(THREE, down=("m2", "m3")), "m4", ["http://x:1"], learner=True)


def test_unknown_member_absent_is_no_change():
    plan = plan_absent(health(THREE), "m9", [], force=False)
    assert plan.steps == []
    assert plan.message == "no member named m9 exists"


def test_removal_below_quorum_is_refused():
    with pytest.raises(EtcdRefusedError, match=r"only 1 of the 2 remaining.*unhealthy: m1"):
        plan_absent(health(THREE, down=("m1",), leader="a2"), "m3", [], force=False)
    # Removing the failed member itself keeps quorum: that is how it gets replaced.
    plan = plan_absent(health(THREE, down=("m1",), leader="a2"), "m1", [], force=False)
    assert plan.steps == ["remove"]


def test_removal_from_two_voters_is_refused_unless_forced():
    two = [member(1), member(2)]
    with pytest.raises(EtcdRefusedError, match="2 voting members"):
        plan_absent(health(two), "m2", [], force=False)
    assert plan_absent(health(two), "m2", [], force=True).steps == ["remove"]


def test_learner_removal_ignores_voter_rules():
    two_and_learner = [member(1), member(2), member(3, learner=True)]
    assert plan_absent(health(two_and_learner), "m3", [], force=False).steps == ["remove"]


def test_leader_removal_moves_leadership_to_the_most_advanced_healthy_voter():
    five = [member(n) for n in range(1, 6)]
    h = health(five, down=("m5",), progress={"m2": 90, "m3": 120, "m4": 110})
    plan = plan_absent(h, "m1", [], force=False)
    assert plan.steps == ["move_leader", "remove"]
    assert plan.transferee is not None and plan.transferee.name == "m3"


def view(n: int, ids: list[int], cluster: str = "c1", linearizable: bool = True) -> MemberView:
    return MemberView(
        endpoint=f"http://127.0.0.1:{2379 + 10 * n}",
        member_id=f"a{n}",
        cluster_id=cluster,
        members=[member(i) for i in ids],
        linearizable=linearizable,
    )


@pytest.mark.parametrize(
    "views, chosen_from, strangers",
    [
        # Three members agree.
        ([view(1, [1, 2, 3]), view(2, [1, 2, 3]), view(3, [1, 2, 3])], 1, []),
        # A fork under the same cluster ID leads a cluster of its own: chosen against, and
        # never trusted.
        ([view(1, [1]), view(2, [1, 2, 3]), view(3, [1, 2, 3])], 2, [1]),
        # Another cluster altogether.
        ([view(1, [1], cluster="zz"), view(2, [1, 2, 3]), view(3, [1, 2, 3])], 2, [1]),
        # A member without a leader answers from local state: not a fork.
        ([view(1, [1], linearizable=False), view(2, [1, 2, 3]), view(3, [1, 2, 3])], 2, []),
        # A list one member behind (read while a member was added) is not a fork either.
        ([view(1, [1, 2]), view(2, [1, 2, 3]), view(3, [1, 2, 3])], 2, []),
    ],
)
def test_the_list_most_members_report_wins_and_strangers_are_told(views, chosen_from, strangers):
    chosen = choose_view(views, None)
    assert chosen is not None and chosen.member_ids == views[chosen_from - 1].member_ids
    assert [i + 1 for i, v in enumerate(views) if is_stranger(v, chosen)] == strangers
