"""The pure parts of the observation: which Pods are reached, at which address, and the
inputs it refuses."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from etcd_runbook.clients.etcd_errors import EtcdInputError
from etcd_runbook.clients.etcd_kube import KubeError
from etcd_runbook.names import recovery_selector
from etcd_runbook.observe.etcd_observe import (
    Observer,
    ask_etcd,
    awaited,
    cannot_run,
    check,
    dialable,
    dns_endpoints,
    forward_targets,
    member_healthy,
    node_facts,
    peer_url,
    pod_addresses,
    probe_until_answering,
    running,
    stop_asked,
    term_matches,
    term_query,
    tls_files,
    unschedulable,
    wait_pods_gone,
)


def _pod(name: str, phase: str = "Running", deleting: bool = False, ip: str = "") -> dict:
    meta = {"name": name, "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status = {"phase": phase, **({"podIP": ip} if ip else {})}
    return {"metadata": meta, "status": status}


PODS = [
    _pod("e-0", ip="10.0.0.5"),
    _pod("e-1", "Pending", ip="10.0.0.6"),
    _pod("e-2", deleting=True, ip="10.0.0.7"),
    _pod("e-3", ip="fd00::3"),
    _pod("e-5"),
    {"metadata": {"name": "e-4", "uid": "u"}},
]


def test_only_running_pods_not_being_deleted_are_reached():
    assert [p["metadata"]["name"] for p in running(PODS)] == ["e-0", "e-3", "e-5"]
    assert forward_targets(PODS) == ["e-0=uid-e-0", "e-3=uid-e-3", "e-5=uid-e-5"]
    assert dns_endpoints(PODS, "https", "e.ns.svc.cluster.local") == {
        "e-0": "https://e-0.e.ns.svc.cluster.local:2379",
        "e-3": "https://e-3.e.ns.svc.cluster.local:2379",
        "e-5": "https://e-5.e.ns.svc.cluster.local:2379",
    }
    # Reached at its Pod IP when it has one (a running Pod without one keeps its DNS name).
    assert pod_addresses(PODS, "e.ns.svc.cluster.local") == {
        "e-0.e.ns.svc.cluster.local": "10.0.0.5",
        "e-3.e.ns.svc.cluster.local": "fd00::3",
    }


@pytest.mark.parametrize(
    ("etcd", "problem"),
    [
        ({"enabled": False}, None),
        ({"enabled": True, "dns_suffix": "s"}, None),
        ({"enabled": True, "port_forward": {"script": "x"}}, None),
        ({"enabled": True}, "dns_suffix is required"),
        ({"enabled": True, "dns_suffix": "s", "tls": True, "server_secret": "a"}, "client_secret"),
    ],
)
def test_inputs(etcd, problem):
    if problem is None:
        check(etcd)
    else:
        with pytest.raises(EtcdInputError, match=problem):
            check(etcd)


def _secret(name: str, **data: str) -> dict:
    return {
        "metadata": {"name": name},
        "data": {
            k.replace("_", "."): base64.b64encode(v.encode()).decode() for k, v in data.items()
        },
    }


def test_tls_files_need_the_ca_and_the_client_pair():
    secrets = [
        _secret("srv", ca_crt="CA", tls_crt="S", tls_key="SK"),
        _secret("cli", tls_crt="C", tls_key="K"),
    ]
    files = tls_files(secrets, "srv", "cli")
    assert {k: Path(v).read_text() for k, v in files.items()} == {
        "ca_cert": "CA",
        "client_cert": "C",
        "client_key": "K",
    }
    assert tls_files([_secret("srv", tls_crt="S"), secrets[1]], "srv", "cli") == {}
    assert tls_files([secrets[1]], "srv", "cli") == {}


def test_a_lost_secret_does_not_leave_the_runbook_blind():
    # The role's certificates all chain to the cluster's CA: another Secret read stands in.
    peer = {**_secret("peer", ca_crt="CA", tls_crt="P", tls_key="PK"), "type": "kubernetes.io/tls"}
    server = {**_secret("srv", ca_crt="CA", tls_crt="S", tls_key="SK"), "type": "kubernetes.io/tls"}
    ca = {**_secret("ca", ca_crt="CA", tls_crt="CA", tls_key="CAK"), "type": "Opaque"}

    def chosen(secrets: list[dict]) -> dict[str, str]:
        return {k: Path(v).read_text() for k, v in tls_files(secrets, "srv", "cli").items()}

    assert chosen([ca, peer, server]) == {"ca_cert": "CA", "client_cert": "S", "client_key": "SK"}
    assert chosen([ca, peer]) == {"ca_cert": "CA", "client_cert": "P", "client_key": "PK"}
    assert chosen([ca]) == {}, "never the CA's own pair"


def test_no_running_member_is_an_answer_not_a_failure():
    assert ask_etcd({}, {}, 1.0, None, {}) == ({}, "no member Pod is running")
    info, error = ask_etcd({"e-0": "http://127.0.0.1:1"}, {}, 1.0, None, {})
    assert info == {} and "127.0.0.1:1" in error


def test_member_healthy():
    info = {"members": [{"name": "a", "healthy": True}, {"name": "b", "healthy": False}]}
    assert member_healthy(info, "a") and not member_healthy(info, "b")
    assert not member_healthy(info, "c") and not member_healthy({}, "a")


def test_an_awaited_member_is_the_one_at_its_whole_peer_url():
    """A member of another namespace's cluster of the same name calls itself e-1 too."""
    etcd = {"tls": True, "dns_suffix": "e.ns.svc.cluster.local"}
    ours = "https://e-1.e.ns.svc.cluster.local:2380"
    assert peer_url(etcd, "e-1") == ours
    assert peer_url({"tls": True}, "e-1") == ""
    theirs = {"name": "e-1", "healthy": True, "peer_urls": [ours.replace(".ns.", ".other.")]}
    assert not member_healthy({"members": [theirs]}, "e-1", ours)
    mine = {"name": "", "healthy": True, "peer_urls": [ours.upper() + "/"]}
    assert member_healthy({"members": [theirs, mine]}, "e-1", ours)


class _Reader:
    def __init__(self) -> None:
        self.listed: list[str] = []

    def items(self, path: str, label_selector: str, kind: str, api_version: str) -> list:
        self.listed.append(path)
        return []


class _Secrets(_Reader):
    """Secrets readable only by name, as a backup Job's Role allows."""

    def __init__(self, secrets: dict[str, dict]) -> None:
        super().__init__()
        self.secrets = secrets
        self.got: list[str] = []

    def get(self, path: str, query: dict | None = None) -> dict | None:
        self.got.append(path)
        return self.secrets.get(path.rsplit("/", 1)[-1])

    def items(self, path: str, label_selector: str, kind: str, api_version: str) -> list:
        assert kind != "Secret", "a Secret is never listed when the names are given"
        return super().items(path, label_selector, kind, api_version)


def _labelled(name: str, labels: dict[str, str]) -> dict:
    return {"metadata": {"name": name, "labels": labels}, "data": {"ca.crt": "eA=="}}


@pytest.mark.parametrize(
    ("selector", "kept"),
    [
        ("etcd.runbook.io/tls-for=e", ["s", "c"]),
        ("app.kubernetes.io/name=etcd,etcd.runbook.io/cluster=e", ["s"]),
        # A Secret named in spec.tls.secrets but not labelled for the cluster is never read.
        ("etcd.runbook.io/tls-for=other", []),
    ],
)
def test_secrets_given_by_name_are_read_one_by_one_and_still_selected(selector, kept):
    reader = _Secrets(
        {
            "s": _labelled(
                "s",
                {
                    "etcd.runbook.io/tls-for": "e",
                    "app.kubernetes.io/name": "etcd",
                    "etcd.runbook.io/cluster": "e",
                },
            ),
            "c": _labelled("c", {"etcd.runbook.io/tls-for": "e"}),
        }
    )
    observer = Observer(reader, "ns", "a=b", selector, 5.0, secret_names=["s", "c", "gone"])
    facts = observer.kubernetes()
    assert [x["metadata"]["name"] for x in facts["secrets"]] == kept
    assert [g.rsplit("/", 1)[-1] for g in reader.got if "/secrets/" in g] == ["s", "c", "gone"]


@pytest.mark.parametrize("backups", [False, True])
def test_the_namespaces_backups_are_listed_only_when_asked(backups):
    reader = _Reader()
    facts = Observer(reader, "ns", "a=b", None, 5.0, backups=backups).kubernetes()
    listed = "/apis/etcd.runbook.io/v1alpha1/namespaces/ns/etcdbackups"
    assert (listed in reader.listed) == backups
    assert ("backups" in facts) == backups


RECOVERY = recovery_selector("e")
JOBS_PATH = "/apis/batch/v1/namespaces/ns/jobs"
PODS_PATH = "/api/v1/namespaces/ns/pods"
OWN_PATH = "/api/v1/namespaces/ops/pods/operator-0"


class _Objects:
    """Lists by path and label selector, objects by path; GETs and lists recorded, and a
    Forbidden for the paths given."""

    def __init__(
        self,
        lists: dict[tuple[str, str], list[dict]],
        objects: dict[str, dict],
        forbidden: tuple[str, ...] = (),
    ) -> None:
        self.lists, self.objects, self.forbidden = lists, objects, forbidden
        self.asked: list[str] = []

    def items(self, path: str, label_selector: str, kind: str, api_version: str) -> list:
        self.asked.append(f"{path}?{label_selector}")
        if path in self.forbidden:
            raise KubeError(f"GET {path}: HTTP 403: jobs is forbidden", reason="Forbidden")
        return [
            {"apiVersion": api_version, "kind": kind, **item}
            for item in self.lists.get((path, label_selector), [])
        ]

    def get(self, path: str, query: dict[str, str] | None = None) -> dict | None:
        self.asked.append(path)
        return self.objects.get(path)


def _recovery(kind: str, name: str) -> dict:
    labels = {"app.kubernetes.io/name": "etcd-recovery", "etcd.runbook.io/cluster": "e"}
    return {"metadata": {"name": name, "labels": labels, "managedFields": [{"manager": kind}]}}


def _operator(*containers: tuple[str, str]) -> dict:
    return {"spec": {"containers": [{"name": n, "image": i} for n, i in containers]}}


@pytest.mark.parametrize(
    ("selector", "jobs", "pods"),
    [
        # Not asked (a read-only run): neither list is read.
        (None, [], []),
        ("", [], []),
        (RECOVERY, ["e-recover-3f9a1c2b7d"], ["e-recover-3f9a1c2b7d-q8v4n"]),
    ],
)
def test_the_recovery_jobs_and_their_pods_are_listed_only_when_asked(selector, jobs, pods):
    reader = _Objects(
        {
            (JOBS_PATH, RECOVERY): [_recovery("Job", "e-recover-3f9a1c2b7d")],
            (PODS_PATH, RECOVERY): [_recovery("Pod", "e-recover-3f9a1c2b7d-q8v4n")],
            # A member Pod: the member selector's, never a recovery's.
            (PODS_PATH, "a=b"): [_pod("e-0")],
        },
        {},
    )
    facts = Observer(reader, "ns", "a=b", None, 5.0, recovery_selector=selector).kubernetes()
    assert [j["metadata"]["name"] for j in facts["recovery_jobs"]] == jobs
    assert [p["metadata"]["name"] for p in facts["recovery_pods"]] == pods
    assert [p["metadata"]["name"] for p in facts["pods"]] == ["e-0"]
    assert all(j["kind"] == "Job" for j in facts["recovery_jobs"])
    # Made lean like every other list: managedFields would be copied into each task's vars.
    assert not any(
        "managedFields" in o["metadata"] for o in facts["recovery_jobs"] + facts["recovery_pods"]
    )
    wanted = [f"{JOBS_PATH}?{RECOVERY}", f"{PODS_PATH}?{RECOVERY}"] if selector else []
    assert [a for a in reader.asked if not a.endswith("?a=b")] == wanted


def test_recovery_jobs_nobody_may_list_fail_the_look():
    # Unlike Nodes (unknown when forbidden): a recovery Job nobody could see would be taken
    # for none, and a second one made.
    reader = _Objects({}, {}, forbidden=(JOBS_PATH,))
    observer = Observer(reader, "ns", "a=b", None, 5.0, recovery_selector=RECOVERY)
    with pytest.raises(KubeError) as raised:
        observer.kubernetes()
    assert raised.value.reason == "Forbidden" and JOBS_PATH in raised.value.message


@pytest.mark.parametrize(
    ("own_pod", "pod", "image"),
    [
        (
            {"namespace": "ops", "name": "operator-0", "container": "manager"},
            _operator(("sidecar", "proxy:2"), ("manager", "op:1")),
            "op:1",
        ),
        # No container of that name: the first one's.
        (
            {"namespace": "ops", "name": "operator-0", "container": "manager"},
            _operator(("operator", "op:2")),
            "op:2",
        ),
        ({"namespace": "ops", "name": "operator-0"}, None, ""),
        # Not named (outside the operator, or ETCD_RUNBOOK_IMAGE set): no Pod is read.
        (None, None, ""),
        ({}, None, ""),
    ],
)
def test_the_operators_own_image_is_read_from_its_pod_when_named(own_pod, pod, image):
    reader = _Objects({}, {OWN_PATH: pod} if pod else {})
    facts = Observer(reader, "ns", "a=b", None, 5.0, own_pod=own_pod).kubernetes()
    assert facts["image"] == image
    assert (OWN_PATH in reader.asked) == bool(own_pod)


class _Going:
    """Pod lists in turn, as the API server answers while Pods terminate."""

    def __init__(self, answers: list[list[dict]]) -> None:
        self.answers = answers
        self.listed = 0

    def items(self, path: str, label_selector: str, kind: str, api_version: str) -> list:
        answer = self.answers[min(self.listed, len(self.answers) - 1)]
        self.listed += 1
        return answer


@pytest.mark.parametrize(
    ("wait", "members"),
    [
        ({}, []),
        ({"member": "e-0"}, ["e-0"]),
        ({"member": "", "members": ["e-0", "e-1", "e-2"]}, ["e-0", "e-1", "e-2"]),
        ({"member": "e-3", "members": ["e-0"]}, ["e-3", "e-0"]),
    ],
)
def test_a_look_waits_for_the_member_and_the_members_named(wait, members):
    assert awaited(wait) == members


ALL = ["e-0", "e-1", "e-2"]


@pytest.mark.parametrize(
    ("answers", "names", "within", "still", "lists"),
    [
        # Nothing going: one list, no wait.
        ([[_pod("e-0")]], ALL, 10, [], 1),
        # Gone on the third list (the Pod disappears; a new one may already be there).
        (
            [[_pod("e-1", deleting=True)], [_pod("e-1", deleting=True)], [_pod("e-0")]],
            ALL,
            10,
            [],
            3,
        ),
        ([[_pod("e-1", deleting=True)], []], ALL, 10, [], 2),
        # Never gone: the names of those still going once the time is up.
        (
            [[_pod("e-1", deleting=True), _pod("e-2", deleting=True), _pod("e-0")]],
            ALL,
            0,
            ["e-1", "e-2"],
            1,
        ),
        # A Pod stuck going on a lost node is not named: only e-1 is waited for.
        (
            [
                [_pod("e-1", deleting=True), _pod("e-2", deleting=True)],
                [_pod("e-2", deleting=True)],
            ],
            ["e-1"],
            10,
            [],
            2,
        ),
    ],
)
def test_pods_being_deleted_are_waited_for_by_listing_pods_only(
    answers, names, within, still, lists
):
    reader = _Going(answers)
    slept: list[float] = []
    observer = Observer(reader, "ns", "a=b", None, 5.0)
    assert wait_pods_gone(observer, names, time.monotonic() + within, slept.append) == still
    assert reader.listed == lists and len(slept) == lists - 1


@pytest.mark.parametrize(
    ("conditions", "member", "said"),
    [
        (
            [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "m",
                }
            ],
            "e-0",
            "m",
        ),
        (
            [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
            "e-0",
            "no node fits it",
        ),
        # Another member's Pod, or one placed: nothing said.
        ([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}], "e-1", ""),
        ([{"type": "PodScheduled", "status": "True"}], "e-0", ""),
        ([], "e-0", ""),
    ],
)
def test_a_member_pod_no_node_takes_ends_the_wait(conditions, member, said):
    pods = [{"metadata": {"name": "e-0"}, "status": {"phase": "Pending", "conditions": conditions}}]
    assert unschedulable(pods, member) == said


LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
NOW = "2026-11-25T10:00:00Z"


def _node(name: str, ready: str = "True", since: str = "", **labels: str) -> dict:
    condition = {"type": "Ready", "status": ready}
    if since:
        condition["lastTransitionTime"] = since
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, condition]},
    }


def _lease(renew_time: str, stored_at: str) -> dict:
    """A node Lease as the API server returns it: the kubelet wrote renewTime on its own
    clock; the API server recorded, on its clock, when that writer last changed a field."""
    return {
        "metadata": {
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "time": "2026-11-25T09:59:59Z",
                    "fieldsV1": {"f:metadata": {"f:ownerReferences": {}}},
                },
                {
                    "manager": "kubelet",
                    "time": stored_at,
                    "fieldsV1": {"f:spec": {"f:holderIdentity": {}, "f:renewTime": {}}},
                },
            ]
        },
        "spec": {"renewTime": renew_time},
    }


def _claim(member: str, volume: str = "") -> dict:
    return {
        "metadata": {"name": f"{member}-data", "labels": {"etcd.runbook.io/member": member}},
        "spec": {"volumeName": volume} if volume else {},
    }


def _pv(name: str, *terms: dict) -> dict:
    spec: dict = {"local": {"path": f"/v/{name}"}}
    if terms:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": list(terms)}}
    return {"metadata": {"name": name}, "spec": spec}


def _on(key: str, *values: str, op: str = "In") -> dict:
    return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}


class _Cluster:
    """An API server for the look: member Pods and claims, Nodes (by name, and listed by a
    label selector of `key in (values)` or by name), their Leases and PersistentVolumes;
    each answer dated NOW on the API server's clock."""

    def __init__(
        self,
        pods: list[dict],
        claims: list[dict],
        objects: dict[str, dict],
        nodes: list[dict] = (),  # type: ignore[assignment]
        forbidden: tuple[str, ...] = (),
    ) -> None:
        self.pods, self.claims, self.objects, self.nodes = pods, claims, objects, list(nodes)
        self.forbidden = forbidden
        self.got: list[str] = []
        self.date = ""

    def items(self, path: str, label_selector: str, kind: str, api_version: str) -> list:
        if path.endswith("/pods"):
            return self.pods
        if path.endswith("/persistentvolumeclaims"):
            return self.claims
        return []

    def get(self, path: str, query: dict[str, str] | None = None) -> dict | None:
        self.got.append(path + (f"?{sorted(query.items())}" if query else ""))
        self.date = NOW
        if path in self.forbidden or "/" in self.forbidden:
            raise KubeError(f"GET {path}: HTTP 403", reason="Forbidden")
        if path == "/api/v1/nodes":
            return {"items": [n for n in self.nodes if _listed(n, query or {})]}
        return self.objects.get(path)


def _listed(node: dict, query: dict[str, str]) -> bool:
    """The few selectors the tests use: `key in (a,b)` and `metadata.name=x`."""
    labels = node["metadata"]["labels"]
    for part in filter(None, query.get("labelSelector", "").split("),")):
        key, values = part.split(" in (")
        if labels.get(key) not in values.rstrip(")").split(","):
            return False
    field = query.get("fieldSelector", "")
    return not field or node["metadata"]["name"] == field.removeprefix("metadata.name=")


def _placed(name: str, node: str = "") -> dict:
    return {"metadata": {"name": name}, "spec": {"nodeName": node} if node else {}}


def test_a_node_s_silence_is_counted_on_the_api_server_s_clock():
    # The kubelet's clock is an hour behind: its renewTime says nothing about how long ago
    # it renewed. The API server stored the renewal 3 s before it answered.
    facts = node_facts(
        _node("n1"), _lease("2026-11-25T09:00:00.123456Z", "2026-11-25T09:59:57Z"), NOW
    )
    assert facts == {
        "found": True,
        "ready": "True",
        "ready_since": "",
        "renewed": "2026-11-25T09:00:00.123456Z",
        "silent_for": 3.0,
        "read_at": NOW,
    }
    # The API server's clock only: the entry that owns renewTime, not a later one of another
    # writer, and no silence without the Lease or its record.
    assert node_facts(_node("n1"), _lease("x", "2026-11-25T09:59:30Z"), NOW)["silent_for"] == 30
    assert node_facts(_node("n1"), None, NOW)["silent_for"] is None
    assert node_facts(_node("n1"), {"spec": {"renewTime": NOW}}, NOW)["silent_for"] is None
    assert node_facts(_node("n1"), _lease(NOW, NOW), "")["silent_for"] is None
    assert node_facts(None, None, NOW) == {
        "found": False,
        "ready": "Unknown",
        "ready_since": "",
        "renewed": "",
        "silent_for": None,
        "read_at": NOW,
    }
    assert node_facts({"status": {}}, None, NOW)["ready"] == "Unknown"


def test_each_node_of_a_member_pod_is_read_once_with_its_lease():
    reader = _Cluster(
        [_placed("e-0", "n1"), _placed("e-1", "n1"), _placed("e-2", "gone")],
        [],
        {
            "/api/v1/nodes/n1": _node("n1", "Unknown", "2026-11-25T09:00:50Z"),
            f"{LEASES}/n1": _lease("2026-11-25T09:00:00Z", "2026-11-25T09:00:10Z"),
        },
    )
    nodes = Observer(reader, "ns", "a=b", None, 5.0).kubernetes()["nodes"]
    assert sorted(nodes) == ["gone", "n1"]
    assert nodes["gone"]["found"] is False
    assert nodes["n1"]["ready_since"] == "2026-11-25T09:00:50Z"
    assert nodes["n1"]["silent_for"] == 3590.0
    assert reader.got.count("/api/v1/nodes/n1") == 1


# Three members whose claims' volumes are each in a different place.
ZONE = _on("topology.kubernetes.io/zone", "z1")


@pytest.mark.parametrize(
    ("pods", "claim", "pv", "nodes", "volume", "read"),
    [
        # Its Pod runs on a node that is fine: its volume is not read.
        ([_placed("e-0", "n1")], _claim("e-0", "pv-0"), None, [], None, []),
        # No Pod: its volume's affinity admits n1 (by its name), which is Ready.
        (
            [],
            _claim("e-0", "pv-0"),
            _pv("pv-0", _on("kubernetes.io/hostname", "n1")),
            [_node("n1")],
            {"nodes": ["n1"], "pinned": ["n1"], "anywhere": False},
            ["n1"],
        ),
        # The node of a node-local volume no longer exists: nowhere to go, and named.
        (
            [],
            _claim("e-0", "pv-0"),
            _pv("pv-0", _on("kubernetes.io/hostname", "old")),
            [_node("n1")],
            {"nodes": [], "pinned": ["old"], "anywhere": False},
            [],
        ),
        # A zonal volume: every node of the zone, the Ready first, at most five.
        (
            [_placed("e-0")],
            _claim("e-0", "pv-0"),
            _pv("pv-0", ZONE),
            [
                _node(
                    f"n{i}", "Unknown" if i < 3 else "True", **{"topology.kubernetes.io/zone": "z1"}
                )
                for i in range(8)
            ]
            + [_node("other", **{"topology.kubernetes.io/zone": "z2"})],
            {"nodes": ["n3", "n4", "n5", "n6", "n7"], "pinned": [], "anywhere": False},
            ["n3", "n4", "n5", "n6", "n7"],
        ),
        # Any node may mount it (no affinity).
        ([], _claim("e-0", "pv-0"), _pv("pv-0"), [], {"anywhere": True}, []),
        # Not bound yet, or its volume gone.
        ([], _claim("e-0"), None, [], {"bound": False}, []),
        ([], _claim("e-0", "pv-0"), None, [], {"found": False, "pv": "pv-0"}, []),
    ],
)
def test_where_a_member_s_volume_can_go_is_read_for_members_no_usable_node_runs(
    pods, claim, pv, nodes, volume, read
):
    objects = {"/api/v1/nodes/n1": _node("n1"), f"{LEASES}/n1": _lease(NOW, NOW)}
    if pv is not None:
        objects[f"/api/v1/persistentvolumes/{pv['metadata']['name']}"] = pv
    reader = _Cluster(pods, [claim], objects, nodes)
    facts = Observer(reader, "ns", "a=b", None, 5.0).kubernetes()
    if volume is None:
        assert facts["volumes"] == {}
        assert not [p for p in reader.got if "persistentvolumes" in p]
        return
    seen = facts["volumes"]["e-0-data"]
    assert {k: seen[k] for k in volume} == volume
    # The admitted nodes' facts are there for the plan to judge.
    assert all(n in facts["nodes"] for n in read)


@pytest.mark.parametrize("denied", ["/api/v1/persistentvolumes/pv-0", "/api/v1/nodes"])
def test_volumes_nobody_may_read_are_unknown_not_stranded(denied):
    # Rights to the Pods' Nodes, but not to PersistentVolumes, or not to list Nodes: no member
    # is judged by its volume.
    reader = _Cluster(
        [],
        [_claim("e-0", "pv-0")],
        {"/api/v1/persistentvolumes/pv-0": _pv("pv-0", _on("kubernetes.io/hostname", "n1"))},
        [_node("n1")],
        forbidden=(denied,),
    )
    assert Observer(reader, "ns", "a=b", None, 5.0).kubernetes()["volumes"] is None


def test_nodes_nobody_may_read_are_unknown_not_lost():
    # The namespaced install has no right to Nodes: no member is ever judged by its node, nor
    # by its volume.
    reader = _Cluster([_placed("e-0", "n1")], [_claim("e-0", "pv-0")], {}, forbidden=("/",))
    facts = Observer(reader, "ns", "a=b", None, 5.0).kubernetes()
    assert facts["nodes"] is None and facts["volumes"] is None


@pytest.mark.parametrize(
    ("term", "labels", "name", "matches"),
    [
        (_on("zone", "a", "b"), {"zone": "b"}, "n", True),
        (_on("zone", "a"), {"zone": "b"}, "n", False),
        (_on("zone", "a"), {}, "n", False),
        (_on("zone", "a", op="NotIn"), {}, "n", True),
        (_on("zone", "a", op="NotIn"), {"zone": "a"}, "n", False),
        ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, {"zone": ""}, "n", True),
        ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, {}, "n", True),
        (_on("cpus", "4", op="Gt"), {"cpus": "8"}, "n", True),
        (_on("cpus", "4", op="Lt"), {"cpus": "8"}, "n", False),
        (_on("cpus", "4", op="Gt"), {"cpus": "many"}, "n", False),
        (
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]},
            {},
            "n",
            True,
        ),
        (
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["m"]}]},
            {},
            "n",
            False,
        ),
        # Every requirement of a term; an empty term matches no node.
        (
            {
                "matchExpressions": [
                    *_on("zone", "a")["matchExpressions"],
                    *_on("os", "linux")["matchExpressions"],
                ]
            },
            {"zone": "a"},
            "n",
            False,
        ),
        ({}, {"zone": "a"}, "n", False),
        (_on("zone", "a", op="Near"), {"zone": "a"}, "n", False),
    ],
)
def test_a_volume_s_node_affinity_is_judged_as_kubernetes_does(term, labels, name, matches):
    assert term_matches(term, {"metadata": {"name": name, "labels": labels}}) is matches


def test_the_nodes_a_term_may_match_are_listed_by_its_selectors():
    term = {
        "matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a", "b"]},
            {"key": "spot", "operator": "DoesNotExist"},
            {"key": "gpu", "operator": "Exists"},
            {"key": "pool", "operator": "NotIn", "values": ["old"]},
            {"key": "cpus", "operator": "Gt", "values": ["4"]},
        ],
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
    }
    assert term_query(term) == {
        "limit": "100",
        "labelSelector": "zone in (a,b),!spot,gpu,pool notin (old)",
        "fieldSelector": "metadata.name=n1",
    }
    assert term_query({}) == {"limit": "100"}


@pytest.mark.parametrize(
    ("node", "dialled"),
    [
        ({"found": True, "ready": "True"}, True),
        ({"found": True, "ready": "Unknown"}, False),
        ({"found": True, "ready": "False"}, False),
        ({"found": False, "ready": "Unknown"}, False),
        # A node nobody could read (the namespaced install): dialled, as before.
        (None, True),
    ],
)
def test_a_member_pod_on_a_node_not_ready_is_never_dialled(node, dialled):
    pods = [
        {**_pod("e-0", ip="10.0.0.5"), "spec": {"nodeName": "n0"}},
        {**_pod("e-1", ip="10.0.0.6"), "spec": {"nodeName": "n1"}},
    ]
    nodes = None if node is None else {"n0": {"found": True, "ready": "True"}, "n1": node}
    names = [p["metadata"]["name"] for p in dialable(pods, nodes)]
    assert names == (["e-0", "e-1"] if dialled else ["e-0"])


def _unschedulable(name: str) -> dict:
    pod = _pod(name, "Pending")
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no"}
    ]
    return pod


@pytest.mark.parametrize(
    ("reads", "answers", "probes"),
    [
        # Asked each time until it answers, then the caller looks at everything again.
        ([[_pod("e-3", ip="10.0.0.9")]] * 3, [False, False, True], 3),
        # No node takes its Pod: said at once by the whole look, not waited out.
        ([[_pod("e-3", "Pending")], [_unschedulable("e-3")]], [False], 1),
        # Never answers: the deadline ends the probing.
        ([[_pod("e-3", ip="10.0.0.9")]] * 50, [False] * 50, None),
    ],
)
def test_a_wait_probes_only_the_awaited_members_until_they_answer(reads, answers, probes):
    reads, answers = iter(reads), iter(answers)
    asked: list[dict] = []
    slept: list[float] = []

    def probe(endpoints: dict, addresses: dict) -> bool:
        asked.append(endpoints)
        return next(answers)

    deadline = time.monotonic() + (0.3 if probes is None else 60)
    probe_until_answering(
        lambda: next(reads),
        lambda pods: {"endpoints": dns_endpoints(pods, "https", "s"), "addresses": {}},
        probe,
        ["e-3"],
        deadline,
        sleep=lambda seconds: slept.append(seconds) or time.sleep(0.01),  # type: ignore[func-returns-value]
    )
    if probes is not None:
        assert len(asked) == probes
    else:
        assert time.monotonic() >= deadline and asked
    assert set(slept) == {0.5}
    assert all(a in ({}, {"e-3": "https://e-3.s:2379"}) for a in asked)


def _failing(name: str, restarts: int = 0, **state: dict) -> dict:
    pod = _pod(name, ip="10.0.0.9")
    pod["status"]["containerStatuses"] = [
        {
            "name": "etcd",
            "image": "etcd:v3.6.16",
            "restartCount": restarts,
            "state": state or {"running": {}},
        }
    ]
    return pod


@pytest.mark.parametrize(
    ("pod", "said"),
    [
        # The plan's words (etcd_runbook/rules/etcd_pods.py): it halts the roll on the same.
        (
            _failing("e-3", waiting={"reason": "ErrImagePull"}),
            "its image etcd:v3.6.16 cannot be pulled (ErrImagePull)",
        ),
        (
            _failing("e-3", 2, waiting={"reason": "CrashLoopBackOff"}),
            "its container cannot start (CrashLoopBackOff)",
        ),
        (
            _failing("e-3", terminated={"reason": "OOMKilled", "exitCode": 137}),
            "etcd was killed for want of memory (OOMKilled)",
        ),
        (_failing("e-3", 1), "etcd exited (Error, exit code None, 1 restart)"),
        # Being made, or running since it was made: nothing to say.
        (_failing("e-3", waiting={"reason": "ContainerCreating"}), ""),
        (_failing("e-3"), ""),
        (_pod("e-3"), ""),
        (_failing("e-4", waiting={"reason": "ErrImagePull"}), ""),
    ],
)
def test_what_a_roll_s_wait_stops_on(pod, said):
    assert cannot_run([pod], "e-3") == said


@pytest.mark.parametrize(("failing", "reads"), [(True, 2), (False, None)])
def test_a_roll_s_wait_ends_when_the_new_pod_cannot_run(failing, reads):
    """The roll's wait (failing) ends at the first read that shows its image cannot be
    pulled; any other wait goes on until the member answers, or its deadline."""
    seen: list[int] = []

    def pods() -> list[dict]:
        seen.append(1)
        if len(seen) == 1:
            return [_pod("e-3", "Pending")]
        return [_failing("e-3", waiting={"reason": "ErrImagePull"})]

    deadline = time.monotonic() + (60 if failing else 0.2)
    probe_until_answering(
        pods,
        lambda pods: {"endpoints": dns_endpoints(pods, "https", "s"), "addresses": {}},
        lambda endpoints, addresses: False,
        ["e-3"],
        deadline,
        sleep=lambda seconds: time.sleep(0.01),
        failing=failing,
    )
    if reads is not None:
        assert len(seen) == reads
    else:
        assert time.monotonic() >= deadline and len(seen) > 2


def test_a_stop_is_asked_only_by_a_file_that_exists(tmp_path):
    there = tmp_path / "stop"
    assert not stop_asked("")
    assert not stop_asked(str(there))
    there.touch()
    assert stop_asked(str(there))


def test_a_stop_ends_the_wait_for_pods_going_without_waiting_out_the_deadline():
    reader = _Going([[_pod("e-1", deleting=True)]])
    observer = Observer(reader, "ns", "a=b", None, 5.0)
    asked = iter([False, False, True])
    started = time.monotonic()
    still = wait_pods_gone(observer, ["e-1"], started + 60, lambda s: None, lambda: next(asked))
    assert still == ["e-1"] and reader.listed == 3
    assert time.monotonic() - started < 5


def test_a_stop_ends_the_probing_without_waiting_out_the_deadline():
    asked = iter([False, True])
    probes: list[dict] = []
    started = time.monotonic()
    probe_until_answering(
        lambda: [_pod("e-3", ip="10.0.0.9")],
        lambda pods: {"endpoints": dns_endpoints(pods, "https", "s"), "addresses": {}},
        lambda endpoints, addresses: probes.append(endpoints) or False,  # type: ignore[func-returns-value]
        ["e-3"],
        started + 60,
        sleep=lambda seconds: None,
        stopped=lambda: next(asked),
    )
    assert len(probes) == 1
    assert time.monotonic() - started < 5
