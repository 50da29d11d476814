"""An administrator's allow-lists (etcd_plan.not_allowed): a spec naming an image repository or
a PriorityClass outside them is refused naming the field, and nothing is made or changed for
it, by the cluster runbook or a restore (the e2e side: tests/e2e/test_least_privilege.py)."""

from __future__ import annotations

from typing import Any

import pytest

from etcd_runbook.rules import etcd_plan as ep
from etcd_runbook.rules import etcd_restore_plan as rp
from etcd_runbook.rules.cluster.spec import cluster_domain
from tests.unit.test_etcd_plan import healthy3, info, member, obj
from tests.unit.test_etcd_restore_plan import restore, seen, target

OFFICIAL = "gcr.io/etcd-development/etcd"
MIRROR = "registry.corp.example/etcd"


@pytest.mark.parametrize(
    "spec, options, refused",
    [
        # No list: anything goes.
        ({"repository": "anything/etcd"}, {}, []),
        ({"pod": {"priorityClassName": "system-node-critical"}}, {"allowed_repositories": ""}, []),
        # The default repository is the one checked when the spec names none.
        ({}, {"allowed_repositories": OFFICIAL}, []),
        ({}, {"allowed_repositories": MIRROR}, ["spec.repository"]),
        ({"repository": MIRROR}, {"allowed_repositories": f"{OFFICIAL}, {MIRROR} "}, []),
        ({"repository": MIRROR}, {"allowed_repositories": [OFFICIAL, f" {MIRROR}"]}, []),
        (
            {"repository": "registry.evil.example/etcd"},
            {"allowed_repositories": OFFICIAL},
            ["spec.repository"],
        ),
        # Exact names: a repository under an allowed one is another repository.
        (
            {"repository": f"{OFFICIAL}/other"},
            {"allowed_repositories": OFFICIAL},
            ["spec.repository"],
        ),
        # No priority class asked: none to refuse.
        ({}, {"allowed_priority_classes": "etcd-critical"}, []),
        (
            {"pod": {"priorityClassName": "etcd-critical"}},
            {"allowed_priority_classes": "etcd-critical"},
            [],
        ),
        (
            {"pod": {"priorityClassName": "system-node-critical"}},
            {"allowed_priority_classes": "etcd-critical"},
            ["spec.pod.priorityClassName"],
        ),
        (
            {"repository": "x/etcd", "pod": {"priorityClassName": "system-node-critical"}},
            {"allowed_repositories": OFFICIAL, "allowed_priority_classes": "etcd-critical"},
            ["spec.repository", "spec.pod.priorityClassName"],
        ),
    ],
)
def test_what_the_allow_lists_refuse(spec, options, refused):
    got = ep.not_allowed(spec, options)
    assert [r["field"] for r in got] == refused
    assert all(r["reason"] == "NotAllowed" for r in got)
    normalized = ep.normalize_spec({"metadata": {"name": "e"}, "spec": spec}, options)
    assert normalized["allowed"] == (not refused)
    assert [p["field"] for p in normalized["problems"]] == refused


def test_the_refusal_names_the_field_the_value_and_what_is_allowed():
    (refusal,) = ep.not_allowed(
        {"repository": "registry.evil.example/etcd"},
        {"allowed_repositories": f"{OFFICIAL},{MIRROR}"},
    )
    message = refusal["message"]
    assert message.startswith("spec.repository 'registry.evil.example/etcd' is not one")
    assert OFFICIAL in message and MIRROR in message
    assert "ETCD_RUNBOOK_ALLOWED_REPOSITORIES" in message


ONLY_OFFICIAL = {"allowed_repositories": OFFICIAL}


def new_cluster(**spec: Any) -> dict[str, Any]:
    return {"object": obj(status={}, **spec), "options": ONLY_OFFICIAL}


def test_a_new_cluster_outside_the_list_gets_nothing_and_says_why():
    facts = new_cluster(repository="registry.evil.example/etcd")
    p = ep.plan(facts)
    assert p["hands_off"] and not p["busy"], "no certificate, Service, claim or Pod"
    assert p["bootstrap"] == [] and p["heal"] == []
    assert [(r["reason"], r["field"]) for r in p["refusals"]] == [("NotAllowed", "spec.repository")]
    r = ep.report(facts)
    assert r["failed"]
    assert (r["conditions"]["Degraded"]["status"], r["conditions"]["Degraded"]["reason"]) == (
        "True",
        "NotAllowed",
    )
    assert r["conditions"]["Progressing"]["reason"] == "NotAllowed"
    (event,) = [e for e in r["events"] if e["reason"] == "NotAllowed"]
    assert event["type"] == "Warning" and event["message"].startswith("spec.repository")
    # The same cluster on an allowed repository starts.
    allowed = ep.plan(new_cluster())
    assert allowed["bootstrap"] == ["e-0", "e-1", "e-2"] and not allowed["hands_off"]


@pytest.mark.parametrize(
    "spec",
    [
        {"repository": "registry.evil.example/etcd"},
        {"pod": {"priorityClassName": "system-node-critical"}},
    ],
)
def test_a_running_cluster_asked_for_something_outside_the_list_is_neither_rolled_nor_healed(spec):
    # A member Pod gone and the others on the old Pod: without the lists, the lost one is made
    # again and the others roll onto the new spec; with them, nothing gets a forbidden Pod.
    facts = healthy3(**spec)
    facts["pods"] = facts["pods"][:2]
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    facts["options"] = {}
    assert ep.plan(facts)["heal"] == ["e-2"]
    facts["options"] = {**ONLY_OFFICIAL, "allowed_priority_classes": "etcd-critical"}
    p = ep.plan(facts)
    assert p["heal"] == [] and p["roll"] == [] and p["add"] == [] and p["hands_off"]
    assert [r["reason"] for r in p["refusals"]][:1] == ["NotAllowed"]
    r = ep.report(facts)
    assert r["phase"] == "Degraded" and r["conditions"]["Degraded"]["reason"] == "NotAllowed"


def test_a_running_cluster_on_an_allowed_repository_is_not_held_by_the_lists():
    facts = healthy3(repository=OFFICIAL)
    facts["pods"] = facts["pods"][:2]
    facts["info"] = info([member(0), member(1), member(2, healthy=False)])
    facts["options"] = ONLY_OFFICIAL
    assert ep.plan(facts)["heal"] == ["e-2"]


def test_a_restore_onto_a_repository_outside_the_list_is_refused_and_makes_nothing():
    obj_ = restore()
    obj_["spec"]["cluster"]["spec"]["repository"] = "registry.evil.example/etcd"
    goal = target(obj_)
    goal["spec"] = ep.normalize_spec(
        {"metadata": {"name": "again"}, "spec": obj_["spec"]["cluster"]["spec"]}, ONLY_OFFICIAL
    )
    result = rp.plan(obj_, seen(), goal)
    assert [(r["reason"], r["field"]) for r in result["refusals"]] == [
        ("NotAllowed", "spec.cluster.spec.repository")
    ]
    assert result["refusals"][0]["message"].startswith("spec.cluster.spec.repository")
    assert result["create"] == [], "no cluster, claim or restore Job"
    # Without the list, the same restore goes ahead.
    assert rp.plan(obj_, seen(), target(obj_))["create"]


@pytest.mark.parametrize(
    "domain, used, refused",
    [
        (None, "cluster.local", False),
        ("", "cluster.local", False),
        ("corp.internal", "corp.internal", False),
        ("k8s-prod.example.com", "k8s-prod.example.com", False),
        ("Cluster.Local", "Cluster.Local", True),
        ("cluster.local.", "cluster.local.", True),
        ("a..b", "a..b", True),
        ("-edge.example", "-edge.example", True),
        ("x" * 64 + ".example", "x" * 64 + ".example", True),
        ("evil.example/path", "evil.example/path", True),
    ],
)
def test_the_cluster_domain_is_the_operator_s_setting_and_a_dns_name(domain, used, refused):
    """Every member's peer and client URL and certificate name ends in it: a domain that is no
    DNS name is refused, naming the setting, before anything is made from it."""
    options = {} if domain is None else {"domain": domain}
    assert cluster_domain(options) == used
    normalized = ep.normalize_spec({"metadata": {"name": "e"}, "spec": {}}, options)
    fields = [p["field"] for p in normalized["problems"]]
    assert fields == (["ETCD_RUNBOOK_CLUSTER_DOMAIN"] if refused else [])
    if refused:
        assert repr(used) in normalized["problems"][0]["message"]
