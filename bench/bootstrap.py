"""A 3-member cluster by the operator against statically bootstrapped etcd; healing (issue 9).

    .venv/bin/python bench/run.py bootstrap [--trials 3] [--leader-trials 1] [--no-docs]

Brings the local cluster up (hack/cluster up) and runs the operator with the shipped
watches.yaml (resync 60 s): by default in the cluster as users deploy it (the image built from
the committed tree of --ref; its runs' artifacts copied out of its Pod), with --where host as
a host process with its ServiceAccount's token (hack/run-operator-as-sa), watching one fresh
namespace. Then, in one run:

1. bootstrap, interleaved (static, operator, static, operator ...) so the machine's load falls
   on both alike, --trials times each:
   - static: a headless Service and three Pods of the very image the operator's members run
     (`<spec.repository>:v<version>` as the API server defaults it, checked against the
     operator's Pods), all three started at once with the full --initial-cluster and
     --initial-cluster-state new; plain http, data in an emptyDir. Clock: from the first POST
     (the Service) until all three members answer /health with true (through the API
     server's pod proxy). Then deleted, and gone, before the next trial.
   - operator: an EtcdCluster `size: 3, version: 3.6.16` (TLS, a PersistentVolumeClaim per
     member). Clock: from the POST until status says Available=True with 3 ready members for
     the current generation; on the way, when all three members first answered /health. The
     runbook's task timings of the trial are read from the ansible-runner artifacts. Every
     cluster but the last is deleted (with its claims) before the next trial.
2. heal, on the last operator cluster: a member Pod that is not the etcd leader is deleted
   (--trials times, the operator idle between), then the leader (--leader-trials times).
   Clock: from the DELETE until the new Pod is Ready and the status says Available with all
   members ready again, written after the deletion (a status that showed the member missing,
   or a reconcile run finished since).

Unless --no-docs, rewrites this benchmark's section of docs/benchmarks.md. Every wait is
bounded; the namespace is deleted at the end. The operator's log and artifacts stay in the
work directory printed at the start.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness.cluster import (
    available,
    delete_claims,
    etcd_cluster,
    gone,
    healthy,
    member_image,
    pod_ready,
    proxy,
    stamp,
)
from bench.harness.measured_operator import Bench, add_where_arguments, operator_watching
from bench.harness.report import command, finish, fmt, load1, median, parse_args, row, trials_row
from bench.harness.static_etcd import (
    STATIC_LABEL,
    create_static,
    delete_static,
    static_objects,
    static_tls_secret,
)
from etcd_runbook_operator.kube import ApiException
from testbed.cluster import K8sCluster, cluster_up, wait_for
from testbed.operator_incluster import NAMESPACE, SELECTOR

REPO = Path(__file__).resolve().parent.parent
HEADING = "## Operator: 3-member bootstrap and heal against static etcd"
VERSION = "3.6.16"
SIZE = 3
HEAL_GOAL = 10.0
RATIO_GOAL = 1.5
# Where the Deployment (config/manager) has the operator keep its runs' artifacts.
ARTIFACTS_IN_POD = "/var/lib/etcd-runbook-operator/artifacts"


def static_claims(name: str) -> list[dict[str, Any]]:
    """A claim per member from the default StorageClass, as the operator's (1Gi)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"{name}-{i}-data", "labels": {STATIC_LABEL: name}},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        for i in range(SIZE)
    ]


def pod_artifacts(k8s: K8sCluster, workdir: Path) -> Callable[[str], None]:
    """Copies one EtcdCluster's ansible-runner artifacts out of the in-cluster operator's Pod
    into `workdir`/artifacts, in the layout a host process writes them."""

    def sync(path: str) -> None:
        pod = json.loads(
            k8s.kubectl("-n", NAMESPACE, "get", "pods", "-l", SELECTOR, "-o", "json").stdout
        )["items"][0]["metadata"]["name"]
        packed = subprocess.run(
            [
                str(k8s.bin_dir / "kubectl"),
                *("--kubeconfig", str(k8s.kubeconfig), "-n", NAMESPACE, "exec", pod, "--"),
                *("tar", "-C", ARTIFACTS_IN_POD, "-cf", "-", path),
            ],
            capture_output=True,
            timeout=60,
            check=False,
        )
        if packed.returncode == 0:
            (workdir / "artifacts").mkdir(exist_ok=True)
            subprocess.run(
                ["tar", "-x", "-C", str(workdir / "artifacts")],
                input=packed.stdout,
                check=True,
                timeout=60,
            )

    return sync


class Run:
    def __init__(
        self, bench: Bench, workdir: Path, sync: Callable[[str], None] | None = None
    ) -> None:
        """`sync`: brings an object's artifacts (etcdcluster/<ns>/<name>) into `workdir`,
        for an operator that does not write them here itself."""
        self.bench = bench
        self.kube = bench.kube
        self.ns = bench.ns
        self.workdir = workdir
        self.sync = sync
        self.synced = 0.0

    def pods_path(self, name: str = "") -> str:
        return f"/api/v1/namespaces/{self.ns}/pods" + (f"/{name}" if name else "")

    def image(self) -> str:
        """The image the operator's member Pods run for VERSION: the server-defaulted
        spec.repository (a dry-run create), laid out as etcd_manifests.member_pod does."""
        return member_image(
            self.kube,
            self.bench.etcd_path(),
            etcd_cluster("image-probe", size=SIZE, version=VERSION),
        )

    # --- static --------------------------------------------------------------------------
    def static_trial(self, name: str, image: str, durable: bool = False) -> dict[str, float]:
        service, pods = static_objects(self.ns, name, image, durable=durable)
        members = [p["metadata"]["name"] for p in pods]
        core = f"/api/v1/namespaces/{self.ns}"
        if durable:
            self.kube.create(f"{core}/secrets", static_tls_secret(self.ns, name))
        load = load1()
        started = time.monotonic()
        create_static(self.kube, self.ns, service, pods, static_claims(name) if durable else [])
        # The metrics port serves /health over plain http either way.
        wait_for(
            lambda: all(healthy(self.kube, self.ns, m, 2381) for m in members),
            600,
            0.25,
            f"static {name}: 3 members healthy",
        )
        seconds = time.monotonic() - started
        self.static_delete(name, members, durable)
        return {"healthy": seconds, "load": load}

    def static_delete(self, name: str, members: list[str], durable: bool = False) -> None:
        delete_static(self.kube, self.ns, name, members)
        if durable:
            core = f"/api/v1/namespaces/{self.ns}"
            for member in members:
                self.kube.delete(f"{core}/persistentvolumeclaims/{member}-data")
            self.kube.delete(f"{core}/secrets/{name}-tls")

    # --- operator ------------------------------------------------------------------------
    def operator_trial(self, name: str) -> dict[str, Any]:
        members = [f"{name}-{i}" for i in range(SIZE)]
        load = load1()
        wall_start = time.time()
        started = time.monotonic()
        self.kube.create(self.bench.etcd_path(), etcd_cluster(name, size=SIZE, version=VERSION))
        all_healthy = 0.0
        deadline = started + 900
        while True:
            now = time.monotonic()
            if not all_healthy and all(healthy(self.kube, self.ns, m, 2381) for m in members):
                all_healthy = time.monotonic() - started
            try:
                if self.bench.available(name, SIZE):
                    break
            except Exception as exc:
                print(f"reading {name}: {exc}", flush=True)
            if now > deadline:
                raise TimeoutError(f"{name} not Available with {SIZE} after 900 s")
            self.keep_artifacts(name)
            time.sleep(0.25)
        available = time.monotonic() - started
        wall_available = time.time()
        # The run that wrote Available may still be going: its events up to Available count.
        self.bench.idle()
        self.keep_artifacts(name, now=True)
        if not all_healthy:  # Available with 3 ready: they answered between two polls.
            all_healthy = available
        images = {
            p["spec"]["containers"][0]["image"]
            for p in self.kube.get(
                self.pods_path(), {"labelSelector": f"etcd.runbook.io/cluster={name}"}
            )["items"]
        }
        return {
            "healthy": all_healthy,
            "available": available,
            "load": load,
            "images": sorted(images),
            "tasks": self.task_times(name, wall_start, wall_available),
        }

    def operator_delete(self, name: str) -> None:
        self.kube.delete(self.bench.etcd_path(name))
        wait_for(lambda: gone(self.kube, self.bench.etcd_path(name)), 600, 1, f"{name} deleted")
        delete_claims(self.kube, self.ns, name, 300)
        self.bench.idle()

    def keep_artifacts(self, name: str, now: bool = False) -> None:
        """Copy the finished runs' events of one object: the runner keeps only the newest
        maxRunnerArtifacts (5) runs of it. From an operator's Pod, every 2 s at most unless
        `now`."""
        if self.sync is not None and (now or time.monotonic() - self.synced > 2):
            self.sync(f"etcdcluster/{self.ns}/{name}")
            self.synced = time.monotonic()
        for run_dir in (self.workdir / "artifacts").glob(f"*/{self.ns}/{name}/*"):
            dest = self.workdir / "kept" / name / run_dir.name
            if dest.exists() or not (run_dir / "status").exists():
                continue
            try:
                shutil.copytree(run_dir / "job_events", dest / "job_events")
                shutil.copy(run_dir / "status", dest / "status")
            except OSError:
                shutil.rmtree(dest, ignore_errors=True)

    def task_times(self, name: str, since: float, until: float) -> dict[str, Any]:
        """The runbook runs of one object between two wall-clock times, from the kept
        ansible-runner events: each run's start (after `since`), span and end status, and the
        task durations summed by task name (tasks that ended by `until`)."""
        runs: list[dict[str, Any]] = []
        totals: dict[str, float] = defaultdict(float)
        for run_dir in sorted(p for p in (self.workdir / "kept" / name).glob("*") if p.is_dir()):
            events = []
            for path in (run_dir / "job_events").glob("*.json"):
                try:
                    events.append(json.loads(path.read_text()))
                except (OSError, ValueError):
                    continue
            created = [stamp(e["created"]) for e in events if e.get("created")]
            if not created or min(created) < since or min(created) > until:
                continue
            for e in events:
                data = e.get("event_data") or {}
                if (
                    e.get("event", "").startswith("runner_on_")
                    and data.get("duration") is not None
                    and data.get("end")
                    and stamp(data["end"]) <= until
                ):
                    totals[str(data.get("task"))] += float(data["duration"])
            status = (
                (run_dir / "status").read_text().strip() if (run_dir / "status").exists() else "?"
            )
            runs.append(
                {
                    "start": min(created) - since,
                    "span": min(max(created), until) - min(created),
                    "status": status,
                }
            )
        top = sorted(totals.items(), key=lambda kv: -kv[1])[:10]
        return {"runs": runs, "top": top, "task_total": sum(totals.values())}

    # --- heal --------------------------------------------------------------------------------
    def leader(self, name: str) -> str:
        for i in range(SIZE):
            member = f"{name}-{i}"
            metrics = proxy(self.kube, self.ns, member, 2381, "metrics")
            if any(line.strip() == "etcd_server_is_leader 1" for line in metrics.splitlines()):
                return member
        raise RuntimeError(f"{name}: no member reports etcd_server_is_leader 1")

    def settled(self, name: str) -> None:
        def ready() -> bool:
            pods = self.kube.get(
                self.pods_path(), {"labelSelector": f"etcd.runbook.io/cluster={name}"}
            )["items"]
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            return (
                len(live) == SIZE
                and all(pod_ready(p) for p in live)
                and self.bench.available(name, SIZE)
            )

        wait_for(ready, 600, 1, f"{name}: {SIZE} Pods Ready and Available")
        self.bench.idle()

    def heal_trial(self, name: str, victim: str) -> dict[str, Any]:
        path = self.pods_path(victim)
        old_uid = self.kube.get(path)["metadata"]["uid"]
        runs_before = self.bench.runs_done()
        load = load1()
        started = time.monotonic()
        self.kube.delete(path)
        marks: dict[str, float] = {}
        saw_missing = False
        while "available" not in marks:
            t = time.monotonic() - started
            if t > 600:
                raise TimeoutError(f"{victim} not healed after 600 s: {marks}")
            try:
                pod = self.kube.get(path)
            except ApiException:
                pod = {}
            if pod and pod["metadata"]["uid"] != old_uid:
                marks.setdefault("recreated", t)
                if "healthy" not in marks and healthy(self.kube, self.ns, victim, 2381):
                    marks["healthy"] = time.monotonic() - started
                if "ready" not in marks and pod_ready(pod):
                    marks["ready"] = time.monotonic() - started
            try:
                obj = self.kube.get(self.bench.etcd_path(name))
            except Exception as exc:  # a slow API server: poll again
                print(f"reading {name}: {exc}", flush=True)
                obj = {}
            status = obj.get("status", {})
            member_ready = any(
                m.get("name") == victim and m.get("ready") for m in status.get("members", [])
            )
            if status.get("readyMembers") != SIZE or not member_ready:
                saw_missing = True
            if "ready" in marks and member_ready and available(obj, SIZE):
                try:
                    runs = self.bench.runs_done()
                except OSError:
                    runs = runs_before
                if saw_missing or runs > runs_before:
                    marks["available"] = time.monotonic() - started
                    break
            time.sleep(0.25)
        marks.setdefault("healthy", marks["ready"])
        return {"victim": victim, "load": load, **marks}


def run(args: argparse.Namespace) -> dict[str, Any]:
    k8s = cluster_up()
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    workdir = Path(tempfile.mkdtemp(prefix="bench-bootstrap-"))
    print(f"namespace {ns}, work directory {workdir}", flush=True)
    report: dict[str, Any] = {"trials": args.trials, "workdir": str(workdir), "ns": ns}
    report["where"] = args.where
    report["load_start"] = load1()
    began = time.monotonic()
    # The shipped watches.yaml (resync 60 s); OperatorProcess's own default is 300 s.
    host_args = ["--watches-file", str(REPO / "watches.yaml"), "--reconcile-period", "60"]
    with operator_watching(k8s, ns, args.where, args.ref, workdir, host_args) as bench:
        if args.where == "host":
            r = Run(bench, workdir)
        else:
            report["operator_image"] = bench.image
            r = Run(bench, workdir, pod_artifacts(k8s, workdir))
        wait_for(lambda: bench.metrics() is not None, 60, 0.5, "the operator's metrics")
        image = r.image()
        report["image"] = image
        statics: list[dict[str, Any]] = []
        durables: list[dict[str, Any]] = []
        operators: list[dict[str, Any]] = []
        for i in range(args.trials):
            statics.append(r.static_trial(f"static-{i}", image))
            print(f"static {i}: {statics[-1]}", flush=True)
            durables.append(r.static_trial(f"durable-{i}", image, durable=True))
            print(f"static with claims and TLS {i}: {durables[-1]}", flush=True)
            name = f"op-{i}"
            operators.append(r.operator_trial(name))
            print(f"operator {i}: {json.dumps(operators[-1])}", flush=True)
            if operators[-1]["images"] != [image]:
                raise SystemExit(f"operator Pods run {operators[-1]['images']}, baseline {image}")
            if i < args.trials - 1:
                r.operator_delete(name)
        report["static"], report["operator"] = statics, operators
        report["static_durable"] = durables
        name = f"op-{args.trials - 1}"
        heals: list[dict[str, Any]] = []
        for i in range(args.trials):
            r.settled(name)
            leader = r.leader(name)
            others = [f"{name}-{j}" for j in range(SIZE) if f"{name}-{j}" != leader]
            heals.append(r.heal_trial(name, others[i % len(others)]))
            print(f"heal (not the leader) {i}: {heals[-1]}", flush=True)
        report["heal"] = heals
        leader_heals: list[dict[str, Any]] = []
        for i in range(args.leader_trials):
            r.settled(name)
            leader_heals.append(r.heal_trial(name, r.leader(name)))
            print(f"heal (the leader) {i}: {leader_heals[-1]}", flush=True)
        report["heal_leader"] = leader_heals
        report["load_end"] = load1()
        report["minutes"] = (time.monotonic() - began) / 60
    return report


def heal_rows(heals: list[dict[str, Any]], what: str) -> list[str]:
    def col(key: str) -> list[float]:
        return [h[key] for h in heals]

    return [
        trials_row(f"{what}: DELETE -> new Pod exists", col("recreated")),
        trials_row(f"{what}: DELETE -> the new member's etcd /health true", col("healthy")),
        trials_row(f"{what}: DELETE -> Pod Ready", col("ready")),
        trials_row(
            f"**{what}: DELETE -> Pod Ready and status Available, all members ready**",
            col("available"),
            bold=True,
        ),
    ]


def where_the_time_goes(operators: list[dict[str, Any]]) -> str:
    lines = []
    for i, o in enumerate(operators):
        tasks = o["tasks"]
        runs = tasks["runs"]
        spans = [f"{r['start']:.1f} (+{r['span']:.1f}, {r['status']})" for r in runs]
        inside = sum(r["span"] for r in runs)
        top = "; ".join(f"{t} {s:.1f}" for t, s in tasks["top"][:6])
        lines.append(
            f"- trial {i + 1}, Available at {o['available']:.1f} s: {len(runs)} runs, started at"
            f" (s after the POST; playbook span, end) {', '.join(spans) or 'none kept'}; inside"
            f" playbooks {inside:.1f} s, outside (ansible-playbook start-up, between runs)"
            f" {o['available'] - inside:.1f} s. Task seconds {tasks['task_total']:.1f}, the"
            f" largest: {top}."
        )
    return "\n".join(lines)


def section(report: dict[str, Any], command: str) -> str:
    static = [s["healthy"] for s in report["static"]]
    durable = [s["healthy"] for s in report.get("static_durable") or []]
    op_healthy = [o["healthy"] for o in report["operator"]]
    op_avail = [o["available"] for o in report["operator"]]
    ratio = median(op_avail) / median(static)
    ratio_durable = median(op_avail) / median(durable) if durable else float("nan")
    ratio_healthy = median(op_healthy) / median(static)
    per_trial_ratio = [a / s for a, s in zip(op_avail, static, strict=True)]
    loads = [s["load"] for s in report["static"]] + [o["load"] for o in report["operator"]]
    heal = report["heal"]
    heal_median = median([h["available"] for h in heal])
    rows = [
        trials_row("static: first POST -> 3 members' /health true", static),
        row(
            "static with a claim per member and TLS: first POST -> 3 members' /health true",
            fmt(durable),
            f"{median(durable):.1f}" if durable else "",
        ),
        trials_row("operator: POST -> 3 members' /health true", op_healthy),
        trials_row("**operator: POST -> Available, 3 ready members**", op_avail, bold=True),
    ]
    heal_table = heal_rows(heal, "not the leader")
    if report["heal_leader"]:
        heal_table += heal_rows(report["heal_leader"], "the leader")
    victims = ", ".join(h["victim"] for h in heal + report["heal_leader"])
    verdict = "meets" if ratio <= RATIO_GOAL else "misses"
    heal_verdict = "meets" if heal_median <= HEAL_GOAL else "misses"
    rows_text = "\n".join(rows)
    heal_text = "\n".join(heal_table)
    where = (
        "as a host process with its ServiceAccount's token (`hack/run-operator-as-sa`), its"
        " runbooks reaching the members through `kubectl port-forward`,"
        if report["where"] == "host"
        else f"in the cluster as users deploy it (image {report['operator_image']}, built from"
        " the committed tree), its runbooks reaching the members by DNS,"
    )
    return f"""{HEADING}

Command: `{command}` (run from the repository root; `make bench` runs every benchmark).

Both kinds of cluster run on the local Kubernetes (`hack/cluster`), in one namespace, the
operator {where} with the shipped watches.yaml, every member from
`{report["image"]}` (the image the operator's Pods ran, checked every trial). Static and
operator trials alternate (static, operator, static ...) so the machine's load falls on both
alike; each static cluster is deleted, and each operator cluster but the last deleted with its
claims, before the next trial.

- **static**: a headless Service and three Pods started at once, each with the full
  `--initial-cluster` and `--initial-cluster-state new`, the operator's DNS names; **plain http
  and an emptyDir**. The operator's cluster has TLS (a CA and certificates it issues), a
  PersistentVolumeClaim per member, a client Service and a PodDisruptionBudget; it starts every
  member at once too (claims first), then waits for each to be healthy and records its
  identity on its claim before it reports Available, which the static cluster does not do.
- **static with a claim per member and TLS**: the same Pods, each with its data on a
  PersistentVolumeClaim of the default StorageClass (made with the Pods, inside the clock) and
  TLS between members and for clients (a CA and one certificate made before the clock starts),
  the parts of the operator's cluster that hold data safely. It has no client Service, budget
  or identity record.
- clocks: static, from the first POST to all three members answering etcd's `/health` with
  true (on the metrics port, polled through the API server's pod proxy every 0.25 s);
  operator, from the POST of the EtcdCluster to its status saying Available=True with 3 ready
  members for the current
  generation (also noted: when all three members first answered `/health`, on the metrics
  port).

Machine: 2 cores, shared; load average (1 min) {report["load_start"]:.1f} at the start,
{report["load_end"]:.1f} at the end, {min(loads):.1f} to {max(loads):.1f} at the trials' starts.
Whole run {report["minutes"]:.0f} min, {report["trials"]} trials of each.

| measure | trials (s) | median (s) |
| --- | --- | --- |
{rows_text}

**Ratio of medians, operator Available / static: {ratio:.2f}** (goal <= {RATIO_GOAL}: {verdict}
it); per trial {fmt(per_trial_ratio, 2)}. To all three members healthy, before the status says
so: {ratio_healthy:.2f}. **Against the static cluster with claims and TLS: {ratio_durable:.2f}.**

Where the operator's time went (ansible-runner artifacts of each trial's EtcdCluster; task
seconds summed over its runs):

{where_the_time_goes(report["operator"])}

**Heal** (the last operator cluster, Available and the operator idle before each trial; victims
in order: {victims}). Clock from the DELETE of the member Pod; the last row is the figure: the
new Pod Ready and a status written after the deletion (one that showed the member missing, or
after a reconcile run that finished since) saying Available with every member ready.

| measure | trials (s) | median (s) |
| --- | --- | --- |
{heal_text}

Median heal of a member that is not the leader: {heal_median:.1f} s (goal <= {HEAL_GOAL:.0f} s:
{heal_verdict} it).
"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/run.py bootstrap", description=__doc__)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument(
        "--leader-trials", type=int, default=1, help="heal trials that delete the leader"
    )
    add_where_arguments(parser)
    args = parse_args(parser, argv)
    return finish(run(args), section, HEADING, command("bootstrap", argv), args.no_docs)
