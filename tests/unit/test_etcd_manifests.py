"""The objects plugins/filter/etcd_manifests.py builds from a plan."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from etcd_runbook import names
from etcd_runbook.rules import etcd_manifests as em
from etcd_runbook.rules import etcd_plan as ep

HOSTILE = "{{ lookup('ansible.builtin.pipe', 'id') }}\n  hostPath: {path: /}"


def a_plan(**spec: Any) -> dict[str, Any]:
    obj = {
        "metadata": {"name": "e", "namespace": "ns", "uid": "0123456789abcdef"},
        "spec": {"size": 3, "version": "3.6.16", **spec},
    }
    return ep.plan({"object": obj, "pods": [], "claims": [], "info": {}, "options": {}})


def seed_claim(p: dict[str, Any]) -> dict[str, Any]:
    return em.member_claim(p, "e-0", f"e-0={em.peer_url(p, 'e-0')}", "new")


def test_claim_records_how_the_member_first_starts():
    p = a_plan(storage={"size": "2Gi", "storageClassName": "fast"})
    c = seed_claim(p)
    assert c["metadata"]["name"] == "e-0-data"
    assert c["metadata"]["annotations"] == {
        names.ANN_INITIAL_CLUSTER: "e-0=https://e-0.e.ns.svc.cluster.local:2380",
        names.ANN_INITIAL_STATE: "new",
        names.ANN_VERSION: "3.6.16",
    }
    assert c["metadata"]["labels"][names.LABEL_VOTER] == "true"
    assert c["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "2Gi"}},
        "storageClassName": "fast",
    }
    learner = em.member_claim(p, "e-1", "x", "existing")
    assert learner["metadata"]["labels"][names.LABEL_VOTER] == "false"


def test_a_new_cluster_s_claims_each_record_every_member_and_new():
    p = a_plan()
    assert p["bootstrap"] == ["e-0", "e-1", "e-2"]
    claims = em.bootstrap_claims(p, p["bootstrap"])
    every = ",".join(f"e-{i}=https://e-{i}.e.ns.svc.cluster.local:2380" for i in range(3))
    assert [c["metadata"]["name"] for c in claims] == ["e-0-data", "e-1-data", "e-2-data"]
    for c in claims:
        assert c["metadata"]["annotations"][names.ANN_INITIAL_CLUSTER] == every
        assert c["metadata"]["annotations"][names.ANN_INITIAL_STATE] == "new"
        assert c["metadata"]["labels"][names.LABEL_VOTER] == "true"
    # Finishing an interrupted bootstrap: the record its first claims hold, whatever the spec
    # says now (plain http here), so every member starts into the same cluster.
    record = "e-0=http://a:2380,e-1=http://b:2380"
    (late,) = em.bootstrap_claims(a_plan(tls={"enabled": False}), ["e-1"], record)
    assert late["metadata"]["annotations"][names.ANN_INITIAL_CLUSTER] == record


def test_the_cluster_records_that_its_members_are_being_started():
    p = a_plan()
    claims = em.bootstrap_claims(p, p["bootstrap"])
    mark = em.bootstrap_started(p, claims)
    assert (mark["kind"], mark["metadata"]["name"], mark["metadata"]["namespace"]) == (
        "EtcdCluster",
        "e",
        "ns",
    )
    record = claims[0]["metadata"]["annotations"][names.ANN_INITIAL_CLUSTER]
    assert mark["metadata"]["annotations"] == {names.ANN_BOOTSTRAP_STARTED: record}
    assert set(mark) == {"apiVersion", "kind", "metadata"}, "a merge patch of one annotation"


def test_pod_flags_come_from_the_claim_and_the_spec():
    p = a_plan(storage={"size": "4Gi"})
    pod = em.member_pod(p, "e-0", seed_claim(p))
    args = pod["spec"]["containers"][0]["args"]
    assert "--initial-cluster=e-0=https://e-0.e.ns.svc.cluster.local:2380" in args
    assert "--initial-cluster-state=new" in args
    assert "--initial-cluster-token=e-01234567" in args
    assert f"--quota-backend-bytes={(4096 - 384) // 2 * 1024 * 1024}" in args
    assert "--peer-client-cert-auth=true" in args
    assert pod["spec"]["containers"][0]["image"] == "gcr.io/etcd-development/etcd:v3.6.16"
    assert pod["metadata"]["annotations"][names.ANN_POD_HASH] == p["pod_hashes"]["e-0"]
    assert pod["metadata"]["labels"][names.LABEL_VOTER] == "true"


def test_pod_meets_the_restricted_pod_security_standard():
    """The checks of the `restricted` profile (Kubernetes Pod Security Standards, v1.34)."""
    p = a_plan()
    pod = em.member_pod(p, "e-0", seed_claim(p))
    spec = pod["spec"]
    psc = spec["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] != 0
    assert psc["seccompProfile"]["type"] in ("RuntimeDefault", "Localhost")
    assert spec["automountServiceAccountToken"] is False
    assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC")
    for container in spec["containers"]:
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add")
        assert sc["readOnlyRootFilesystem"] is True
        assert sc.get("privileged") is not True
        assert not any(port.get("hostPort") for port in container["ports"])
    allowed = {"persistentVolumeClaim", "secret", "configMap", "emptyDir", "projected"}
    for volume in spec["volumes"]:
        assert set(volume) - {"name"} <= allowed, volume


def test_user_values_are_placed_as_values():
    p = a_plan(
        pod={
            "labels": {"team": HOSTILE},
            "annotations": {"note": HOSTILE},
            "nodeSelector": {"disk": HOSTILE},
            "tolerations": [{"key": HOSTILE, "operator": "Exists"}],
            "affinity": {"nodeAffinity": {"x": HOSTILE}},
            "priorityClassName": HOSTILE,
        },
        tls={"enabled": True, "secrets": {"peer": HOSTILE, "server": "s", "client": "c"}},
    )
    pod = em.member_pod(p, "e-0", seed_claim(p))
    assert pod["metadata"]["labels"]["team"] == HOSTILE
    assert pod["metadata"]["annotations"]["note"] == HOSTILE
    assert pod["spec"]["nodeSelector"] == {"disk": HOSTILE}
    assert pod["spec"]["tolerations"][0] == {"key": HOSTILE, "operator": "Exists"}
    assert pod["spec"]["affinity"]["nodeAffinity"] == {"x": HOSTILE}
    assert pod["spec"]["priorityClassName"] == HOSTILE
    secret_names = [v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v]
    assert secret_names == [HOSTILE, "s"]
    assert "hostPath" not in json.dumps(pod["spec"]["volumes"]).replace(
        HOSTILE.replace("\n", "\\n"), ""
    )


def test_operator_labels_win_over_user_labels():
    p = a_plan(pod={"labels": {names.LABEL_MEMBER: "e-9"}})
    pod = em.member_pod(p, "e-0", seed_claim(p))
    assert pod["metadata"]["labels"][names.LABEL_MEMBER] == "e-0"


@pytest.mark.parametrize(
    "anti, key",
    [
        ("preferred", "preferredDuringSchedulingIgnoredDuringExecution"),
        ("required", "requiredDuringSchedulingIgnoredDuringExecution"),
    ],
)
def test_members_spread_over_nodes_on_top_of_the_users_affinity(anti, key):
    user_term = {"topologyKey": "zone", "labelSelector": {"matchLabels": {"a": "b"}}}
    p = a_plan(pod={"antiAffinity": anti, "affinity": {"podAntiAffinity": {key: [user_term]}}})
    terms = em.member_pod(p, "e-0", seed_claim(p))["spec"]["affinity"]["podAntiAffinity"][key]
    assert terms[0] == user_term and len(terms) == 2


def test_learners_serve_no_clients_and_the_budget_counts_voters_only():
    p = a_plan()
    _headless, client, metrics = em.services(p)
    assert client["spec"]["selector"][names.LABEL_VOTER] == "true"
    # Metrics of every member, a learner's and an unready one's too.
    assert names.LABEL_VOTER not in metrics["spec"]["selector"]
    assert metrics["spec"]["publishNotReadyAddresses"] is True
    assert metrics["metadata"]["name"] == "e-metrics"
    assert metrics["spec"]["ports"] == [
        {"name": "metrics", "port": 2381, "targetPort": "metrics", "protocol": "TCP"}
    ]
    pdb = em.disruption_budget(p)
    assert pdb["spec"]["selector"]["matchLabels"][names.LABEL_VOTER] == "true"
    assert pdb["spec"]["minAvailable"] == 2


@pytest.mark.parametrize(
    ("version", "flag"),
    [
        ("3.6.16", "--peer-skip-client-san-verification=true"),
        ("3.5.26", "--experimental-peer-skip-client-san-verification=true"),
        ("3.4.39", "--experimental-peer-skip-client-san-verification=true"),
    ],
)
def test_peers_under_the_clusters_own_ca_are_not_checked_against_dns(version, flag):
    p = a_plan(version=version)
    args = em.member_pod(p, "e-0", seed_claim(p))["spec"]["containers"][0]["args"]
    assert [a for a in args if "san-verification" in a] == [flag]


def test_peers_under_a_users_ca_keep_etcds_dns_check():
    secrets = {"peer": "p", "server": "s", "client": "c"}
    p = a_plan(tls={"enabled": True, "secrets": secrets})
    args = em.member_pod(p, "e-0", seed_claim(p))["spec"]["containers"][0]["args"]
    assert "--peer-client-cert-auth=true" in args
    assert not [a for a in args if "san-verification" in a]


def test_plain_http_cluster():
    p = a_plan(tls={"enabled": False})
    pod = em.member_pod(p, "e-0", seed_claim(p))
    args = pod["spec"]["containers"][0]["args"]
    assert "--listen-client-urls=http://0.0.0.0:2379" in args
    assert not [a for a in args if "cert" in a]
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["data"]


def test_objects_written_by_the_run_replace_the_observed_ones():
    observed = [
        {"kind": "Service", "metadata": {"name": "a", "v": 1}},
        {"kind": "Service", "metadata": {"name": "b", "v": 1}},
        {"kind": "PodDisruptionBudget", "metadata": {"name": "a", "v": 1}},
    ]
    updated = [{"kind": "Service", "metadata": {"name": "b", "v": 2}}, {}]
    assert em.replace_objects(observed, updated) == [
        {"kind": "Service", "metadata": {"name": "a", "v": 1}},
        {"kind": "PodDisruptionBudget", "metadata": {"name": "a", "v": 1}},
        {"kind": "Service", "metadata": {"name": "b", "v": 2}},
    ]


@pytest.mark.parametrize(
    ("live_change", "stale"),
    [
        (lambda live: None, False),
        # What the API server adds is not a difference.
        (lambda live: live["spec"].update(ipFamilies=["IPv4"], sessionAffinity="None"), False),
        (lambda live: live["metadata"]["labels"].update(extra="x"), False),
        (lambda live: live["spec"].update(publishNotReadyAddresses=False), True),
        (lambda live: live["spec"]["ports"].pop(), True),
        (lambda live: live["metadata"]["labels"].pop("app.kubernetes.io/instance"), True),
        (lambda live: live.update(kind="PodDisruptionBudget"), True),
    ],
)
def test_out_of_date_compares_what_the_role_sets(live_change, stale):
    desired = em.services(a_plan())[0]
    live = copy.deepcopy(desired)
    live["metadata"]["uid"] = "u"
    live_change(live)
    assert em.out_of_date([desired], [live]) == ([desired] if stale else [])
    assert em.out_of_date([desired], []) == [desired]


def test_records_and_voter_labels_are_merge_patches_of_the_planned_members():
    p = a_plan()
    p["record"] = [
        {
            "name": "e-1",
            "member_id": "a1",
            "cluster_id": "c1",
            "voter": "false",
            "version": "3.6.16",
            "initial_cluster": "e-1=https://e-1.e.ns.svc.cluster.local:2380",
        }
    ]
    p["relabel"] = [{"name": "e-2", "voter": "true"}]
    (claim,) = em.claim_records(p)
    assert (claim["kind"], claim["metadata"]["name"], claim["metadata"]["namespace"]) == (
        "PersistentVolumeClaim",
        "e-1-data",
        "ns",
    )
    assert claim["metadata"]["labels"] == {names.LABEL_VOTER: "false"}
    assert claim["metadata"]["annotations"] == {
        names.ANN_MEMBER_ID: "a1",
        names.ANN_CLUSTER_ID: "c1",
        names.ANN_INITIAL_CLUSTER: "e-1=https://e-1.e.ns.svc.cluster.local:2380",
        names.ANN_INITIAL_STATE: "existing",
        names.ANN_VERSION: "3.6.16",
    }
    assert "spec" not in claim, "a record never touches the claim's spec"
    assert em.pod_voter_labels(p) == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "e-2", "namespace": "ns", "labels": {names.LABEL_VOTER: "true"}},
        }
    ]


def test_the_pods_a_runbook_deletes_carry_the_mark_the_watcher_knows():
    doomed = em.doomed_pods(a_plan(), ["e-1", "e-2"], "roll")
    assert [d["metadata"]["name"] for d in doomed] == ["e-1", "e-2"]
    assert {d["metadata"]["namespace"] for d in doomed} == {"ns"}
    # watches.yaml's preemptionOptOutAnnotation.
    assert doomed[0]["metadata"]["annotations"] == {"etcd.runbook.io/deleted-by-runbook": "roll"}
    assert em.doomed_pods(a_plan(), [], "roll") == []


def test_member_pods_are_made_each_from_its_own_claim():
    p = a_plan()
    claims = [em.member_claim(p, m, f"{m}=x", "existing") for m in ("e-1", "e-2")]
    pods = em.member_pods(p, ["e-2", "e-1"], claims)
    assert [pod["metadata"]["name"] for pod in pods] == ["e-2", "e-1"]
    assert [pod["spec"]["containers"][0]["args"] for pod in pods] == [
        em.member_pod(p, m, c)["spec"]["containers"][0]["args"]
        for m, c in (("e-2", claims[1]), ("e-1", claims[0]))
    ]


def test_member_pods_wait_for_the_operator_on_a_lost_node_not_for_eviction():
    # Kubernetes' 300 s eviction would leave a Pod that never finishes going; the operator
    # replaces the member after spec.nodeLossTimeout instead.
    p = a_plan()
    pod = em.member_pod(p, "e-0", seed_claim(p))
    lost = [t for t in pod["spec"]["tolerations"] if t["effect"] == "NoExecute"]
    assert sorted(t["key"] for t in lost) == [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]
    assert all("tolerationSeconds" not in t for t in lost)


@pytest.mark.parametrize(
    "make",
    [
        lambda p: em.member_pod(p, "e-1", seed_claim(p)),
        lambda p: em.member_pods(p, ["e-0"], [seed_claim(p)]),
    ],
    ids=["one", "many"],
)
def test_no_member_pod_is_built_with_a_secret_the_plan_found_unfit(make):
    # Every path that makes a member Pod (bootstrap, heal, add, replace, roll) builds it here.
    p = a_plan()
    assert make(p)
    unfit = {**p, "tls_unmountable": {"peer": "mine"}}
    with pytest.raises(em.UnmountableSecret, match="would mount Secret mine"):
        make(unfit)


def test_the_ca_secret_is_put_back_from_a_certificate_the_members_trust():
    p = a_plan()
    material = {"server": {"tls.crt": "S", "tls.key": "SK", "ca.crt": "CA"}}
    assert em.tls_restored_ca(p, material) == []
    (secret,) = em.tls_restored_ca({**p, "tls_ca_from": "server"}, material)
    assert secret["metadata"]["name"] == "e-ca" and secret["type"] == "Opaque"
    assert secret["stringData"] == {"tls.crt": "CA", "ca.crt": "CA"}, "no key: it is lost"
    assert secret["metadata"]["annotations"] == {names.ANN_RESTORED_FROM: "e-server-tls"}
    assert (
        secret["metadata"]["labels"]
        == em.tls_secrets(p, {"ca": {}}, ["ca"])[0]["metadata"]["labels"]
    )
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "0123456789abcdef"


@pytest.mark.parametrize(
    ("resources", "env"),
    [
        ({}, []),
        ({"requests": {"cpu": "2", "memory": "1Gi"}}, []),
        (
            {"limits": {"cpu": "500m", "memory": "1Gi"}},
            [
                {"name": "GOMAXPROCS", "value": "1"},
                {"name": "GOMEMLIMIT", "value": str(1024**3 * 9 // 10)},
            ],
        ),
        ({"limits": {"cpu": "2500m"}}, [{"name": "GOMAXPROCS", "value": "3"}]),
        ({"limits": {"cpu": 4}}, [{"name": "GOMAXPROCS", "value": "4"}]),
        ({"limits": {"memory": "512Mi"}}, [{"name": "GOMEMLIMIT", "value": str(483183820)}]),
        # Unreadable limits set nothing (the API server would not have taken them).
        ({"limits": {"cpu": "lots", "memory": "much"}}, []),
    ],
)
def test_go_runtime_follows_the_limits(resources: dict, env: list) -> None:
    assert em.go_runtime_env(resources) == env


@pytest.mark.parametrize(
    ("version", "ready", "live"),
    [
        # Before etcd split its health endpoint: /health (needs a leader), so no liveness.
        ("3.4.30", "/health?exclude=NOSPACE", None),
        ("3.5.10", "/health?exclude=NOSPACE", None),
        # From 3.4.31 and 3.5.11, and every 3.6: /readyz for readiness, /livez (no quorum
        # needed) for liveness and start-up.
        ("3.4.31", "/readyz?exclude=non_learner", "/livez"),
        ("3.5.11", "/readyz?exclude=non_learner", "/livez"),
        ("3.5.35", "/readyz?exclude=non_learner", "/livez"),
        ("3.6.0", "/readyz?exclude=non_learner", "/livez"),
        ("3.7.0", "/readyz?exclude=non_learner", "/livez"),
    ],
)
def test_probes_follow_what_the_version_answers(version: str, ready: str, live: str | None):
    probes = em.health_probes(version)
    assert probes["readinessProbe"]["httpGet"] == {"path": ready, "port": 2381}
    assert probes["readinessProbe"]["periodSeconds"] == 2
    if live is None:
        assert set(probes) == {"readinessProbe"}
        return
    for kind in ("livenessProbe", "startupProbe"):
        assert probes[kind]["httpGet"] == {"path": live, "port": 2381}
    liveness = probes["livenessProbe"]
    patience = liveness["periodSeconds"] * liveness["failureThreshold"]
    # Never shorter than the longest defragmentation a run allows a member (which stops its
    # reads): the kubelet would restart the member in the middle of it.
    assert patience > 600


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        # Unset: requests, so a member is not BestEffort (evicted first), and no limits.
        (None, {"requests": {"cpu": "100m", "memory": "256Mi"}}),
        ({}, {"requests": {"cpu": "100m", "memory": "256Mi"}}),
        # A user's resources are taken whole (limits alone: Kubernetes makes them requests).
        ({"limits": {"memory": "1Gi"}}, {"limits": {"memory": "1Gi"}}),
        ({"requests": {"cpu": "2"}}, {"requests": {"cpu": "2"}}),
    ],
)
def test_member_pods_request_resources_unless_the_spec_says(resources, expected):
    pod_spec = {} if resources is None else {"pod": {"resources": resources}}
    p = a_plan(**pod_spec)
    pod = em.member_pod(p, "e-0", seed_claim(p))
    assert pod["spec"]["containers"][0]["resources"] == expected
