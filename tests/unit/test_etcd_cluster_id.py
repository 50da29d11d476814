"""The cluster ID a run trusts without planning the cluster (etcd_runbook/rules/etcd_cluster_id.py):
the one recorded, else the one a quorum agrees on; and the plan's `cluster_id` is that ID."""

from __future__ import annotations

from typing import Any

import pytest

from etcd_runbook.names import ANN_CLUSTER_ID
from etcd_runbook.rules import etcd_plan as ep
from etcd_runbook.rules.etcd_cluster_id import trusted_cluster_id
from tests.filters import load_filter

CID = "c1d"
FORK = "f0e"


def cluster(status_id: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": "e", "namespace": "ns", "uid": "u-1"},
        "spec": {"size": 3, "version": "3.6.16"},
        "status": {"clusterID": status_id} if status_id else {},
    }


def claim(n: int, cluster_id: str = "") -> dict[str, Any]:
    annotations = {ANN_CLUSTER_ID: cluster_id} if cluster_id else {}
    return {"metadata": {"name": f"e-{n}-data", "annotations": annotations}}


def answer(cluster_id: str = CID, agreeing: int = 3, learners: int = 0) -> dict[str, Any]:
    """etcd's answer for three members, `agreeing` of them confirming the member list."""
    ids = [f"a{n}" for n in range(3)]
    members = [{"id": ids[n], "name": f"e-{n}", "is_learner": n < learners} for n in range(3)]
    views = [
        {"member_id": f"a{n}", "cluster_id": cluster_id, "member_ids": ids, "linearizable": True}
        for n in range(agreeing)
    ]
    return {"cluster_id": cluster_id, "members": members, "views": views}


CASES = [
    ("recorded in status", cluster(CID), [], {}, CID),
    ("status before the claims and a fork", cluster(CID), [claim(0, "old")], answer(FORK), CID),
    (
        "else the claims, most of them",
        cluster(),
        [claim(0, CID), claim(1, CID), claim(2, "x")],
        {},
        CID,
    ),
    ("else a quorum that agrees", cluster(), [], answer(agreeing=2), CID),
    ("one member's word is not enough", cluster(), [], answer(agreeing=1), ""),
    ("learners agree for no one", cluster(), [], answer(learners=3), ""),
    ("nothing answered, nothing recorded", cluster(), [claim(0)], {}, ""),
]


@pytest.mark.parametrize(
    ("obj", "claims", "info", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_trusted_cluster_id(obj, claims, info, expected):
    assert trusted_cluster_id(obj, claims, info) == expected


@pytest.mark.parametrize(
    ("obj", "claims", "info"),
    [case[1:4] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_the_plan_records_the_same_id(obj, claims, info):
    """etcd_common's connection holds every call to this ID, and the plan reports it as the
    cluster's: a run that looks and plans never talks to one cluster and reports another."""
    facts = {"object": obj, "claims": claims, "info": info, "pods": []}
    assert ep.plan(facts)["cluster_id"] == trusted_cluster_id(obj, claims, info)


@pytest.mark.parametrize("garbage", [None, "", [], "x", 3])
def test_what_is_not_an_object_trusts_nothing(garbage):
    assert trusted_cluster_id(garbage, garbage, garbage) == ""


def test_the_filter_is_the_function():
    filters = load_filter("etcd_cluster_id").FilterModule().filters()
    assert filters == {"etcd_trusted_cluster_id": trusted_cluster_id}
