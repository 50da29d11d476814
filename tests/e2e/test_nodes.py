"""Members over three nodes (hack/cluster up --nodes 3): one member per node, a required spread
that leaves a member without a node, and drains that the PodDisruptionBudget keeps within
quorum. Run by `make test-nodes`, after the other suites, on the same local Kubernetes."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from testbed.cluster import K8sCluster, hack_cluster
from testbed.operator_incluster import DEPLOYMENT, NAMESPACE, SELECTOR
from tests.e2e.helpers import (
    Operator,
    apply,
    condition,
    etcd_cluster,
    etcdctl,
    events,
    get,
    member_list,
    pods,
    wait_available,
)

pytestmark = [pytest.mark.e2e, pytest.mark.nodes, pytest.mark.timeout(1200)]

AVAILABLE_WITHIN = 300


def node_of(k8s: K8sCluster, ns: str, name: str) -> dict[str, str]:
    """Member Pod name -> the node it runs on."""
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods(k8s, ns, name)}


def drain(
    k8s: K8sCluster, node: str, cluster: str, timeout: int
) -> subprocess.CompletedProcess[str]:
    """Cordon `node` and evict the member Pods of `cluster` on it (only those: the operator,
    CoreDNS and other clusters, `make demo`'s included, are not what is tested). Not
    checked: a drain the budget blocks fails."""
    return k8s.kubectl(
        "drain",
        node,
        f"--pod-selector=etcd.runbook.io/cluster={cluster}",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        f"--timeout={timeout}s",
        check=False,
        timeout=timeout + 30,
    )


@pytest.fixture(autouse=True)
def uncordoned(three_nodes: list[str], k8s_cluster: K8sCluster) -> Iterator[None]:
    """A test that fails half way leaves no node cordoned for the next."""
    yield
    for node in three_nodes:
        k8s_cluster.kubectl("uncordon", node, check=False)


def ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in pod.get("status", {}).get("conditions", [])
    )


def node_ready_since(k8s: K8sCluster, node: str, status: str) -> str:
    """When `node`'s Ready condition turned `status`, or '' while it is not that."""
    obj = json.loads(k8s.kubectl("get", "node", node, "-o", "json").stdout)
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    return str(ready["lastTransitionTime"]) if ready["status"] == status else ""


def wait_degraded(k8s: K8sCluster, ns: str, name: str, reason: str, timeout: float) -> Any:
    def degraded() -> dict[str, Any]:
        obj = get(k8s, ns, "etcd", name)
        return obj if condition(obj, "Degraded").get("reason") == reason else {}

    return k8s.wait_for(degraded, timeout=timeout, interval=2, what=f"{name} Degraded {reason}")


def test_each_added_node_listens_only_on_its_loopback_and_its_own_address(
    three_nodes: list[str],
) -> None:
    """Nodes 1 and 2 live in network namespaces of their own (node 0 is the host's, which
    tests/cluster/test_host_network.py checks): their kubelet, kube-proxy and containerd
    listen on the namespace's loopback, and the kubelet's API on the node's own address only
    (the API server's way in)."""
    for node in three_nodes:
        index = int(node.removeprefix("erop-node"))
        if index == 0:
            continue
        out = subprocess.run(
            ["ip", "netns", "exec", node, "ss", "-Hltun"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        local = [line.split()[4] for line in out.splitlines()]
        assert f"10.244.{index}.1:10250" in local, (node, local)
        allowed = re.compile(rf"^(127\.0\.0\.1|\[::1\]|10\.244\.{index}\.1):\d+$")
        assert [a for a in local if not allowed.match(a)] == [], (node, local)


def test_members_spread_over_nodes_and_drains_keep_quorum(
    three_nodes: list[str], k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "spread"
    apply(k8s, ns, etcd_cluster(name))
    wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    placed = node_of(k8s, ns, name)
    # Preferred anti-affinity: with three nodes free, one member on each.
    assert sorted(placed.values()) == three_nodes, placed
    # Nodes 1 and 2 are drained: node 0 holds CoreDNS and the other suites' clusters.
    on = {node: member for member, node in placed.items()}
    first, second = on["erop-node1"], on["erop-node2"]
    etcdctl(k8s, ns, first, "put", "/nodes/before", "drain")

    # One drain: its member is evicted (the budget allows one), the cluster keeps quorum, and
    # its Pod, made again on the same claim, waits for the node its volume is on.
    out = drain(k8s, placed[first], name, 120)
    assert out.returncode == 0, out.stderr
    obj = wait_degraded(k8s, ns, name, "MemberUnschedulable", 120)
    assert condition(obj, "Available")["status"] == "True", obj["status"]
    assert first in condition(obj, "Degraded")["message"]

    # A second drain at the same time: the budget refuses to take a second member.
    blocked = drain(k8s, placed[second], name, 20)
    assert blocked.returncode != 0
    assert "disruption budget" in (blocked.stderr + blocked.stdout), blocked.stderr
    assert second in node_of(k8s, ns, name)
    assert get(k8s, ns, "pod", second)["status"]["phase"] == "Running"

    # The first node back: its member returns on its own data, then the second drain goes.
    k8s.kubectl("uncordon", placed[first])
    wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    assert node_of(k8s, ns, name)[first] == placed[first]
    out = drain(k8s, placed[second], name, 120)
    assert out.returncode == 0, out.stderr
    k8s.kubectl("uncordon", placed[second])
    # The status may still be the one from before the drain: wait for the member's new Pod.
    k8s.wait_for(
        lambda: [p for p in pods(k8s, ns, name) if p["metadata"]["name"] == second and ready(p)],
        timeout=AVAILABLE_WITHIN,
        interval=2,
        what=f"{second} Ready again",
    )
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    assert etcdctl(k8s, ns, second, "get", "/nodes/before", "--print-value-only").strip() == "drain"
    # Every member came back under its own identity, on its own node.
    assert node_of(k8s, ns, name) == placed
    ids = {m["name"]: m["id"] for m in obj["status"]["members"]}
    assert sorted(ids) == sorted(placed)
    # Drains change no spec (a run once saw generation 2 here): who wrote it, if anyone did.
    managers = [(f["manager"], f["operation"]) for f in obj["metadata"].get("managedFields", [])]
    assert obj["metadata"]["generation"] == 1, managers


def test_a_required_spread_leaves_a_fourth_member_without_a_node_and_says_why(
    three_nodes: list[str], k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "strict"
    apply(k8s, ns, etcd_cluster(name, pod={"antiAffinity": "required"}))
    wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    k8s.kubectl(
        "-n", ns, "patch", "etcd", name, "--type=merge", "-p", json.dumps({"spec": {"size": 4}})
    )
    obj = wait_degraded(k8s, ns, name, "MemberUnschedulable", 180)
    degraded = condition(obj, "Degraded")
    assert f"{name}-3's Pod cannot be scheduled" in degraded["message"], degraded
    assert "anti-affinity" in degraded["message"], degraded
    # Quorum never depended on it: a learner that never started.
    assert condition(obj, "Available")["status"] == "True"
    pending = get(k8s, ns, "pod", f"{name}-3")
    assert pending["status"]["phase"] == "Pending"
    assert obj["status"]["readyMembers"] == 3
    # The condition shows with the run's look; its Event goes out as the run reports.
    k8s.wait_for(
        lambda: [
            e
            for e in get(k8s, ns, "events", "--field-selector", "reason=MemberUnschedulable")[
                "items"
            ]
            if "spec.pod.antiAffinity" in e["message"]
        ],
        timeout=60,
        interval=2,
        what="a MemberUnschedulable Event naming spec.pod.antiAffinity",
    )

    # Back to three: the learner that never ran is removed, and the cluster is as it was.
    k8s.kubectl(
        "-n", ns, "patch", "etcd", name, "--type=merge", "-p", json.dumps({"spec": {"size": 3}})
    )
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    assert sorted(m["name"] for m in obj["status"]["members"]) == [f"{name}-{i}" for i in range(3)]
    assert sorted(node_of(k8s, ns, name).values()) == three_nodes


def operator_node(k8s: K8sCluster) -> str:
    pods_ = get(
        k8s, "etcd-operator-system", "pods", "-l", "app.kubernetes.io/name=etcd-runbook-operator"
    )
    return str(pods_["items"][0]["spec"].get("nodeName", "")) if pods_["items"] else ""


def replaced(k8s: K8sCluster, ns: str, name: str, old_id: str, timeout: float) -> float:
    """Seconds until `old_id` is no longer among the members in `name`'s status."""
    began = time.monotonic()

    def gone() -> dict[str, Any]:
        now = get(k8s, ns, "etcd", name)
        ids = [m["id"] for m in now.get("status", {}).get("members", [])]
        return now if ids and old_id not in ids else {}

    k8s.wait_for(gone, timeout=timeout, interval=2, what=f"{name}: member {old_id} removed")
    return time.monotonic() - began


def assert_whole_without(
    k8s: K8sCluster, ns: str, name: str, node: str, old_id: str, key: str
) -> None:
    """Available with 3 named members, none on `node`, `old_id` not among them, `key` on all."""
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    placed = node_of(k8s, ns, name)
    assert node not in placed.values(), placed
    assert old_id not in [m["id"] for m in obj["status"]["members"]]
    members = member_list(k8s, ns, next(iter(placed)))
    assert len(members) == 3 and all(m.get("name") for m in members), members
    assert old_id not in [format(int(m["ID"]), "x") for m in members], members
    for member in placed:
        assert etcdctl(k8s, ns, member, "get", key, "--print-value-only").strip() == "kept"


def test_members_on_a_lost_node_are_replaced_elsewhere_and_never_come_back(
    three_nodes: list[str], k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    """`waited` gives the node 90 s, then replaces its member; `forgotten` gives it an hour,
    and has its member replaced at once when the Node is deleted (a node gone for good, with
    its node-local volumes). A cluster created meanwhile is not held up by either."""
    k8s, ns = k8s_cluster, k8s_namespace
    apply(k8s, ns, etcd_cluster("waited", nodeLossTimeout="90s"))
    apply(k8s, ns, etcd_cluster("forgotten", nodeLossTimeout="1h"))
    # Not node 0 (CoreDNS, the other suites' clusters) nor the operator's own node.
    node = next(n for n in ("erop-node1", "erop-node2") if n != operator_node(k8s))
    victims: dict[str, tuple[str, str]] = {}  # cluster -> (member on `node`, its ID)
    for name in ("waited", "forgotten"):
        obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
        placed = node_of(k8s, ns, name)
        victim = next(m for m, n in placed.items() if n == node)
        old_id = next(m["id"] for m in obj["status"]["members"] if m["name"] == victim)
        victims[name] = (victim, old_id)
        survivor = next(m for m in placed if m != victim)
        etcdctl(k8s, ns, survivor, "put", "/nodes/lost", "kept")

    started = time.monotonic()
    hack_cluster("node", "stop", node, timeout=120)
    deleted = False
    try:
        # Reconciles of other clusters go on: one created now, on a node that runs.
        apply(
            k8s,
            ns,
            etcd_cluster(
                "bystander", size=1, pod={"nodeSelector": {"kubernetes.io/hostname": "erop-node0"}}
            ),
        )
        lost_at: dict[str, datetime] = {}
        for name in ("waited", "forgotten"):
            obj = wait_degraded(k8s, ns, name, "NodeLost", 180)
            noticed = time.monotonic() - started
            degraded = condition(obj, "Degraded")
            assert f"{victims[name][0]}: its node {node} " in degraded["message"], degraded
            assert condition(obj, "Available")["status"] == "True"
            # When the test saw it (polled every 2 s), not the condition's transition time:
            # Degraded may have turned True earlier, for the member that stopped answering,
            # and a new reason keeps the time of that transition.
            lost_at[name] = datetime.now(UTC)
        print(f"node {node} stopped: NodeLost after {noticed:.1f}s")
        wait_available(k8s, ns, "bystander", 1, 120)
        print(f"a cluster created meanwhile Available after {time.monotonic() - started:.1f}s")
        # The node's Lease went unrenewed (watches.yaml nodeSilence): the operator says so
        # before Kubernetes marks the node NotReady (node-monitor-grace-period after the last
        # renewal). Compared with the time of the Node's transition (the test bed's API
        # server runs on this machine's clock), not with a budget of seconds since the stop:
        # that varies with where in the kubelet's 10 s renewal cycle the stop fell, and with
        # the load of the runs it starts (19-31 s seen on 2 cores).
        not_ready_at = datetime.fromisoformat(
            k8s.wait_for(
                lambda: node_ready_since(k8s, node, "Unknown"),
                timeout=120,
                interval=1,
                what=f"node {node} NotReady",
            )
        )
        for name, lost in lost_at.items():
            ahead = (not_ready_at - lost).total_seconds()
            print(f"{name}: NodeLost {ahead:.0f}s before Kubernetes marked {node} NotReady")
            assert ahead > 0, (name, lost, not_ready_at)

        # spec.nodeLossTimeout passed: the member is removed, then a fresh one joins elsewhere.
        replaced(k8s, ns, "waited", victims["waited"][1], 300)
        at = time.monotonic() - started
        assert at > 85, f"replaced {at:.1f}s after the stop, before spec.nodeLossTimeout"
        assert_whole_without(k8s, ns, "waited", node, victims["waited"][1], "/nodes/lost")
        print(f"waited: member removed {at:.1f}s after the stop")
        removed = get(k8s, ns, "events", "--field-selector", "reason=MemberRemoved")["items"]
        assert any("spec.nodeLossTimeout (90 s)" in e["message"] for e in removed), removed

        # An hour to wait, but the Node is deleted: nothing left to wait for.
        obj = get(k8s, ns, "etcd", "forgotten")
        assert victims["forgotten"][1] in [m["id"] for m in obj["status"]["members"]]
        assert condition(obj, "Degraded").get("reason") == "NodeLost", obj["status"]
        k8s.kubectl("delete", "node", node)
        deleted = True
        took = replaced(k8s, ns, "forgotten", victims["forgotten"][1], 120)
        print(f"forgotten: replaced {took:.1f}s after its Node was deleted")
        assert took < 60, took
        assert_whole_without(k8s, ns, "forgotten", node, victims["forgotten"][1], "/nodes/lost")
        removed = get(k8s, ns, "events", "--field-selector", "reason=MemberRemoved")["items"]
        assert any(f"its node {node} no longer exists" in e["message"] for e in removed), removed
    finally:
        # A deleted Node registers again when its kubelet starts.
        hack_cluster("node", "start", node, timeout=300)

    # The node back: its kubelet finds the old Pods deleted; the old members stay removed.
    assert deleted
    time.sleep(15)
    for name, (_, old_id) in victims.items():
        assert_whole_without(k8s, ns, name, node, old_id, "/nodes/lost")


LEASE = "etcd-runbook-operator"
# The watcher's leader election (etcd_runbook_operator/leader.py): a standby takes the Lease
# once its holder has not renewed it for this long, trying every retry period.
LEASE_DURATION, RETRY_PERIOD = 15, 2


def lease_holder(k8s: K8sCluster) -> str:
    lease = get(k8s, NAMESPACE, "lease", LEASE)
    return str(lease.get("spec", {}).get("holderIdentity") or "")


def test_a_standby_operator_takes_over_when_the_leader_s_node_is_lost(
    three_nodes: list[str], k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns = k8s_cluster, k8s_namespace
    # Two replicas, one on each of nodes 1 and 2 (node 0 holds CoreDNS and is never stopped).
    spread = {
        "spec": {
            "replicas": 2,
            "template": {
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": "kubernetes.io/hostname",
                                                "operator": "In",
                                                "values": ["erop-node1", "erop-node2"],
                                            }
                                        ]
                                    }
                                ]
                            }
                        },
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "topologyKey": "kubernetes.io/hostname",
                                    "labelSelector": {
                                        "matchLabels": {"app.kubernetes.io/name": LEASE}
                                    },
                                }
                            ]
                        },
                    }
                }
            },
        }
    }
    deployment = ["-n", NAMESPACE, "deployment", DEPLOYMENT]
    # Down to none first: a rolling update would keep the old Pods on nodes 1 and 2, where the
    # required anti-affinity then leaves the new ones no room.
    k8s.kubectl("scale", *deployment, "--replicas=0")
    k8s.wait_for(
        lambda: not get(k8s, NAMESPACE, "pods", "-l", SELECTOR)["items"],
        timeout=330,
        interval=2,
        what="no operator Pod left",
    )
    k8s.kubectl("patch", *deployment, "--type=merge", "-p", json.dumps(spread))
    stopped = ""
    try:
        k8s.kubectl(
            "rollout",
            "status",
            *deployment[:2],
            f"deployment/{DEPLOYMENT}",
            "--timeout=300s",
            timeout=320,
        )
        replicas = k8s.wait_for(
            lambda: (
                found
                if len(
                    found := {
                        p["metadata"]["name"]: p["spec"].get("nodeName", "")
                        for p in get(k8s, NAMESPACE, "pods", "-l", SELECTOR)["items"]
                        if not p["metadata"].get("deletionTimestamp") and ready(p)
                    }
                )
                == 2
                else {}
            ),
            timeout=300,
            interval=2,
            what="two operator replicas Ready",
        )
        assert sorted(replicas.values()) == ["erop-node1", "erop-node2"], replicas
        leader = k8s.wait_for(
            lambda: next((p for p in replicas if lease_holder(k8s).startswith(p + "_")), ""),
            timeout=120,
            interval=1,
            what="one of the two replicas leading",
        )
        standby = next(p for p in replicas if p != leader)
        stopped = replicas[leader]

        started = time.monotonic()
        hack_cluster("node", "stop", stopped, timeout=120)
        k8s.wait_for(
            lambda: lease_holder(k8s).startswith(standby + "_"),
            timeout=120,
            interval=0.5,
            what=f"{standby} holding the Lease",
        )
        took_over = time.monotonic() - started
        # The old leader renewed at most a retry period before it stopped; the standby takes
        # the Lease a lease duration after it last saw it change, at its next try.
        assert took_over < LEASE_DURATION + 3 * RETRY_PERIOD + 5, took_over

        # The new leader acts: a cluster made now (on node 0, which stays) becomes Available.
        apply(
            k8s,
            ns,
            etcd_cluster(
                "after", size=1, pod={"nodeSelector": {"kubernetes.io/hostname": "erop-node0"}}
            ),
        )
        wait_available(k8s, ns, "after", 1, AVAILABLE_WITHIN)
        acted = time.monotonic() - started
        print(
            f"leader on {stopped} stopped: {standby} led after {took_over:.1f}s, "
            f"a new cluster Available after {acted:.1f}s"
        )
    finally:
        if stopped:
            hack_cluster("node", "start", stopped, timeout=300)
        back = {"spec": {"replicas": 1, "template": {"spec": {"affinity": None}}}}
        k8s.kubectl("patch", *deployment, "--type=merge", "-p", json.dumps(back), check=False)
        k8s.kubectl(
            "rollout",
            "status",
            "-n",
            NAMESPACE,
            f"deployment/{DEPLOYMENT}",
            "--timeout=300s",
            check=False,
            timeout=320,
        )


def test_a_rotation_of_two_nodes_brings_the_members_back_on_their_own_volumes(
    three_nodes: list[str], k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    """Issue 23, item 6. Volumes any node can mount (StorageClass erop-shared, as cloud disks
    within a zone). Nodes 1 and 2 are rotated out at once while the cluster is paused: both
    stopped, node 1's Node deleted (its member's Pod goes with it, and the claim's
    `selected-node` names a Node that no longer exists), node 2's still there, Not Ready (its
    member's Pod stays on it). Unpaused, with no quorum: node 1's member gets its Pod back on its
    own claim at once, and node 2's, past spec.nodeLossTimeout, is moved: its Pod deleted at
    once and made again on its own claim. Both are the members they were, with their data, on
    the node left; no member is removed, no claim replaced. Last in the module: it starts the
    two nodes again."""
    k8s, ns, name = k8s_cluster, k8s_namespace, "rotated"
    # The operator must outlive the rotation: on node 2, which stays Not Ready, its Pod would
    # be evicted only after its 300 s toleration.
    if operator_node(k8s) != "erop-node0":
        for node in ("erop-node1", "erop-node2"):
            k8s.kubectl("cordon", node)
        deployment = f"deployment/{DEPLOYMENT}"
        k8s.kubectl("-n", NAMESPACE, "rollout", "restart", deployment)
        k8s.kubectl("-n", NAMESPACE, "rollout", "status", deployment, "--timeout=300s", timeout=320)
        k8s.wait_for(
            lambda: (
                {
                    p["spec"].get("nodeName")
                    for p in get(k8s, NAMESPACE, "pods", "-l", SELECTOR)["items"]
                    if not p["metadata"].get("deletionTimestamp")
                }
                == {"erop-node0"}
            ),
            timeout=60,
            interval=2,
            what="the operator on erop-node0",
        )
        for node in ("erop-node1", "erop-node2"):  # (the autouse fixture too, should this fail)
            k8s.kubectl("uncordon", node)
    storage = {"size": "1Gi", "storageClassName": "erop-shared"}
    apply(k8s, ns, etcd_cluster(name, storage=storage, nodeLossTimeout="30s"))
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    placed = node_of(k8s, ns, name)
    assert sorted(placed.values()) == three_nodes, placed
    ids = {m["name"]: m["id"] for m in obj["status"]["members"]}
    claims = {c["metadata"]["name"]: c for c in get(k8s, ns, "pvc")["items"]}
    anywhere = [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]
    for claim in claims.values():
        pv = get(k8s, ns, "pv", claim["spec"]["volumeName"])
        terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert terms == [{"matchExpressions": anywhere}], terms
    on = {node: member for member, node in placed.items()}
    survivor, gone, stranded = on["erop-node0"], on["erop-node1"], on["erop-node2"]
    etcdctl(k8s, ns, survivor, "put", "/nodes/rotated", "kept")

    pause = {"spec": {"paused": True}}
    k8s.kubectl("-n", ns, "patch", "etcd", name, "--type=merge", "-p", json.dumps(pause))
    k8s.wait_for(
        lambda: get(k8s, ns, "etcd", name).get("status", {}).get("phase") == "Paused",
        timeout=60,
        interval=1,
        what=f"{name} Paused",
    )
    started = time.monotonic()
    try:
        hack_cluster("node", "stop", "erop-node1", timeout=120)
        hack_cluster("node", "stop", "erop-node2", timeout=120)
        k8s.kubectl("delete", "node", "erop-node1")
        # The pod garbage collector deletes the Pods bound to a Node that no longer exists (the
        # operator's own too, if it ran there: the Deployment makes it again elsewhere).
        k8s.wait_for(
            lambda: gone not in [p["metadata"]["name"] for p in get(k8s, ns, "pods")["items"]],
            timeout=180,
            interval=2,
            what=f"the Pod of {gone} gone with its Node",
        )
        gone_after = time.monotonic() - started
        annotations = get(k8s, ns, "pvc", f"{gone}-data")["metadata"]["annotations"]
        assert annotations["volume.kubernetes.io/selected-node"] == "erop-node1", annotations
        assert get(k8s, ns, "pod", stranded)["spec"]["nodeName"] == "erop-node2"

        resume = {"spec": {"paused": False}}
        k8s.kubectl("-n", ns, "patch", "etcd", name, "--type=merge", "-p", json.dumps(resume))
        resumed = time.monotonic()
        try:
            obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
        except TimeoutError:
            said = get(k8s, ns, "etcd", name).get("status", {})
            print(json.dumps(said.get("conditions"), indent=1))
            print(k8s.kubectl("-n", ns, "get", "pods,pvc,events", "-o", "wide").stdout)
            raise
        back_after = time.monotonic() - resumed
        print(f"rotated: {gone}'s Pod gone after {gone_after:.1f}s, Available {back_after:.1f}s")
        # The same members, on their own claims (same uids: none was deleted and made anew),
        # on the node left.
        assert {m["name"]: m["id"] for m in obj["status"]["members"]} == ids
        now = {c["metadata"]["name"]: c for c in get(k8s, ns, "pvc")["items"]}
        assert {n: c["metadata"]["uid"] for n, c in now.items()} == {
            n: c["metadata"]["uid"] for n, c in claims.items()
        }
        assert set(node_of(k8s, ns, name).values()) == {"erop-node0"}
        members = member_list(k8s, ns, survivor)
        assert sorted(format(int(m["ID"]), "x") for m in members) == sorted(ids.values())
        for member in placed:
            got = etcdctl(k8s, ns, member, "get", "/nodes/rotated", "--print-value-only")
            assert got.strip() == "kept", member
        assert not events(k8s, ns, "MemberRemoved"), events(k8s, ns, "MemberRemoved")
        restarted = " ".join(e["message"] for e in events(k8s, ns, "MemberRestarted"))
        assert gone in restarted and stranded in restarted, restarted
        moved = [e["message"] for e in events(k8s, ns, "MemberMoved")]
        assert any(m.startswith(f"{stranded}: its node erop-node2 ") for m in moved), moved
    finally:
        # The rotated nodes come back (node 1 as a new Node) for what runs after.
        hack_cluster("node", "start", "erop-node1", timeout=300)
        hack_cluster("node", "start", "erop-node2", timeout=300)
