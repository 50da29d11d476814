"""Many EtcdClusters on one operator (issue 9): its memory and CPU, how long until all are
Available, and how fast a change to one of them is acted on while the others resync.

    .venv/bin/python bench/run.py many [--clusters 100] [--trials 3] [--window 180] [--no-docs]

Grows the local cluster to three nodes (hack/cluster up --nodes 3: one node takes at most 110
Pods, its kubelet's maxPods) and deploys the operator in the cluster from the committed tree of
--ref (default HEAD) with the shipped watches.yaml (reconcilePeriod 60 s, full runs every
600 s), as bench/node_loss.py does. In one fresh namespace:

1. baseline: --trials EtcdClusters of 1 member are made one after another and waited for; then
   each is scaled 1 -> 2, timing the watcher's reaction (Progressing for the new generation)
   and the runbook's first change (the new member's claim or Pod);
2. --clusters EtcdClusters of 1 member (etcd 3.6.16, TLS on) are POSTed at once; the clock runs
   until every one is Available (polled every 2 s; also when the first, half and 90 % were);
3. after a minute of quiet, the operator process's resident set, then its CPU (its own and its
   waited-for children: ansible-playbook and the modules) over --window seconds of the idle
   resyncs and periodic full runs of all of them;
4. the same scale 1 -> 2 on --trials of the many, while the others resync.

Every wait is bounded; the namespace is deleted at the end (each cluster through its finalizer),
the operator's Deployment scaled back, the local cluster left on one node. Unless --no-docs,
rewrites this benchmark's section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.harness.cluster import available  # noqa: E402
from bench.harness.measured_operator import Bench, InCluster, one_member_cluster  # noqa: E402
from bench.harness.report import command, finish, fmt, load1, median, parse_args, row  # noqa: E402
from testbed.cluster import cluster_up, wait_for  # noqa: E402

HEADING = "## Operator: many EtcdClusters at once"
POLL = 2.0


def create_all(bench: Bench, names: list[str], timeout: float) -> dict[str, float]:
    """POSTs every one, then seconds until the first, half, 90 % and all are Available."""
    started = time.monotonic()
    for name in names:
        bench.kube.create(bench.etcd_path(), one_member_cluster(name))
    marks: dict[str, float] = {"posted": time.monotonic() - started}
    wanted = set(names)

    def all_available() -> bool:
        items = bench.kube.get(bench.etcd_path())["items"]
        done = sum(1 for o in items if o["metadata"]["name"] in wanted and available(o, 1))
        now = time.monotonic() - started
        for key, share in (("first", 1 / len(names)), ("half", 0.5), ("p90", 0.9), ("all", 1.0)):
            if key not in marks and done >= share * len(names):
                marks[key] = now
        return "all" in marks

    wait_for(all_available, timeout, POLL, f"all {len(names)} Available")
    return marks


def run(args: argparse.Namespace) -> dict[str, Any]:
    k8s = cluster_up(nodes=3)
    ns = f"bench-many-{int(time.time())}"
    report: dict[str, Any] = {"ref": args.ref, "clusters": args.clusters, "load_start": load1()}
    incluster = InCluster(k8s, args.ref)  # the shipped watches.yaml
    try:
        bench = incluster.start()
        bench.ns = ns
        report["operator_image"] = incluster.image
        k8s.kubectl("create", "namespace", ns)
        base = [f"base-{i}" for i in range(args.trials)]
        for name in base:
            bench.create(name)
        report["memory_base"] = bench.memory_mib()
        report["base"] = [bench.scale_up(name) for name in base]
        print(f"baseline: {report['base']}", flush=True)

        names = [f"many-{i:03d}" for i in range(args.clusters)]
        report["create"] = create_all(bench, names, args.bound)
        report["load_created"] = load1()
        print(f"created: {report['create']}", flush=True)
        time.sleep(60)
        report["memory"] = bench.memory_mib()
        before = bench.cpu_seconds()
        time.sleep(args.window)
        report["cpu_window"] = {"seconds": args.window, "cpu": bench.cpu_seconds() - before}
        report["load_idle"] = load1()
        print(f"idle: {report['memory']} {report['cpu_window']}", flush=True)
        report["under_load"] = [bench.scale_up(name) for name in names[: args.trials]]
        print(f"with {args.clusters} others: {report['under_load']}", flush=True)
        report["load_end"] = load1()
    finally:
        k8s.kubectl(
            "-n", ns, "delete", "etcd", "--all", "--timeout=1200s", check=False, timeout=1260
        )
        k8s.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        incluster.stop()
        cluster_up(nodes=1)
    return report


def section(report: dict[str, Any], command: str) -> str:
    base, loaded, create = report["base"], report["under_load"], report["create"]
    n = report["clusters"]
    cpu = report["cpu_window"]

    def latency_row(what: str, key: str) -> str:
        b = [t[key] for t in base]
        m = [t[key] for t in loaded]
        return row(
            what,
            fmt(b, 2),
            fmt(m, 2),
            f"{median(m) / median(b):.2f}" if median(b) else "-",
            f"{max(m) / max(b):.1f}" if max(b) else "-",
        )

    cores = cpu["cpu"] / cpu["seconds"]
    every = 600 / (n + len(base))

    lines = [
        HEADING,
        "",
        f"Command: `{command}` (operator from `{report['ref']}`, image "
        f"{report['operator_image']}, in the cluster with the shipped watches.yaml: resync every "
        "60 s, a full run every 600 s, 4 runs of EtcdClusters at a time; bench/many_clusters.py).",
        f"Three nodes: one takes at most 110 Pods. Load average {report['load_start']:.1f} at the",
        f"start, {report['load_created']:.1f} once all were Available, {report['load_idle']:.1f}",
        f"idle, {report['load_end']:.1f} at the end.",
        "",
        f"**{n} EtcdClusters of 1 member (TLS) POSTed at once** ({create['posted']:.1f} s to POST",
        "them all), seconds until Available:",
        "",
        row("first", "half", "90 %", "all"),
        row("---", "---", "---", "---"),
        row(*(f"{create[k]:.0f}" for k in ("first", "half", "p90", "all"))),
        "",
        "**The operator idle with them** (a minute after the last was Available):",
        "",
        row("measure", f"{len(base)} clusters", f"{n + len(base)} clusters"),
        row("---", "---", "---"),
        row(
            "operator VmRSS (MiB)",
            f"{report['memory_base']['VmRSS']:.1f}",
            f"{report['memory']['VmRSS']:.1f}",
        ),
        row(
            "operator peak VmHWM (MiB)",
            f"{report['memory_base']['VmHWM']:.1f}",
            f"{report['memory']['VmHWM']:.1f}",
        ),
        row(
            "its ansible fork server VmRSS (MiB)",
            f"{report['memory_base'].get('server', 0.0):.1f}",
            f"{report['memory'].get('server', 0.0):.1f}",
        ),
        row(
            f"operator CPU over {cpu['seconds']:.0f} s of resyncs and full runs (cores)",
            "-",
            f"{cpu['cpu'] / cpu['seconds']:.2f}",
        ),
        "",
        "**A change to one cluster** (size 1 -> 2), seconds from the PATCH, with only the",
        f"baseline clusters (made one at a time) against with {n} others resyncing:",
        "",
        row("measure", "baseline trials", f"with {n} others", "ratio of medians", "of worst"),
        row("---", "---", "---", "---", "---"),
        latency_row("watcher reacts (Progressing, new generation)", "reaction"),
        latency_row("runbook's first change (the new member's claim or Pod)", "action"),
        latency_row("Available with 2", "available"),
        "",
        "What it says. The operator's memory hardly grows with the clusters it watches (its",
        "informer caches); its CPU does: each cluster gets a full run every 600 s",
        f"(fullRunInterval), one every {every:.1f} s over {n + len(base)} clusters, and",
        f"{cores:.2f} cores went on them and the resyncs against the Deployment's limit of 1 core.",
        "Creating them is paced the same way: a run costs seconds of CPU and 4 run at a time.",
        "A new generation goes ahead of the queued resyncs (the urgent lane, docs/operator.md,",
        '"Work queue"), so the watcher reacts as fast as with no other cluster; the runbook',
        "then waits for a free worker (one finishing a full run) and shares the operator's CPU",
        "with the runs in flight, hence its first change comes later than in the baseline.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/run.py many", description=__doc__)
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--window", type=float, default=180, help="idle CPU window (s)")
    parser.add_argument("--bound", type=float, default=2400, help="bound of the create wait (s)")
    parser.add_argument("--ref", default="HEAD", help="git ref of the operator; 'worktree' too")
    args = parse_args(parser, argv)
    return finish(run(args), section, HEADING, command("many", argv), args.no_docs)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
