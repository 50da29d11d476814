"""The pure parts of the observation: which Pods are reached, at which address, and the
inputs it refuses."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest
from ansible.module_utils.etcd_errors import EtcdInputError
from ansible.module_utils.etcd_kube import KubeError
from ansible.module_utils.etcd_observe import (
    SELECTED_NODE,
    Observer,
    ask_etcd,
    awaited,
    check,
    dns_endpoints,
    forward_targets,
    member_healthy,
    node_facts,
    peer_url,
    pod_addresses,
    probe_until_answering,
    running,
    stop_asked,
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
    assert tls_files(secrets, "srv", "missing") == {}
    assert tls_files([_secret("srv", tls_crt="S"), secrets[1]], "srv", "cli") == {}


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


@pytest.mark.parametrize("backups", [False, True])
def test_the_namespaces_backups_are_listed_only_when_asked(backups):
    reader = _Reader()
    facts = Observer(reader, "ns", "a=b", None, 5.0, backups=backups).kubernetes()
    listed = "/apis/etcd.runbook.io/v1alpha1/namespaces/ns/etcdbackups"
    assert (listed in reader.listed) == backups
    assert ("backups" in facts) == backups


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


class _Nodes:
    """Member Pods on nodes, and the Nodes and Leases a GET finds (or a refusal)."""

    def __init__(self, objects: dict[str, dict], forbidden: bool = False) -> None:
        self.objects = objects
        self.forbidden = forbidden
        self.got: list[str] = []

    def items(self, path: str, label_selector: str, kind: str, api_version: str) -> list:
        if path.endswith("/pods"):
            return [
                {"metadata": {"name": "e-0"}, "spec": {"nodeName": "n1"}},
                {"metadata": {"name": "e-1"}, "spec": {"nodeName": "n1"}},
                {"metadata": {"name": "e-2"}, "spec": {"nodeName": "gone"}},
                {"metadata": {"name": "e-3"}, "spec": {}},  # not placed yet
            ]
        if path.endswith("/persistentvolumeclaims"):
            # A claim whose member has no Pod: its volume's node is read too.
            return [
                {"metadata": {"name": "e-4-data", "annotations": {SELECTED_NODE: "n2"}}},
                {"metadata": {"name": "e-3-data"}},  # not bound yet
            ]
        return []

    def get(self, path: str, query: dict[str, str] | None = None) -> dict | None:
        self.got.append(path)
        if self.forbidden:
            raise KubeError(f"GET {path}: HTTP 403", reason="Forbidden")
        return self.objects.get(path)


N1 = {
    "status": {
        "conditions": [
            {"type": "MemoryPressure", "status": "False"},
            {"type": "Ready", "status": "Unknown", "lastTransitionTime": "2026-11-25T09:00:50Z"},
        ]
    }
}
N1_LEASE = {"spec": {"renewTime": "2026-11-25T09:00:00.123456Z"}}


def test_each_node_of_a_member_is_read_once_with_its_lease():
    reader = _Nodes(
        {
            "/api/v1/nodes/n1": N1,
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1": N1_LEASE,
        }
    )
    nodes = Observer(reader, "ns", "a=b", None, 5.0).kubernetes()["nodes"]
    assert nodes == {
        "gone": {"found": False, "ready": "Unknown", "ready_since": "", "renewed": ""},
        "n2": {"found": False, "ready": "Unknown", "ready_since": "", "renewed": ""},
        "n1": {
            "found": True,
            "ready": "Unknown",
            "ready_since": "2026-11-25T09:00:50Z",
            "renewed": "2026-11-25T09:00:00.123456Z",
        },
    }
    assert sorted(reader.got).count("/api/v1/nodes/n1") == 1


def test_nodes_nobody_may_read_are_unknown_not_lost():
    # The namespaced install has no right to Nodes: no member is ever judged by its node.
    reader = _Nodes({}, forbidden=True)
    assert Observer(reader, "ns", "a=b", None, 5.0).kubernetes()["nodes"] is None


def test_a_node_without_a_ready_condition_or_lease():
    assert node_facts({"status": {}}, None) == {
        "found": True,
        "ready": "Unknown",
        "ready_since": "",
        "renewed": "",
    }


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
