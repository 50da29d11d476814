"""A node lost under a 3-member EtcdCluster: when the operator notices, against when Kubernetes
marks the node NotReady, and how long until the member is replaced and the cluster Available
again (issue 11, item 4).

    .venv/bin/python bench/run.py node-loss [--trials 2] [--node-loss-timeout 60s] [--no-docs]

Grows the local cluster to three nodes (hack/cluster up --nodes 3) and deploys the operator in
the cluster from the committed tree of --ref (default HEAD), as bench/restore.py does. Each
trial, in a fresh namespace:

1. an EtcdCluster of 3 members (etcd 3.6.16, TLS, `spec.nodeLossTimeout` as given) is made and
   waited for until Available, one member per node;
2. a node holding a member, neither node 0 (CoreDNS) nor the operator's, is stopped with
   `hack/cluster node stop` (its kubelet, containerd and every container on it killed); the
   clock starts when the command returns;
3. every 0.5 s until the cluster is Available again: the Node's Ready condition (the baseline:
   when Kubernetes itself calls the node NotReady), the EtcdCluster's Degraded reason (noticed:
   `NodeLost`), whether the lost member's ID is still in status.members (replaced: it is not),
   and Available with three ready members and Progressing False;
4. the node is started again, the cluster checked still Available with the new member, and
   deleted.

Every wait is bounded; the cluster is left on one node (hack/cluster up --nodes 1) and the
operator's Deployment scaled back to what it was. Unless --no-docs, rewrites this benchmark's
section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bootstrap import load1  # noqa: E402
from bench.docs_section import write_section  # noqa: E402
from bench.operator_latency import fmt, median, row  # noqa: E402
from bench.restore import operator_tree  # noqa: E402
from tests.e2e.operator_incluster import (  # noqa: E402
    DEPLOYMENT,
    NAMESPACE,
    SELECTOR,
    InClusterOperator,
    deploy,
    replicas,
)
from tests.k8s_cluster import UP_TIMEOUT, K8sCluster, run_cluster  # noqa: E402

HEADING = "## Node loss: noticed and replaced, against Kubernetes' NotReady"
POLL = 0.5


def get(k8s: K8sCluster, *what: str) -> dict[str, Any]:
    return dict(json.loads(k8s.kubectl("get", *what, "-o", "json").stdout))


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in obj.get("status", {}).get("conditions", []):
        if c.get("type") == kind:
            return dict(c)
    return {}


def until(what: str, timeout: float, check: Any) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(POLL)
    raise TimeoutError(f"{what}: not within {timeout:.0f}s")


def settled(obj: dict[str, Any]) -> bool:
    status = obj.get("status", {})
    return (
        condition(obj, "Available").get("status") == "True"
        and condition(obj, "Progressing").get("status") == "False"
        and status.get("readyMembers") == 3
        and status.get("size") == 3
    )


def available(k8s: K8sCluster, ns: str, name: str) -> dict[str, Any] | None:
    obj = get(k8s, "-n", ns, "etcd", name)
    return obj if settled(obj) else None


def trial(k8s: K8sCluster, ns: str, name: str, timeout_spec: str, bound: float) -> dict[str, Any]:
    spec = {"size": 3, "version": "3.6.16", "storage": {"size": "1Gi"}}
    spec["nodeLossTimeout"] = timeout_spec
    manifest = {
        "apiVersion": "etcd.runbook.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }
    k8s.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    obj = until(
        f"{name} Available",
        bound,
        lambda: available(k8s, ns, name),
    )
    pods = get(k8s, "-n", ns, "pods", "-l", f"etcd.runbook.io/cluster={name}")["items"]
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}
    operator = get(k8s, "-n", NAMESPACE, "pods", "-l", SELECTOR)["items"]
    operator_node = operator[0]["spec"].get("nodeName", "") if operator else ""
    node = next(n for n in ("erop-node1", "erop-node2") if n != operator_node)
    victim = next(m for m, n in placed.items() if n == node)
    old_id = next(m["id"] for m in obj["status"]["members"] if m["name"] == victim)

    run_cluster("node", "stop", node, timeout=120)
    start = time.monotonic()
    seen: dict[str, float] = {}
    try:
        deadline = start + bound
        while time.monotonic() < deadline and "available" not in seen:
            now = time.monotonic() - start
            node_obj = get(k8s, "node", node)
            if "not_ready" not in seen and condition(node_obj, "Ready").get("status") != "True":
                seen["not_ready"] = now
            cluster = get(k8s, "-n", ns, "etcd", name)
            if "noticed" not in seen and condition(cluster, "Degraded").get("reason") == "NodeLost":
                seen["noticed"] = now
            ids = [m["id"] for m in cluster.get("status", {}).get("members", [])]
            if "removed" not in seen and old_id not in ids and ids:
                seen["removed"] = now
            if "removed" in seen and settled(cluster):
                seen["available"] = now
            time.sleep(POLL)
        if "available" not in seen:
            raise TimeoutError(f"{name}: not Available again within {bound:.0f}s: {seen}")
    finally:
        run_cluster("node", "start", node, timeout=300)
    until(
        f"{name} Available with the node back",
        bound,
        lambda: available(k8s, ns, name),
    )
    k8s.kubectl("-n", ns, "delete", "etcd", name, "--timeout=300s", timeout=320)
    return {"node": node, "member": victim, **{k: round(v, 1) for k, v in seen.items()}}


def run(args: argparse.Namespace) -> dict[str, Any]:
    run_cluster("up", "--nodes", "3", timeout=UP_TIMEOUT)
    kubeconfig = Path(run_cluster("kubeconfig", timeout=30))
    k8s = K8sCluster(kubeconfig=kubeconfig, bin_dir=Path(run_cluster("bin", timeout=30)))
    asked = replicas(k8s)
    tree = operator_tree(args.ref, Path(tempfile.mkdtemp(prefix="bench-node-loss-tree-")))
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    report: dict[str, Any] = {
        "ref": args.ref,
        "timeout": args.node_loss_timeout,
        "load_start": load1(),
    }
    try:
        report["operator_image"] = deploy(k8s, tree)
        InClusterOperator(k8s).wait_running()
        k8s.kubectl("create", "namespace", ns)
        report["trials"] = []
        for i in range(args.trials):
            result = trial(k8s, ns, f"loss-{i}", args.node_loss_timeout, args.bound)
            print(f"trial {i}: {json.dumps(result)}", flush=True)
            report["trials"].append(result)
        report["load_end"] = load1()
    finally:
        k8s.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        k8s.kubectl(
            "-n",
            NAMESPACE,
            "scale",
            "deployment",
            DEPLOYMENT,
            f"--replicas={asked}",
            check=False,
        )
        run_cluster("up", "--nodes", "1", timeout=UP_TIMEOUT)
        if tree != REPO:
            shutil.rmtree(tree, ignore_errors=True)
    return report


def section(report: dict[str, Any], command: str) -> str:
    trials = report["trials"]
    col = {
        k: [float(t[k]) for t in trials] for k in ("not_ready", "noticed", "removed", "available")
    }
    ratio = [t["noticed"] / t["not_ready"] for t in trials]
    lines = [
        HEADING,
        "",
        f"Command: `{command}` (operator from `{report['ref']}`, image "
        f"{report['operator_image']}; load {report['load_start']:.1f} at the start, "
        f"{report['load_end']:.1f} at the end).",
        f"A 3-member EtcdCluster with `spec.nodeLossTimeout: {report['timeout']}`, one member per",
        "node; the node of one member (never node 0 nor the operator's) stopped with",
        "`hack/cluster node stop`; seconds from the stop, polled every 0.5 s",
        "(bench/node_loss.py).",
        "",
        row("measure", "trials", "median"),
        row("---", "---", "---"),
        row(
            "Kubernetes calls the node NotReady (baseline)",
            fmt(col["not_ready"]),
            f"{median(col['not_ready']):.1f}",
        ),
        row("the operator says `NodeLost`", fmt(col["noticed"]), f"{median(col['noticed']):.1f}"),
        row("noticed / NotReady", fmt(ratio, 2), f"{median(ratio):.2f}"),
        row(
            "the lost member removed from etcd",
            fmt(col["removed"]),
            f"{median(col['removed']):.1f}",
        ),
        row(
            "a fresh member in, Available with 3 ready",
            fmt(col["available"]),
            f"{median(col['available']):.1f}",
        ),
        "",
        "The replacement cannot start before `nodeLossTimeout` has passed since the kubelet was",
        "last heard from (its last Lease renewal, up to 10 s before the stop).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/run.py node-loss", description=__doc__)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--node-loss-timeout", default="60s", help="spec.nodeLossTimeout")
    parser.add_argument("--bound", type=float, default=600, help="bound of each wait (s)")
    parser.add_argument("--ref", default="HEAD", help="git ref of the operator; 'worktree' too")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md")
    args = parser.parse_args(argv)
    report = run(args)
    print(json.dumps(report, indent=1))
    text = section(report, ("python bench/run.py node-loss " + " ".join(argv)).strip())
    print(text)
    if not args.no_docs:
        write_section(HEADING, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
