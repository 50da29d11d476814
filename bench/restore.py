"""An EtcdRestore against `etcdutl snapshot restore` and a static start (issue 10, item 9).

    .venv/bin/python bench/run.py restore [--size-mb 1024] [--trials 2] [--no-docs]

Brings the local cluster (hack/cluster up) and its S3 store (hack/object-store up: versitygw in
namespace object-store, Service s3, Secret s3-credentials) up, and deploys the operator in the
cluster as users run it (config/default and the image hack/build-operator-image builds:
InCluster of bench/harness/measured_operator.py), both from the committed tree of --ref
(default HEAD, exported with `git archive`; `--ref worktree` for the working tree): the
restore Job's fetch step runs the operator's image, which the in-cluster operator names from
its own Pod. In one fresh namespace:

1. setup: an EtcdCluster `origin` (3 members, etcd 3.6.16, TLS; its volumes sized so that
   the backend quota, which follows the volume, holds the database) is filled through a
   port-forward to a member (the etcd client of bench/harness/etcd_member.py over the
   cluster's own client certificate, several puts in flight) with distinct keys of
   --value-kb random bytes until etcd's database reaches --size-mb (bounded by
   --fill-seconds); an EtcdBackup streams its snapshot into a fresh bucket of the store;
   then the EtcdCluster and its claims are deleted. Only the snapshot in S3 is left, as
   after losing a cluster.
2. trials, alternating (baseline, operator, baseline, operator ...), --trials of each:
   - baseline, etcd's documented restore done by hand on the same Kubernetes: a headless
     Service and three Pods of the image the operator's members run, each with two init
     containers, `wget` (busybox) of a presigned URL of the same object into an emptyDir, then
     `etcdutl snapshot restore` of it (its name, the full --initial-cluster, a new token,
     --bump-revision 1000000000 --mark-compacted, as the operator's Job) into the data dir,
     then etcd started statically (--initial-cluster-state new, plain http, emptyDir), as
     bench/bootstrap.py's static cluster. Clock: from the first POST until all three members
     answer /health with true (through the API server's pod proxy).
   - operator: an EtcdRestore from the EtcdBackup into a new EtcdCluster of the same spec.
     Clock: from the POST until the EtcdCluster says Available=True with 3 ready members for
     its generation; also noted: each phase of the EtcdRestore as first seen (Pending,
     Restoring, Starting, Succeeded), each member's first /health true, and the restore Job's
     Pod (created, its fetch and restore containers' start and end, from Pod status).
   Every restored cluster is checked to hold a database of the snapshot's size, then deleted
   (with its claims, and the EtcdRestore) before the next trial.

Every wait is bounded; the namespace and the bucket are deleted at the end and the operator's
Deployment is scaled back to what it was. Unless --no-docs, rewrites this benchmark's section
of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import json
import math
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.harness.cluster import (  # noqa: E402
    GROUP_PATH,
    admin_kube,
    available,
    delete_claims,
    etcd_cluster,
    gone,
    healthy,
    member_image,
    proxy,
    stamp,
)
from bench.harness.measured_operator import InCluster  # noqa: E402
from bench.harness.report import command, finish, fmt, load1, median, parse_args, trials_row  # noqa: E402
from bench.harness.static_etcd import (  # noqa: E402
    create_static,
    delete_static,
    initial_cluster,
    member_fqdn,
    static_objects,
)
from etcd_runbook_operator.kube import ApiException, Kube  # noqa: E402
from testbed.cluster import K8sCluster, cluster_up, port_forward, wait_for  # noqa: E402
from testbed.object_store import credentials_secret, in_cluster_store  # noqa: E402
from testbed.operator_incluster import DEPLOYMENT, NAMESPACE  # noqa: E402

HEADING = "## Restore: EtcdRestore against etcdutl restore and a static start"
VERSION = "3.6.16"
SIZE = 3
BUSYBOX = "local/busybox:1"
BUMP = 1_000_000_000
# The watcher's line at the end of each playbook run.
RUN_END = re.compile(
    r"^(?P<time>\S+ \S+) INFO etcd_runbook_operator\.reconcile: (?P<kind>\w+)"
    r" (?P<object>(?P<name>\S+)): (?P<end>successful|failed|stopped) in (?P<seconds>[\d.]+)s"
)
POLL = 0.5


def storage_gi(size_mb: int) -> int:
    """Volume whose quota ((size - 384Mi) / 2, the CRD's rule) holds the db with a quarter
    to spare (the fill overshoots a little; the restored db is as large)."""
    return max(1, math.ceil((2 * size_mb * 1.25 + 384) / 1024))


def cluster_spec(size_mb: int) -> dict[str, Any]:
    return {"size": SIZE, "version": VERSION, "storage": {"size": f"{storage_gi(size_mb)}Gi"}}


def secret_data(kube: Kube, ns: str, name: str) -> dict[str, bytes]:
    data = kube.get(f"/api/v1/namespaces/{ns}/secrets/{name}")["data"]
    return {k: base64.b64decode(v) for k, v in data.items()}


def fill_through(
    port: int, tls: dict[str, bytes], target_bytes: int, value_bytes: int, time_limit: float
) -> tuple[int, int]:
    """Distinct keys of random values, `in_flight` puts at a time over one TLS channel, until
    etcd's db reaches target_bytes or the time limit passes; (db size, keys put)."""
    import grpc
    from etcd3aio._protobuf import KVStub, MaintenanceStub, PutRequest, StatusRequest

    creds = grpc.ssl_channel_credentials(
        root_certificates=tls["ca.crt"],
        private_key=tls["tls.key"],
        certificate_chain=tls["tls.crt"],
    )
    value = os.urandom(value_bytes + 1024)
    deadline = time.monotonic() + time_limit
    in_flight = 8
    with grpc.secure_channel(
        f"127.0.0.1:{port}", creds, options=[("grpc.max_send_message_length", 8 << 20)]
    ) as channel:
        kv, maintenance = KVStub(channel), MaintenanceStub(channel)
        index = 0
        while True:
            batch = []
            for _ in range(in_flight * 4):
                # A different window of the random bytes per key: no two values alike.
                offset = index % 1021
                request = PutRequest(
                    key=b"bench/%08d" % index, value=value[offset : offset + value_bytes]
                )
                batch.append(kv.Put.future(request, timeout=120))
                index += 1
                if len(batch) >= in_flight:
                    batch.pop(0).result()
            for future in batch:
                future.result()
            size = int(maintenance.Status(StatusRequest(), timeout=30).dbSize)
            if size >= target_bytes or time.monotonic() > deadline:
                return size, index


def db_size(kube: Kube, ns: str, pod: str, port: int) -> int:
    """etcd_mvcc_db_total_size_in_bytes from a member's metrics (through the pod proxy)."""
    for line in proxy(kube, ns, pod, port, "metrics").splitlines():
        if line.startswith("etcd_mvcc_db_total_size_in_bytes "):
            return int(float(line.split()[1]))
    raise RuntimeError(f"{pod}: no etcd_mvcc_db_total_size_in_bytes")


def container_times(pod: dict[str, Any], since: float) -> dict[str, list[float]]:
    """[start, end] (s after `since`) of each terminated init and main container."""
    status = pod.get("status", {})
    out: dict[str, list[float]] = {}
    for container in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        state = container.get("state", {}).get("terminated") or container.get("lastState", {}).get(
            "terminated"
        )
        running = container.get("state", {}).get("running")
        if state and state.get("startedAt") and state.get("finishedAt"):
            out[container["name"]] = [
                stamp(state["startedAt"]) - since,
                stamp(state["finishedAt"]) - since,
            ]
        elif running and running.get("startedAt"):
            out[container["name"]] = [stamp(running["startedAt"]) - since]
    return out


# --- the baseline: etcd's own restore, by hand ------------------------------------------------
BASE_LABEL = "bench.etcd.runbook.io/restore-baseline"


def baseline_objects(
    ns: str, name: str, image: str, url: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The static cluster of bench/harness/static_etcd.py, each member's data first written by
    two init steps: busybox wget of the object into an emptyDir, then `etcdutl snapshot
    restore` with the flags the operator's restore Job gives (a new token, revisions bumped,
    compacted)."""
    service, pods = static_objects(ns, name, image, "etcd-restore-bench", BASE_LABEL)
    locked = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    for pod in pods:
        member = pod["metadata"]["name"]
        restore = [
            "/usr/local/bin/etcdutl",
            "snapshot",
            "restore",
            "/snapshot/snapshot.db",
            "--data-dir=/var/lib/etcd/data",
            f"--name={member}",
            f"--initial-cluster={initial_cluster(ns, name)}",
            f"--initial-advertise-peer-urls=http://{member_fqdn(ns, name, member)}:2380",
            f"--initial-cluster-token={name}",
            f"--bump-revision={BUMP}",
            "--mark-compacted",
        ]
        spec = pod["spec"]
        # The restored database is larger than etcd's default 2 GiB quota allows room for.
        spec["containers"][0]["args"].append("--quota-backend-bytes=8589934592")
        spec["initContainers"] = [
            {
                "name": "fetch",
                "image": BUSYBOX,
                "imagePullPolicy": "IfNotPresent",
                "command": ["wget", "-q", "-O", "/snapshot/snapshot.db", url],
                "securityContext": locked,
                "volumeMounts": [{"name": "snapshot", "mountPath": "/snapshot"}],
            },
            {
                "name": "restore",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": restore,
                "securityContext": locked,
                "volumeMounts": [
                    {"name": "snapshot", "mountPath": "/snapshot", "readOnly": True},
                    {"name": "data", "mountPath": "/var/lib/etcd"},
                ],
            },
        ]
        spec["volumes"].append({"name": "snapshot", "emptyDir": {}})
    return service, pods


class Run:
    def __init__(self, k8s: K8sCluster, ns: str, args: argparse.Namespace) -> None:
        self.k8s = k8s
        self.kube = admin_kube(k8s)
        self.ns = ns
        self.args = args

    def path(self, kind: str, name: str = "") -> str:
        group = kind in ("etcdclusters", "etcdbackups", "etcdrestores")
        base = (
            f"{GROUP_PATH}/namespaces/{self.ns}/{kind}"
            if group
            else f"/api/v1/namespaces/{self.ns}/{kind}"
        )
        return base + (f"/{name}" if name else "")

    def labelled(self, kind: str, selector: str) -> list[dict[str, Any]]:
        return list(self.kube.get(self.path(kind), {"labelSelector": selector})["items"])

    def image(self) -> str:
        """The image the operator's members run, from a dry run."""
        return member_image(
            self.kube,
            self.path("etcdclusters"),
            etcd_cluster("image-probe", **cluster_spec(self.args.size_mb)),
        )

    # --- setup -------------------------------------------------------------------------------
    def origin(self, name: str) -> dict[str, Any]:
        began = time.monotonic()
        self.kube.create(
            self.path("etcdclusters"), etcd_cluster(name, **cluster_spec(self.args.size_mb))
        )
        wait_for(
            lambda: available(self.kube.get(self.path("etcdclusters", name)), SIZE),
            900,
            2,
            f"{name} Available",
        )
        created = time.monotonic() - began
        client = self.labelled("secrets", f"etcd.runbook.io/cluster={name},etcd.runbook.io/tls")
        client = [s for s in client if s["metadata"]["labels"]["etcd.runbook.io/tls"] == "client"]
        tls = secret_data(self.kube, self.ns, client[0]["metadata"]["name"])
        began = time.monotonic()
        with port_forward(self.k8s, self.ns, f"pod/{name}-0", 2379) as port:
            size, keys = fill_through(
                port,
                tls,
                self.args.size_mb * 1024**2,
                self.args.value_kb * 1000,
                self.args.fill_seconds,
            )
        filled = time.monotonic() - began
        print(
            f"{name}: Available in {created:.0f} s, filled to {size / 1e6:.0f} MB "
            f"({keys} keys) in {filled:.0f} s",
            flush=True,
        )
        return {"db_size": size, "keys": keys, "fill_seconds": filled, "create_seconds": created}

    def backup(self, name: str, cluster: str, endpoint: str, bucket: str) -> dict[str, Any]:
        began = time.monotonic()
        s3 = {"endpoint": endpoint, "bucket": bucket, "prefix": "bench", "credentialsSecret": "s3"}
        self.kube.create(
            self.path("etcdbackups"),
            {
                "apiVersion": "etcd.runbook.io/v1alpha1",
                "kind": "EtcdBackup",
                "metadata": {"name": name},
                "spec": {"clusterName": cluster, "destination": {"s3": s3}},
            },
        )

        def done() -> dict[str, Any]:
            obj = self.kube.get(self.path("etcdbackups", name))
            phase = obj.get("status", {}).get("phase")
            if phase == "Failed":
                raise SystemExit(f"EtcdBackup failed: {json.dumps(obj['status'])}")
            return obj if phase == "Succeeded" else {}

        obj = wait_for(done, 1800, 2, f"EtcdBackup {name} Succeeded")
        last = dict(obj["status"]["lastSnapshot"])
        last["seconds"] = time.monotonic() - began
        print(f"backup: {json.dumps(last)}", flush=True)
        return last

    def delete_cluster(self, name: str) -> None:
        with contextlib.suppress(ApiException):
            self.kube.delete(self.path("etcdclusters", name))
        wait_for(lambda: gone(self.kube, self.path("etcdclusters", name)), 600, 1, f"{name} gone")
        delete_claims(self.kube, self.ns, name, 600)

    # --- baseline ----------------------------------------------------------------------------
    def baseline_trial(self, name: str, image: str, url: str) -> dict[str, Any]:
        service, pods = baseline_objects(self.ns, name, image, url)
        members = [p["metadata"]["name"] for p in pods]
        load = load1()
        wall = time.time()
        started = time.monotonic()
        create_static(self.kube, self.ns, service, pods)
        member_healthy: dict[str, float] = {}
        deadline = started + self.args.timeout
        while len(member_healthy) < SIZE:
            for member in members:
                if member not in member_healthy and healthy(self.kube, self.ns, member, 2379):
                    member_healthy[member] = time.monotonic() - started
            if time.monotonic() > deadline:
                raise TimeoutError(f"baseline {name}: healthy {member_healthy} after the timeout")
            if len(member_healthy) < SIZE:
                self.fail_if_broken(members)
                time.sleep(POLL)
        seconds = time.monotonic() - started
        sizes = [db_size(self.kube, self.ns, m, 2381) for m in members]
        containers = {
            m: container_times(self.kube.get(self.path("pods", m)), wall) for m in members
        }
        delete_static(self.kube, self.ns, name, members)
        return {
            "healthy": seconds,
            "members": sorted(member_healthy.values()),
            "load": load,
            "containers": containers,
            "db_sizes": sizes,
        }

    def fail_if_broken(self, members: list[str]) -> None:
        """A failed init container restarts forever: stop at once, saying which."""
        for member in members:
            with contextlib.suppress(ApiException):
                pod = self.kube.get(self.path("pods", member))
                for c in pod.get("status", {}).get("initContainerStatuses") or []:
                    term = c.get("lastState", {}).get("terminated") or {}
                    if term.get("exitCode"):
                        raise RuntimeError(f"{member}: init {c['name']} failed: {term}")

    # --- operator ----------------------------------------------------------------------------
    def operator_trial(self, restore: str, cluster: str, backup: str) -> dict[str, Any]:
        members = [f"{cluster}-{i}" for i in range(SIZE)]
        body = {
            "apiVersion": "etcd.runbook.io/v1alpha1",
            "kind": "EtcdRestore",
            "metadata": {"name": restore},
            "spec": {
                "source": {"backupName": backup},
                "cluster": {"name": cluster, "spec": cluster_spec(self.args.size_mb)},
            },
        }
        load = load1()
        wall = time.time()
        started = time.monotonic()
        self.kube.create(self.path("etcdrestores"), body)
        phases: dict[str, float] = {}
        member_healthy: dict[str, float] = {}
        deadline = started + self.args.timeout
        avail = 0.0
        ready_at_succeeded = -1
        while "Succeeded" not in phases or not avail:
            now = time.monotonic() - started
            if time.monotonic() > deadline:
                raise TimeoutError(f"{restore}: phases {phases}, available {avail}")
            try:
                obj = self.kube.get(self.path("etcdrestores", restore))
            except ApiException as exc:
                print(f"reading {restore}: {exc.status}", flush=True)
                obj = {}
            phase = obj.get("status", {}).get("phase")
            if phase == "Succeeded" and phase not in phases:
                # How far the new cluster was when its restore said it was done.
                with contextlib.suppress(ApiException):
                    seen = self.kube.get(self.path("etcdclusters", cluster)).get("status", {})
                    ready_at_succeeded = int(seen.get("readyMembers") or 0)
            if phase:
                phases.setdefault(phase, now)
            if phase == "Failed":
                raise RuntimeError(f"{restore} failed: {json.dumps(obj['status'], indent=1)}")
            for member in members:
                if member not in member_healthy and healthy(self.kube, self.ns, member, 2381):
                    member_healthy[member] = time.monotonic() - started
            if not avail:
                try:
                    if available(self.kube.get(self.path("etcdclusters", cluster)), SIZE):
                        avail = time.monotonic() - started
                except ApiException:
                    pass
            if "Succeeded" not in phases or not avail:
                time.sleep(POLL)
        job_pods = self.labelled("pods", f"etcd.runbook.io/restore={restore}")
        job: dict[str, Any] = {}
        if job_pods:
            pod = job_pods[0]
            job = {
                "created": stamp(pod["metadata"]["creationTimestamp"]) - wall,
                **container_times(pod, wall),
            }
        cluster_pods = self.labelled("pods", f"etcd.runbook.io/cluster={cluster}")
        images = sorted({p["spec"]["containers"][0]["image"] for p in cluster_pods})
        sizes = [db_size(self.kube, self.ns, m, 2381) for m in members]
        status = self.kube.get(self.path("etcdrestores", restore)).get("status", {})
        return {
            "available": avail,
            "phases": phases,
            "ready_at_succeeded": ready_at_succeeded,
            "members": sorted(member_healthy.values()),
            "load": load,
            "job": job,
            "images": images,
            "db_sizes": sizes,
            "snapshot": status.get("snapshot", {}),
            "wall": wall,
        }

    def operator_runs(
        self, since: float, until: float, names: dict[str, str]
    ) -> dict[str, list[list[Any]]]:
        """The in-cluster operator's playbook runs of these objects that started between two
        wall-clock times, from its log: [start (s after `since`), seconds, how it ended]."""
        stamp_since = datetime.datetime.fromtimestamp(since - 5, datetime.UTC)
        log = self.k8s.kubectl(
            "-n",
            NAMESPACE,
            "logs",
            f"deployment/{DEPLOYMENT}",
            f"--since-time={stamp_since.strftime('%Y-%m-%dT%H:%M:%SZ')}",
            check=False,
            timeout=60,
        ).stdout
        runs: dict[str, list[list[Any]]] = {kind: [] for kind in names}
        for line in log.splitlines():
            match = RUN_END.match(line)
            if not match or names.get(match["kind"]) != match["name"].split("/")[-1]:
                continue
            if match["object"].split("/")[0] != self.ns:
                continue
            end = (
                datetime.datetime.strptime(match["time"], "%Y-%m-%d %H:%M:%S,%f")
                .replace(tzinfo=datetime.UTC)
                .timestamp()
            )
            start = end - float(match["seconds"])
            if since - 1 <= start <= until:
                runs[match["kind"]].append([start - since, float(match["seconds"]), match["end"]])
        return runs

    def operator_delete(self, restore: str, cluster: str) -> None:
        with contextlib.suppress(ApiException):
            self.kube.delete(self.path("etcdrestores", restore))
        wait_for(
            lambda: gone(self.kube, self.path("etcdrestores", restore)), 300, 1, f"{restore} gone"
        )
        self.delete_cluster(cluster)
        wait_for(
            lambda: not self.labelled("pods", f"etcd.runbook.io/restore={restore}"),
            300,
            1,
            f"{restore}'s Job Pod gone",
        )


def run(args: argparse.Namespace) -> dict[str, Any]:
    k8s = cluster_up()
    store = in_cluster_store(k8s)
    incluster = InCluster(k8s, args.ref)
    commit = ""
    if args.ref != "worktree":
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", args.ref],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    operator_image = incluster.deploy()
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    bucket = f"bench-restore-{uuid.uuid4().hex[:8]}"
    k8s.kubectl("create", "namespace", ns)
    print(f"namespace {ns}, bucket {bucket}, operator image {operator_image}", flush=True)
    credentials_secret(k8s, ns, "s3", store.access_key, store.secret_key)
    report: dict[str, Any] = {
        "trials": args.trials,
        "ns": ns,
        "size_mb": args.size_mb,
        "value_kb": args.value_kb,
        "operator_image": operator_image,
        "operator_commit": commit or "the working tree",
        "load_start": load1(),
        "storage": f"{storage_gi(args.size_mb)}Gi",
    }
    began = time.monotonic()
    r = Run(k8s, ns, args)
    try:
        with store.port_forward() as forwarded:
            store.client(forwarded).make_bucket(bucket)
        image = r.image()
        report["image"] = image
        report["origin"] = r.origin("origin")
        last = r.backup("origin-backup", "origin", store.endpoint, bucket)
        report["backup"] = last
        r.delete_cluster("origin")
        key = last["location"].removeprefix(f"s3://{bucket}/")
        # Signed for the in-cluster address; no request leaves this process to sign it.
        url = store.client(store.endpoint).presigned_get_object(
            bucket, key, expires=datetime.timedelta(hours=6)
        )
        baselines: list[dict[str, Any]] = []
        operators: list[dict[str, Any]] = []
        for i in range(args.trials):
            baselines.append(r.baseline_trial(f"plain-{i}", image, url))
            print(f"baseline {i}: {json.dumps(baselines[-1])}", flush=True)
            operators.append(r.operator_trial(f"restore-{i}", f"restored-{i}", "origin-backup"))
            print(f"operator {i}: {json.dumps(operators[-1])}", flush=True)
            if operators[-1]["images"] != [image]:
                raise SystemExit(f"operator Pods run {operators[-1]['images']}, baseline {image}")
            r.operator_delete(f"restore-{i}", f"restored-{i}")
            # After the deletion: a run still going at Available has ended (stopped) by now.
            done = operators[-1]
            done["runs"] = r.operator_runs(
                done["wall"],
                done["wall"] + done["available"],
                {"EtcdRestore": f"restore-{i}", "EtcdCluster": f"restored-{i}"},
            )
        report["baseline"], report["operator"] = baselines, operators
        report["load_end"] = load1()
        report["minutes"] = (time.monotonic() - began) / 60
    finally:
        k8s.kubectl(
            "-n", ns, "delete", "etcdrestore", "--all", "--timeout=300s", check=False, timeout=320
        )
        k8s.kubectl("-n", ns, "delete", "etcd", "--all", "--timeout=600s", check=False, timeout=660)
        k8s.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        with contextlib.suppress(Exception), store.port_forward() as forwarded:
            client = store.client(forwarded)
            for obj in client.list_objects(bucket, recursive=True):
                client.remove_object(bucket, obj.object_name)
            client.remove_bucket(bucket)
        incluster.stop()
    return report


# --- the section --------------------------------------------------------------------------------
def span(times: dict[str, list[float]], name: str) -> float:
    t = times.get(name) or []
    return t[1] - t[0] if len(t) == 2 else float("nan")


def where_the_time_goes(report: dict[str, Any]) -> str:
    lines = []
    for i, o in enumerate(report["operator"]):
        p, job = o["phases"], o["job"]
        phases = ", ".join(f"{k} {v:.1f}" for k, v in sorted(p.items(), key=lambda kv: kv[1]))
        fetch, restore = job.get("fetch") or [], job.get("restore") or []
        parts = [
            f"- trial {i + 1}, Available at {o['available']:.1f} s. Phases first seen at:"
            f" {phases} (the EtcdCluster had {o['ready_at_succeeded']} ready member(s) when"
            " Succeeded was first seen)."
        ]
        if fetch and restore and len(fetch) == 2 and len(restore) == 2:
            parts.append(
                f"The Job's Pod created at {job['created']:.0f}; `fetch` ran {fetch[0]:.0f}"
                f"-{fetch[1]:.0f} ({fetch[1] - fetch[0]:.0f} s: start of ansible-playbook, the"
                f" download, sha256 and etcd's hash), `restore` {restore[0]:.0f}-{restore[1]:.0f}"
                f" ({restore[1] - restore[0]:.0f} s, etcdutl)."
            )
        job_end = restore[1] if len(restore) == 2 else 0.0
        parts.append(
            f"Members' first /health true at {fmt(o['members'])}; from the Job's end to the"
            f" first member healthy {o['members'][0] - job_end:.1f}"
            f" s, to the third {o['members'][-1] - o['members'][0]:.1f} s more (two learners, one"
            f" at a time, each sent the whole database by the leader), then to Available"
            f" {o['available'] - o['members'][-1]:.1f} s."
        )
        for kind, what in (("EtcdRestore", "restore"), ("EtcdCluster", "cluster")):
            runs = o.get("runs", {}).get(kind, [])
            if runs:
                listed = ", ".join(
                    f"{r[0]:.0f} (+{r[1]:.1f}{'' if r[2] == 'successful' else ', ' + r[2]})"
                    for r in runs
                )
                parts.append(
                    f"The {what} playbook ran {len(runs)} times ({sum(r[1] for r in runs):.0f} s"
                    f" in all), starting at (+its length): {listed}."
                )
        lines.append(" ".join(parts))
    for i, b in enumerate(report["baseline"]):
        fetches = [span(c, "fetch") for c in b["containers"].values()]
        restores = [span(c, "restore") for c in b["containers"].values()]
        lines.append(
            f"- baseline trial {i + 1}, healthy at {b['healthy']:.1f} s: each member's `wget`"
            f" {fmt(fetches, 0)} s (three downloads at once), `etcdutl snapshot restore`"
            f" {fmt(restores, 0)} s; members' /health true at {fmt(b['members'])}."
        )
    return "\n".join(lines)


def section(report: dict[str, Any], command: str) -> str:
    base = [b["healthy"] for b in report["baseline"]]
    ops = report["operator"]
    avail = [o["available"] for o in ops]
    succeeded = [o["phases"].get("Succeeded", float("nan")) for o in ops]
    op_healthy = [o["members"][-1] for o in ops]
    job_done = [
        (o["job"].get("restore") or [float("nan")] * 2)[-1]
        if len(o["job"].get("restore") or []) == 2
        else float("nan")
        for o in ops
    ]
    ratio = median(avail) / median(base)
    per_trial = [a / b for a, b in zip(avail, base, strict=True)]
    loads = [b["load"] for b in report["baseline"]] + [o["load"] for o in ops]
    origin, backup = report["origin"], report["backup"]
    sizes = sorted({s for b in report["baseline"] + ops for s in b["db_sizes"]})
    rows = "\n".join(
        [
            trials_row("baseline: first POST -> 3 members' /health true", base),
            trials_row(
                "operator: POST -> the restore Job done (data in the first claim)", job_done
            ),
            trials_row("operator: POST -> 3 members' /health true", op_healthy),
            trials_row("operator: POST -> EtcdRestore Succeeded (as first seen)", succeeded),
            trials_row(
                "**operator: POST -> EtcdCluster Available, 3 ready members**", avail, bold=True
            ),
        ]
    )
    return f"""{HEADING}

Command: `{command}` (run from the repository root; `make bench` runs every benchmark).

Everything runs on the local Kubernetes (`hack/cluster`, one node) and its S3 store
(`hack/object-store`: versitygw, posix backend, namespace object-store). The operator is
deployed in the cluster, as users run it: config/default and the image
`etcd-runbook-operator:dev` (content {report["operator_image"]}), both built from commit
{report["operator_commit"]}. It has to be: the restore Job's fetch step runs the operator's
image, which the in-cluster operator knows from its own Pod (a host process would need
`ETCD_RUNBOOK_IMAGE`).

Setup, outside the clocks: an EtcdCluster of 3 members (etcd {VERSION}, TLS, volumes of
{report["storage"]} so that the backend quota, which follows the volume, holds the database),
filled through a port-forward with {origin["keys"]} keys of {report["value_kb"]} KB random
values to a database of {origin["db_size"] / 1e6:.0f} MB ({origin["fill_seconds"]:.0f} s); an
EtcdBackup of it into the store ({backup.get("size", 0) / 1e6:.0f} MB,
{backup["seconds"]:.0f} s from its POST to Succeeded); then the EtcdCluster and its claims
deleted. Trials alternate (baseline, operator, baseline ...); every restored cluster is
checked to hold a database of the snapshot's size (seen:
{", ".join(f"{s / 1e6:.0f}" for s in sizes)} MB), then deleted with its claims before the next.

- **baseline**, etcd's documented restore done by hand on the same Kubernetes: a headless
  Service and three Pods of `{report["image"]}` (the image of the operator's members). Each Pod
  downloads the same object (busybox `wget` of a presigned URL) into an emptyDir, runs
  `etcdutl snapshot restore` of it (its member name, the full `--initial-cluster`, a new
  token, `--bump-revision {BUMP} --mark-compacted`, as the operator's Job), then starts etcd
  with `--initial-cluster-state new`, **plain http, data in an emptyDir**. Clock: from the
  first POST until all three members answer `/health` true (the API server's pod proxy,
  polled every {POLL} s). `etcdutl` checks etcd's own hash of the snapshot; nothing checks the
  object's sha256.
- **operator**: an EtcdRestore with `backupName` (the EtcdBackup's newest verified snapshot).
  Beyond the baseline's work the operator checks the source and the target; makes the
  EtcdCluster, the first member's claim and a Job that downloads the object **once** and
  checks its sha256 against the backup's record and etcd's hash before restoring it into that
  claim; the cluster runbook then makes TLS material (a CA and three certificates), a claim per
  member, Services and a PodDisruptionBudget, starts the first member on the restored data and
  adds the other two **one at a time as learners**, each sent the whole database by the leader,
  then promoted. The baseline downloads the object three times in parallel and starts all
  three members at once. Clock: from the POST of the EtcdRestore until the EtcdCluster says
  Available=True with 3 ready members for its generation.

Machine: {os.cpu_count()} cores, shared with other work; load average (1 min)
{report["load_start"]:.1f} at the start, {report["load_end"]:.1f} at the end,
{min(loads):.1f} to {max(loads):.1f} at the trials' starts. Whole run
{report["minutes"]:.0f} min, {report["trials"]} trials of each.

| measure | trials (s) | median (s) |
| --- | --- | --- |
{rows}

**Ratio of medians, operator Available / baseline: {ratio:.2f}**; per trial
{fmt(per_trial, 2)}.

Where the time went, in seconds after each trial's first POST: the EtcdRestore's phases as
polled every {POLL} s; the containers' start and end from Pod status (whole seconds); the
playbook runs that started before Available, from the operator's log (start, +length; a run
still going at Available was stopped by the benchmark's deletion). The operator's steps are
in series: the Job's end is seen by the next run of the restore playbook, which releases the
first claim (`Starting`); the next run of the cluster playbook starts the first member on it;
the learners follow one at a time (etcd takes one learner at a time by default). The
EtcdRestore says `Succeeded` once the EtcdCluster is Available with every member ready, seen
by the restore playbook's next run after that.

{where_the_time_goes(report)}
"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/run.py restore", description=__doc__)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--size-mb", type=int, default=1024, help="database size to fill to")
    parser.add_argument("--value-kb", type=int, default=100, help="size of each value")
    parser.add_argument("--fill-seconds", type=float, default=900, help="bound of the fill")
    parser.add_argument("--timeout", type=float, default=1800, help="bound of each trial")
    parser.add_argument(
        "--ref",
        default="HEAD",
        help="git ref the operator (image and config/default) is built from; 'worktree' for"
        " the working tree with its uncommitted changes",
    )
    parser.add_argument("--report", default="", help="also write the raw figures (JSON) here")
    args = parse_args(parser, argv)
    report = run(args)
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=1))
    return finish(report, section, HEADING, command("restore", argv), args.no_docs)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
