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
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.docs_section import write_section

REPO = Path(__file__).resolve().parent.parent
HEADING = "## Operator: latency, resync CPU, memory"
GROUP_PATH = "/apis/etcd.runbook.io/v1alpha1"

sys.path.insert(0, str(REPO))
from etcd_runbook_operator.kube import Kube  # noqa: E402
from tests.e2e.operator_process import OperatorProcess  # noqa: E402
from tests.k8s_cluster import K8sCluster  # noqa: E402


def cluster_up() -> K8sCluster:
    up = subprocess.run(
        [str(REPO / "hack" / "cluster"), "up"], capture_output=True, text=True, timeout=3600
    )
    if up.returncode != 0:
        raise SystemExit(f"hack/cluster up failed:\n{up.stderr[-4000:]}")
    bin_dir = subprocess.run(
        [str(REPO / "hack" / "cluster"), "bin"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return K8sCluster(kubeconfig=Path(up.stdout.strip()), bin_dir=Path(bin_dir))


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


wait_for = K8sCluster.wait_for


def one_member_cluster(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "etcd.runbook.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": name},
        "spec": {"size": 1, "storage": {"size": "1Gi"}},
    }


class Bench:
    def __init__(
        self, k8s: K8sCluster, ns: str, metrics_address: str, pid: Callable[[], int]
    ) -> None:
        """`metrics_address`: host:port of the operator's /metrics; `pid`: the operator
        process's PID on this machine (a host process, or the in-cluster container's)."""
        self.k8s = k8s
        self.ns = ns
        self.metrics_address = metrics_address
        self.pid = pid
        self.kube = Kube(k8s.api_client())

    # --- reading -----------------------------------------------------------------------------
    def etcd_path(self, name: str = "") -> str:
        return f"{GROUP_PATH}/namespaces/{self.ns}/etcdclusters" + (f"/{name}" if name else "")

    def dependents(self, kind: str, cluster: str) -> list[str]:
        query = {"labelSelector": f"etcd.runbook.io/cluster={cluster}"}
        items = self.kube.get(f"/api/v1/namespaces/{self.ns}/{kind}", query)["items"]
        return [i["metadata"]["name"] for i in items]

    def available(self, name: str, size: int) -> bool:
        obj = self.kube.get(self.etcd_path(name))
        status = obj.get("status", {})
        avail = any(
            c["type"] == "Available" and c["status"] == "True" for c in status.get("conditions", [])
        )
        return (
            avail
            and status.get("readyMembers") == size
            and status.get("observedGeneration") == obj["metadata"]["generation"]
        )

    def metrics(self) -> dict[str, float]:
        text = urllib.request.urlopen(f"http://{self.metrics_address}/metrics", timeout=5)
        out: dict[str, float] = {}
        for line in text.read().decode().splitlines():
            if line.startswith("etcd_runbook_operator_reconcile"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def counter(self, result: str) -> float:
        key = f'etcd_runbook_operator_reconcile_total{{kind="EtcdCluster",result="{result}"}}'
        return self.metrics().get(key, 0.0)

    def cpu_seconds(self) -> float:
        """utime + stime of the operator, of its live children (its ansible fork server) and
        of the children each has waited for (the runs: ansible-runner's, or the server's
        keepers, which wait for their run)."""
        ticks = 0
        for pid in [self.pid(), *children(self.pid())]:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += sum(int(f) for f in fields[11:15])
        return ticks / os.sysconf("SC_CLK_TCK")

    def memory_mib(self) -> dict[str, float]:
        """The operator process's VmRSS and VmHWM, and `server`: its fork server's VmRSS."""
        out: dict[str, float] = {"server": 0.0}
        for pid in [self.pid(), *children(self.pid())]:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                key, _, value = line.partition(":")
                if pid != self.pid() and key == "VmRSS":
                    out["server"] += int(value.split()[0]) / 1024
                elif pid == self.pid() and key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) / 1024  # kB -> MiB
        return out

    def idle(self, settle: float = 5.0, timeout: float = 300) -> None:
        """Wait until no reconcile has finished (other than skips) for `settle` seconds."""

        def quiet() -> bool:
            before = self.counter("success") + self.counter("failure")
            time.sleep(settle)
            return before == self.counter("success") + self.counter("failure")

        wait_for(quiet, timeout, 0.1, "the operator to be idle")

    # --- actions -----------------------------------------------------------------------------
    def create(self, name: str) -> dict[str, float]:
        started = time.monotonic()
        self.kube.create(self.etcd_path(), one_member_cluster(name))
        wait_for(lambda: self.dependents("pods", name), 300, 0.1, f"{name}'s first Pod")
        first_pod = time.monotonic() - started
        wait_for(lambda: self.available(name, 1), 600, 0.5, f"{name} Available")
        return {"first_pod": first_pod, "available": time.monotonic() - started}

    def scale_up(self, name: str) -> dict[str, float]:
        generation = int(self.kube.get(self.etcd_path(name))["metadata"]["generation"]) + 1

        def reacted() -> bool:
            status = self.kube.get(self.etcd_path(name)).get("status", {})
            return any(
                c["type"] == "Progressing"
                and c["status"] == "True"
                and c.get("observedGeneration") == generation
                for c in status.get("conditions", [])
            )

        def acted() -> bool:
            new = f"{name}-1"
            return new in self.dependents("pods", name) or f"{new}-data" in self.dependents(
                "persistentvolumeclaims", name
            )

        started = time.monotonic()
        self.kube.merge_patch(self.etcd_path(name), {"spec": {"size": 2}})
        wait_for(reacted, 300, 0.05, f"{name}: Progressing for generation {generation}")
        reaction = time.monotonic() - started
        wait_for(acted, 300, 0.1, f"{name}: the new member's claim or Pod")
        action = time.monotonic() - started
        wait_for(lambda: self.available(name, 2), 600, 0.5, f"{name} Available with 2")
        return {"reaction": reaction, "action": action, "available": time.monotonic() - started}

    def noop_resyncs(self, window: float) -> dict[str, float]:
        skipped = "etcd_runbook_operator_reconcile_skipped_total"
        key = f'{skipped}{{kind="EtcdCluster"}}'
        runs_before = self.counter("success") + self.counter("failure")
        skips_before, cpu_before = self.metrics().get(key, 0.0), self.cpu_seconds()
        time.sleep(window)
        skips, cpu = self.metrics().get(key, 0.0) - skips_before, self.cpu_seconds() - cpu_before
        runs = self.counter("success") + self.counter("failure") - runs_before
        return {"skips": skips, "cpu": cpu, "runs": runs, "window": window}

    def full_run(self, name: str, nonce: str) -> dict[str, float]:
        done_before = self.counter("success") + self.counter("failure")
        cpu_before, started = self.cpu_seconds(), time.monotonic()
        # Annotations of the API group are inputs (the fingerprint covers them): one full run.
        self.kube.merge_patch(
            self.etcd_path(name), {"metadata": {"annotations": {"etcd.runbook.io/bench": nonce}}}
        )
        wait_for(
            lambda: self.counter("success") + self.counter("failure") > done_before,
            600,
            0.2,
            f"{name}: the forced full run",
        )
        elapsed = time.monotonic() - started
        # The fork server reaps a run's keeper within a second: only then is the run's CPU its.
        time.sleep(1.5)
        return {"cpu": self.cpu_seconds() - cpu_before, "seconds": elapsed}


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


def row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def fmt(values: list[float], digits: int = 1) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values)


def process_pid(op: OperatorProcess) -> int:
    assert op.proc is not None
    return op.proc.pid


class InCluster:
    """The operator as users deploy it (config/default, its image built from the committed tree
    of `ref`), with the benchmark's resync period and skip-rule bound, when given, written into
    the tree's watches.yaml before the build; start() deploys it, stop() scales it back."""

    def __init__(
        self,
        k8s: K8sCluster,
        ref: str,
        resync: int | None = None,
        full_run_interval: str | None = None,
    ) -> None:
        from bench.restore import operator_tree
        from tests.e2e.operator_incluster import replicas

        self.k8s = k8s
        self.asked = replicas(k8s)
        self.tree = operator_tree(ref, Path(tempfile.mkdtemp(prefix="bench-operator-tree-")))
        self.resync, self.full_run_interval = resync, full_run_interval
        self.image = ""

    def start(self) -> Bench:
        import yaml

        from tests.e2e.operator_incluster import (
            NAMESPACE,
            SELECTOR,
            InClusterOperator,
            deploy,
            operator_host_pids,
        )

        if self.resync is not None or self.full_run_interval is not None:
            path = self.tree / "watches.yaml"
            watches = yaml.safe_load(path.read_text())
            for entry in watches:
                if self.resync is not None:
                    entry["reconcilePeriod"] = f"{self.resync}s"
                if self.full_run_interval is not None:
                    entry["fullRunInterval"] = self.full_run_interval
            path.write_text(yaml.safe_dump(watches))
        self.image = deploy(self.k8s, self.tree)
        InClusterOperator(self.k8s).wait_running()
        pod = json.loads(
            self.k8s.kubectl("-n", NAMESPACE, "get", "pods", "-l", SELECTOR, "-o", "json").stdout
        )["items"][0]

        def pid() -> int:
            pids = operator_host_pids()
            assert len(pids) == 1, f"expected one in-cluster operator process, found {pids}"
            return pids[0]

        # The Pod network is routed to this machine (hack/cluster): /metrics by the Pod's IP.
        return Bench(self.k8s, "", f"{pod['status']['podIP']}:8080", pid)

    def stop(self) -> None:
        import shutil

        from tests.e2e.operator_incluster import DEPLOYMENT, NAMESPACE

        self.k8s.kubectl(
            "-n",
            NAMESPACE,
            "scale",
            "deployment",
            DEPLOYMENT,
            f"--replicas={self.asked}",
            check=False,
        )
        if self.tree != REPO:
            shutil.rmtree(self.tree, ignore_errors=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    k8s = cluster_up()
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    k8s.kubectl("create", "namespace", ns)
    workdir = Path(tempfile.mkdtemp(prefix="bench-operator-"))
    report: dict[str, Any] = {
        "resync": args.resync,
        "full_run_interval": args.full_run_interval,
        "where": args.where,
    }
    op: OperatorProcess | None = None
    incluster: InCluster | None = None
    try:
        if args.where == "host":
            extra = [
                "--reconcile-period",
                str(args.resync),
                "--watches-file",
                str(bench_watches(workdir, args.full_run_interval)),
            ]
            op = OperatorProcess(k8s, ns, workdir, extra_args=extra)
            op.start()
            op.wait_running(3)
            bench = Bench(k8s, ns, op.metrics_address, lambda: process_pid(op))
        else:
            incluster = InCluster(k8s, args.ref, args.resync, args.full_run_interval)
            bench = incluster.start()
            bench.ns = ns
            report["image"] = incluster.image
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
            report["noop"] = bench.noop_resyncs(args.window)
            print(f"no-op resyncs: {report['noop']}", flush=True)
            if not report["noop"]["runs"]:
                break
            bench.idle()
        fulls = []
        for i in range(args.full_runs):
            fulls.append(bench.full_run(names[0], f"{i}-{uuid.uuid4().hex[:6]}"))
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
    finally:
        k8s.kubectl("-n", ns, "delete", "etcd", "--all", "--timeout=600s", check=False, timeout=660)
        if op is not None:
            op.stop()
        if incluster is not None:
            incluster.stop()
        k8s.kubectl("delete", "namespace", ns, "--wait=false", check=False)
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
            row("create -> first member Pod exists", fmt(first_pod), f"{median(first_pod):.1f}"),
            row("create -> Available", fmt(avail), f"{median(avail):.1f}"),
            row(
                "spec change (size 1 -> 2) -> watcher reacts (Progressing, new generation)",
                fmt(reaction, 2),
                f"{median(reaction):.2f}",
            ),
            row(
                "spec change -> runbook's first change (the new member's claim or Pod)",
                fmt(action),
                f"{median(action):.1f}",
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


def children(pid: int) -> list[int]:
    """The live children of `pid` that run Python (the fork server; not ansible-runner's
    short-lived clients)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"forkserver.py" in cmdline:
                found.append(int(child))
    return found


def add_where_arguments(parser: argparse.ArgumentParser) -> None:
    """--where and --ref: which operator a benchmark measures (InCluster, or a host process)."""
    parser.add_argument(
        "--where",
        choices=("incluster", "host"),
        default="incluster",
        help="the operator in the cluster as deployed (modules reach members by DNS), or as a "
        "host process (through kubectl port-forwards)",
    )
    parser.add_argument("--ref", default="HEAD", help="git ref of the in-cluster operator")


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
    parser.add_argument(
        "--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md's section"
    )
    args = parser.parse_args(argv)
    report = run(args)
    print(json.dumps(report, indent=1))
    text = section(report, ("python bench/run.py operator " + " ".join(argv)).strip())
    print(text)
    if not args.no_docs:
        write_section(HEADING, text)
    return 0
