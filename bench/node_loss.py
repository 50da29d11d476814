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
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.harness.cluster import etcd_cluster  # noqa: E402
from bench.harness.measured_operator import InCluster  # noqa: E402
from bench.harness.report import command, finish, load1, parse_args, row, trials_row  # noqa: E402
from testbed.cluster import K8sCluster, cluster_up, hack_cluster  # noqa: E402
from testbed.operator_incluster import NAMESPACE, SELECTOR  # noqa: E402

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
    manifest = etcd_cluster(name, size=3, version="3.6.16", nodeLossTimeout=timeout_spec)
    k8s.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(manifest))
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

    hack_cluster("node", "stop", node, timeout=120)
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
        hack_cluster("node", "start", node, timeout=300)
    until(
        f"{name} Available with the node back",
        bound,
        lambda: available(k8s, ns, name),
    )
    k8s.kubectl("-n", ns, "delete", "etcd", name, "--timeout=300s", timeout=320)
    return {"node": node, "member": victim, **{k: round(v, 1) for k, v in seen.items()}}


def run(args: argparse.Namespace) -> dict[str, Any]:
    k8s = cluster_up(nodes=3)
    incluster = InCluster(k8s, args.ref)
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    report: dict[str, Any] = {
        "ref": args.ref,
        "timeout": args.node_loss_timeout,
        "load_start": load1(),
    }
    try:
        report["operator_image"] = incluster.deploy()
        k8s.kubectl("create", "namespace", ns)
        report["trials"] = []
        for i in range(args.trials):
            result = trial(k8s, ns, f"loss-{i}", args.node_loss_timeout, args.bound)
            print(f"trial {i}: {json.dumps(result)}", flush=True)
            report["trials"].append(result)
        report["load_end"] = load1()
    finally:
        k8s.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        incluster.stop()
        cluster_up(nodes=1)
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
        trials_row("Kubernetes calls the node NotReady (baseline)", col["not_ready"]),
        trials_row("the operator says `NodeLost`", col["noticed"]),
        trials_row("noticed / NotReady", ratio, digits=2),
        trials_row("the lost member removed from etcd", col["removed"]),
        trials_row("a fresh member in, Available with 3 ready", col["available"]),
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
    args = parse_args(parser, argv)
    return finish(run(args), section, HEADING, command("node-loss", argv), args.no_docs)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
