"""The operator on the local Kubernetes: latency, CPU of a resync, memory (issue 4).

    .venv/bin/python bench/run.py operator [--trials 3] [--clusters 10] [--window 60]
        [--where incluster|host] [--ref HEAD]

Brings the local cluster up (hack/cluster up) and runs the operator with a resync period of
--resync seconds: by default in the cluster as users deploy it (config/default, the image built
from the committed tree of --ref, the runbooks reaching members by DNS); with --where host, as
a host process with its ServiceAccount's token through hack/run-operator-as-sa (which installs
the CRD and RBAC), watching one fresh namespace, its runbooks going through kubectl
port-forwards. Then, in one run:

1. create -> first Pod: an EtcdCluster of size 1 is created (the clock starts before the POST);
   the time until its first Pod exists, and until it is Available. --trials times.
2. spec change -> first action: each of those clusters is scaled 1 -> 2; the time until the
   watcher reacts (Progressing=True written for the new generation) and until the runbook's
   first change (the new member's claim or Pod exists).
3. CPU: the operator's CPU seconds (its own and its waited-for children: ansible-playbook and
   the module processes) over --window seconds of idle resyncs, all answered by the skip rule,
   divided by the resyncs skipped; against the CPU of one full playbook run of the same role on
   the same healthy cluster (forced by an annotation the fingerprint covers), which is what
   operator-sdk's Ansible operator spends on every resync.
4. memory: the operator's resident set with 1 EtcdCluster (after the first is Available) and
   with --clusters of them (all Available, then idle).

Unless --no-docs, rewrites the "Operator: latency, resync CPU, memory" section of
docs/benchmarks.md. Every wait is bounded; the namespace is deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.harness.measured_operator import (
    Bench,
    add_where_arguments,
    one_member_cluster,
    operator_watching,
)
from bench.harness.report import command, finish, fmt, median, parse_args, row, trials_row
from testbed.cluster import cluster_up, wait_for

REPO = Path(__file__).resolve().parent.parent
HEADING = "## Operator: latency, resync CPU, memory"


def bench_watches(workdir: Path, full_run_interval: str) -> Path:
    """watches.yaml with absolute playbook paths and the skip rule's bound set explicitly: its
    default (10 x the resync period) would put full runs inside the no-op window."""
    import yaml

    watches = yaml.safe_load((REPO / "watches.yaml").read_text())
    for entry in watches:
        entry["fullRunInterval"] = full_run_interval
        for target in (entry, entry.get("finalizer") or {}):
            if "playbook" in target:
                target["playbook"] = str(REPO / target["playbook"])
    path = workdir / "watches.yaml"
    path.write_text(yaml.safe_dump(watches))
    return path


def noop_resyncs(bench: Bench, window: float) -> dict[str, float]:
    skipped = "etcd_runbook_operator_reconcile_skipped_total"
    key = f'{skipped}{{kind="EtcdCluster"}}'
    runs_before = bench.runs_done()
    skips_before, cpu_before = bench.metrics().get(key, 0.0), bench.cpu_seconds()
    time.sleep(window)
    skips, cpu = bench.metrics().get(key, 0.0) - skips_before, bench.cpu_seconds() - cpu_before
    runs = bench.runs_done() - runs_before
    return {"skips": skips, "cpu": cpu, "runs": runs, "window": window}


def full_run(bench: Bench, name: str, nonce: str) -> dict[str, float]:
    done_before = bench.runs_done()
    cpu_before, started = bench.cpu_seconds(), time.monotonic()
    # Annotations of the API group are inputs (the fingerprint covers them): one full run.
    bench.kube.merge_patch(
        bench.etcd_path(name), {"metadata": {"annotations": {"etcd.runbook.io/bench": nonce}}}
    )
    wait_for(
        lambda: bench.runs_done() > done_before,
        600,
        0.2,
        f"{name}: the forced full run",
    )
    elapsed = time.monotonic() - started
    # The fork server reaps a run's keeper within a second: only then is the run's CPU its.
    time.sleep(1.5)
    return {"cpu": bench.cpu_seconds() - cpu_before, "seconds": elapsed}


FLOOR_PLAY = """- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.set_stats: {data: {operator_status: {}}}
"""


def floor_run(workdir: Path) -> dict[str, float]:
    """What any runbook run pays before its first task: ansible-playbook of a one-task play
    (the baseline the full run is compared with, measured in the same go)."""
    play = workdir / "floor.yml"
    play.write_text(FLOOR_PLAY)
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", str(play)],
        check=True,
        capture_output=True,
        env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"cpu": cpu, "seconds": time.monotonic() - started}


def run(args: argparse.Namespace) -> dict[str, Any]:
    k8s = cluster_up()
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    workdir = Path(tempfile.mkdtemp(prefix="bench-operator-"))
    report: dict[str, Any] = {
        "resync": args.resync,
        "full_run_interval": args.full_run_interval,
        "where": args.where,
    }
    host_args = (
        [
            "--reconcile-period",
            str(args.resync),
            "--watches-file",
            str(bench_watches(workdir, args.full_run_interval)),
        ]
        if args.where == "host"
        else []
    )
    with operator_watching(
        k8s, ns, args.where, args.ref, workdir, host_args, args.resync, args.full_run_interval
    ) as bench:
        if args.where != "host":
            report["image"] = bench.image
        wait_for(lambda: bench.metrics() is not None, 60, 0.5, "the operator's metrics")
        names = [f"lat-{i}" for i in range(args.trials)]
        creates = []
        for i, name in enumerate(names):
            creates.append(bench.create(name))
            print(f"create {name}: {creates[-1]}", flush=True)
            if i == 0:
                bench.idle()
                report["memory_1"] = bench.memory_mib()
        report["creates"] = creates
        scales = []
        for name in names:
            # Each trial from an idle operator: the runs that follow the one before (its new
            # member turning Ready) would share the operator's CPU with this one.
            bench.idle()
            scales.append(bench.scale_up(name))
            print(f"scale {name}: {scales[-1]}", flush=True)
        report["scales"] = scales
        bench.idle()
        # A window is only a no-op window if no playbook ran in it (a Pod status change can
        # still start one); a few tries, then the figure says how many runs it includes.
        for _ in range(3):
            report["noop"] = noop_resyncs(bench, args.window)
            print(f"no-op resyncs: {report['noop']}", flush=True)
            if not report["noop"]["runs"]:
                break
            bench.idle()
        fulls = []
        for i in range(args.full_runs):
            fulls.append(full_run(bench, names[0], f"{i}-{uuid.uuid4().hex[:6]}"))
            print(f"full run: {fulls[-1]}", flush=True)
            bench.idle(settle=3)
        report["fulls"] = fulls
        report["floors"] = [floor_run(workdir) for _ in range(args.full_runs)]
        print(f"floor: {report['floors']}", flush=True)
        extra_names = [f"mem-{i}" for i in range(max(0, args.clusters - len(names)))]
        started = time.monotonic()
        for name in extra_names:
            bench.kube.create(bench.etcd_path(), one_member_cluster(name))
        wait_for(
            lambda: all(bench.available(n, 1) for n in extra_names),
            1800,
            2,
            f"{len(extra_names)} more clusters Available",
        )
        report["all_available_seconds"] = time.monotonic() - started
        bench.idle()
        report["memory_n"] = bench.memory_mib()
        report["clusters"] = len(names) + len(extra_names)
        report["load"] = os.getloadavg()[0]
    return report


def section(report: dict[str, Any], command: str) -> str:
    creates, scales, fulls, noop = (
        report["creates"],
        report["scales"],
        report["fulls"],
        report["noop"],
    )
    first_pod = [c["first_pod"] for c in creates]
    avail = [c["available"] for c in creates]
    reaction = [s["reaction"] for s in scales]
    action = [s["action"] for s in scales]
    full_cpu = [f["cpu"] for f in fulls]
    full_wall = [f["seconds"] for f in fulls]
    floor_cpu = [f["cpu"] for f in report["floors"]]
    floor_wall = [f["seconds"] for f in report["floors"]]
    per_noop = noop["cpu"] / noop["skips"] if noop["skips"] else float("nan")
    ratio = median(full_cpu) / per_noop if per_noop else float("nan")
    m1, mn = report["memory_1"], report["memory_n"]
    latency_rows = "\n".join(
        [
            trials_row("create -> first member Pod exists", first_pod),
            trials_row("create -> Available", avail),
            trials_row(
                "spec change (size 1 -> 2) -> watcher reacts (Progressing, new generation)",
                reaction,
                digits=2,
            ),
            trials_row(
                "spec change -> runbook's first change (the new member's claim or Pod)", action
            ),
        ]
    )
    cpu_rows = "\n".join(
        [
            row(
                f"no-op resync (skip rule): {noop['skips']:.0f} skipped in {noop['window']:.0f} s"
                f" ({noop['runs']:.0f} runs in the window)",
                f"{per_noop:.4f} (upper bound: all idle CPU of the window counted)",
                "1",
            ),
            row(
                "one full playbook run of the role (operator-sdk's Ansible operator does one per"
                f" resync): {fmt(full_cpu, 2)}",
                f"{median(full_cpu):.2f}",
                f"{ratio:.0f}",
            ),
        ]
    )
    floor_rows = "\n".join(
        [
            row(
                "ansible-playbook of a one-task play (what any run pays)",
                fmt(floor_wall, 2),
                f"{median(floor_wall):.2f}",
                fmt(floor_cpu, 2),
                f"{median(floor_cpu):.2f}",
                "1",
            ),
            row(
                "a full run of the role with nothing to do (change to a watched annotation ->"
                " run done)",
                fmt(full_wall, 2),
                f"{median(full_wall):.2f}",
                fmt(full_cpu, 2),
                f"{median(full_cpu):.2f}",
                f"{median(full_wall) / median(floor_wall):.1f} wall,"
                f" {median(full_cpu) / median(floor_cpu):.1f} CPU",
            ),
        ]
    )
    where = (
        "The operator runs as a host process with its ServiceAccount's token"
        " (`hack/run-operator-as-sa`), watching one namespace of the local Kubernetes"
        " (`hack/cluster`); its runbooks reach the members through `kubectl port-forward`"
        if report["where"] == "host"
        else "The operator runs in the local Kubernetes as users deploy it (config/default,"
        f" image {report['image']}, built from the committed tree), its runbooks reaching the"
        " members by their DNS names; the benchmark reads its /metrics by the Pod's IP and its"
        " CPU and memory from /proc on this machine (the node)"
    )
    return f"""{HEADING}

Command: `{command}` (run from the repository root; `make bench` runs every benchmark).

{where}, resync period
{report["resync"]} s, fullRunInterval {report["full_run_interval"]} (so the skip rule
answers every resync of an unchanged cluster); the EtcdClusters have 1 member (etcd 3.6,
TLS on) unless scaled; each scale starts from an idle operator.
Machine: 2 cores, load average at the end {report["load"]:.1f}. Medians of the trials, each
trial listed.

| measure | trials (s) | median (s) |
| --- | --- | --- |
{latency_rows}

Where the create -> first Pod time goes: the run starts within a second of the event; the rest
is ansible-playbook's start, the role reading the cluster, and making the CA and three
certificates before the seed member's claim and Pod.

**Resync CPU** (same run, same healthy cluster of 2 members; CPU of the operator process, of its
fork server and of the runs either has waited for):

| resync | CPU seconds each | ratio |
| --- | --- | --- |
{cpu_rows}

**A full run with nothing to do against the floor** (same run; wall seconds from the
annotation's change to the run's end as the watcher saw it, CPU of the operator and its
children; the floor is ansible-playbook of a one-task play run by the benchmark itself):

| run | wall (s) | median wall | CPU (s) | median CPU | ratio to the floor |
| --- | --- | --- | --- | --- | --- |
{floor_rows}

The no-op figure divides all the operator's CPU in the window (watch streams, Lease renewals,
metrics) by the resyncs skipped in it, so it over-states the skip itself. The full run's figure
leaves out the `kubectl port-forward` processes it starts (they detach), so it under-states.

**Memory** (resident set of the operator process, and of its ansible fork server; the runs are
processes of their own):

| EtcdClusters watched | VmRSS (MiB) | peak VmHWM (MiB) | fork server VmRSS (MiB) |
| --- | --- | --- | --- |
| 1 | {m1["VmRSS"]:.1f} | {m1["VmHWM"]:.1f} | {m1.get("server", 0.0):.1f} |
| {report["clusters"]} | {mn["VmRSS"]:.1f} | {mn["VmHWM"]:.1f} | {mn.get("server", 0.0):.1f} |

The last {report["clusters"] - len(creates)} clusters were created at once and were all
Available after {report["all_available_seconds"]:.0f} s (runs of different objects in parallel,
up to --max-concurrent-reconciles).
"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/run.py operator", description=__doc__)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--full-runs", type=int, default=3)
    parser.add_argument("--resync", type=int, default=5, help="resync period in seconds")
    parser.add_argument(
        "--full-run-interval",
        default="1h",
        help="the skip rule's bound (fullRunInterval); longer than the whole benchmark",
    )
    add_where_arguments(parser)
    args = parse_args(parser, argv)
    return finish(run(args), section, HEADING, command("operator", argv), args.no_docs)
