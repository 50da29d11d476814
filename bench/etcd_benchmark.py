"""etcd's own `benchmark` tool against an operator-managed cluster and three static etcd Pods, at
rest (issue 25, item 5).

    .venv/bin/python bench/run.py etcd [--rounds 3] [--total 20000] [--clients 50] [--conns 10]
        [--where incluster|host] [--ref HEAD] [--no-docs]

Builds the tool (hack/etcd-benchmark-bin, through the Go module proxy), brings the local
cluster up (hack/cluster up) and deploys the operator as bench/bootstrap.py does (in the cluster
from the committed tree of --ref by default), watching one fresh namespace. In it, side by side:

- operator: an EtcdCluster `size: 3, version: 3.6.16` as the API server defaults it (TLS with
  client certificates, a claim of 1Gi per member, its client Service);
- static: three Pods of the very image the operator's members run, started at once with the
  full --initial-cluster, TLS between members and for clients with client certificates required
  (one CA, one certificate, made here), a claim of 1Gi per member from the same StorageClass,
  the operator's members' resources and tuning flags (auto-compaction, quota) copied from one
  of its Pods, and a ClusterIP Service over the three as the operator's client Service is.

The tool runs on this machine (which shares node 0's network namespace) against each cluster's
client Service cluster IP, with a client certificate, so kube-proxy spreads its connections
over the members of both alike. --rounds times, alternating which cluster goes first, each
workload of fixed count (every run bounded by --timeout): put with one client; put, range
linearizable and range serializable with --clients over --conns. Reported: each run's req/s
and latency p50/p90/p99, their medians over the rounds, and operator / static.

For the chaos run (tests/e2e/test_chaos.py, CHAOS_BENCHMARK=1): `load_during` runs one workload
in a thread while the caller breaks things.

Unless --no-docs, rewrites this benchmark's section of docs/benchmarks.md. The namespace (both
clusters, their claims and Secrets) is deleted at the end.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import contextlib
import json
import os
import re
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.harness.cluster import etcd_cluster, healthy, member_image
from bench.harness.measured_operator import Bench, add_where_arguments, operator_watching
from bench.harness.report import command, finish, load1, median, parse_args, row
from bench.harness.static_etcd import (
    STATIC_LABEL,
    create_static,
    static_objects,
    static_tls_secret,
)
from etcd_runbook_operator.kube import Kube
from testbed.cluster import cluster_up, wait_for
from testbed.host import etcd_bin_dir

REPO = Path(__file__).resolve().parent.parent
HEADING = "## etcd's benchmark tool: operator-managed cluster vs three static Pods"
VERSION = "3.6.16"
SIZE = 3
OPERATOR, STATIC = "op", "static"
RANGE_KEY = "bench-range"
VALUE_SIZE = 256
# The operator's etcd flags that change how a member performs rather than who it is: copied
# onto the static members so both run the same etcd, only started differently.
TUNING_FLAGS = ("--auto-compaction-mode", "--auto-compaction-retention", "--quota-backend-bytes")
PERCENTILES = (50.0, 90.0, 99.0)
SHOWN = {OPERATOR: "operator", STATIC: "static"}


# --- the tool's output -------------------------------------------------------------------------
@dataclass
class Summary:
    """What the tool prints at the end of one run (pkg/report of etcd): seconds and req/s of the
    requests that succeeded, latency percentiles in seconds, errors by message."""

    total: float
    rps: float
    average: float
    fastest: float
    slowest: float
    stddev: float
    percentiles: dict[float, float] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    ok: int = 0

    def ms(self, pct: float) -> float:
        return self.percentiles.get(pct, float("nan")) * 1000


_SECS = r"([0-9.eE+-]+|NaN) secs"
_FIELDS = {
    "total": re.compile(rf"^\s*Total:\s+{_SECS}\.$"),
    "slowest": re.compile(rf"^\s*Slowest:\s+{_SECS}\.$"),
    "fastest": re.compile(rf"^\s*Fastest:\s+{_SECS}\.$"),
    "average": re.compile(rf"^\s*Average:\s+{_SECS}\.$"),
    "stddev": re.compile(rf"^\s*Stddev:\s+{_SECS}\.$"),
    "rps": re.compile(r"^\s*Requests/sec:\s+([0-9.eE+-]+|NaN)$"),
}
_PERCENTILE = re.compile(rf"^\s*([0-9.]+)% in {_SECS}\.$")
_BUCKET = re.compile(r"^\s*[0-9.eE+-]+ \[(\d+)\]\s*\|")
_ERROR = re.compile(r"^\s*\[(\d+)\]\s+(.*)$")


def parse_summary(text: str) -> Summary:
    """The figures of one run from the tool's stdout, printed with or without --precise. The
    tool prints the summary only when some request succeeded and the errors only when some
    failed; a run with neither (no output) is an error here."""
    values: dict[str, float] = {}
    percentiles: dict[float, float] = {}
    errors: dict[str, int] = {}
    ok = 0
    part = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in ("Summary:", "Response time histogram:", "Latency distribution:"):
            part = stripped
            continue
        if stripped == "Error distribution:":
            part = stripped
            continue
        if part == "Summary:":
            for name, pattern in _FIELDS.items():
                match = pattern.match(line)
                if match:
                    values[name] = float(match.group(1))
        elif part == "Response time histogram:":
            match = _BUCKET.match(line)
            if match:
                ok += int(match.group(1))
        elif part == "Latency distribution:":
            match = _PERCENTILE.match(line)
            if match:
                percentiles[float(match.group(1))] = float(match.group(2))
        elif part == "Error distribution:":
            match = _ERROR.match(line)
            if match:
                errors[match.group(2)] = errors.get(match.group(2), 0) + int(match.group(1))
    if not values and not errors:
        raise ValueError(f"no summary in the benchmark tool's output: {text[-500:]!r}")
    missing = [name for name in _FIELDS if name not in values]
    if values and missing:
        raise ValueError(f"the summary lacks {', '.join(missing)}: {text[-500:]!r}")
    nan = float("nan")
    return Summary(
        total=values.get("total", nan),
        rps=values.get("rps", 0.0),
        average=values.get("average", nan),
        fastest=values.get("fastest", nan),
        slowest=values.get("slowest", nan),
        stddev=values.get("stddev", nan),
        percentiles=percentiles,
        errors=errors,
        ok=ok,
    )


# --- running it --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    """One bounded run of the tool: its subcommand and flags, a fixed count of requests."""

    name: str
    args: tuple[str, ...]
    total: int
    clients: int
    conns: int

    def argv(self) -> list[str]:
        return [
            f"--conns={self.conns}",
            f"--clients={self.clients}",
            *self.args,
            f"--total={self.total}",
        ]


def workloads(total: int, clients: int, conns: int) -> list[Workload]:
    """Put alone (one client: latency without queueing), then put, range linearizable and
    range serializable under --clients; values of 256 bytes on 8-byte keys over 100,000 keys
    (etcd's docs' benchmark uses the same key and value sizes)."""
    put = ("put", "--key-size=8", f"--val-size={VALUE_SIZE}", "--key-space-size=100000")
    return [
        Workload("put, 1 client", put, max(total // 10, 100), 1, 1),
        Workload(f"put, {clients} clients", put, total, clients, conns),
        Workload(
            f"range linearizable, {clients} clients",
            ("range", RANGE_KEY, "--consistency=l"),
            total,
            clients,
            conns,
        ),
        Workload(
            f"range serializable, {clients} clients",
            ("range", RANGE_KEY, "--consistency=s"),
            total,
            clients,
            conns,
        ),
    ]


@dataclass(frozen=True)
class Target:
    """A cluster as a client outside it sees it: an address and the client's TLS files."""

    label: str
    endpoint: str  # host:port
    ca: Path
    cert: Path
    key: Path

    def flags(self) -> list[str]:
        # The members' certificates name their DNS names, not the Service's cluster IP this
        # host dials, and the tool has no flag to name the server it expects: the server is
        # not verified (the client still proves itself with its certificate, and the traffic
        # is TLS). It costs nothing per request: connections are made once per run.
        return [
            f"--endpoints={self.endpoint}",
            f"--cacert={self.ca}",
            f"--cert={self.cert}",
            f"--key={self.key}",
            "--insecure-skip-tls-verify",
        ]


def benchmark_bin() -> Path:
    """The tool, built (or found in the cache) by hack/etcd-benchmark-bin."""
    out = subprocess.run(
        ["nice", "-n", "19", str(REPO / "hack" / "etcd-benchmark-bin")],
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    return Path(out.stdout.strip())


def run_workload(tool: Path, target: Target, workload: Workload, timeout: float) -> Summary:
    """One run of the tool, killed after `timeout` s (TimeoutExpired); its summary."""
    proc = subprocess.run(
        [str(tool), *target.flags(), "--precise", *workload.argv()],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"benchmark {workload.name} against {target.label} exited {proc.returncode}:\n"
            f"{proc.stdout[-1000:]}{proc.stderr[-2000:]}"
        )
    return parse_summary(proc.stdout)


@contextlib.contextmanager
def load_during(
    tool: Path, target: Target, workload: Workload, timeout: float
) -> Iterator[concurrent.futures.Future[Summary]]:
    """The chaos run's hook: `workload` runs in a thread while the body breaks things; the
    future gives its summary (errors by message included) once it ends, by itself or at
    `timeout`. The body's exit waits for it."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        yield pool.submit(run_workload, tool, target, workload, timeout)


def write_tls(into: Path, pem: dict[str, bytes]) -> tuple[Path, Path, Path]:
    """ca.crt, tls.crt and tls.key of a Secret's data into files only this user reads."""
    into.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in ("ca.crt", "tls.crt", "tls.key"):
        path = into / name
        path.write_bytes(pem[name])
        path.chmod(0o600)
        paths.append(path)
    return paths[0], paths[1], paths[2]


def secret_pem(kube: Kube, ns: str, secret: str) -> dict[str, bytes]:
    data = kube.get(f"/api/v1/namespaces/{ns}/secrets/{secret}")["data"]
    return {k: base64.b64decode(v) for k, v in data.items()}


def service_ip(kube: Kube, ns: str, service: str) -> str:
    return str(kube.get(f"/api/v1/namespaces/{ns}/services/{service}")["spec"]["clusterIP"])


def etcdcluster_target(kube: Kube, ns: str, name: str, into: Path) -> Target:
    """An EtcdCluster's client Service and the client certificate the operator issued."""
    ca, cert, key = write_tls(into / name, secret_pem(kube, ns, f"{name}-client-tls"))
    return Target(f"{ns}/{name}", f"{service_ip(kube, ns, f'{name}-client')}:2379", ca, cert, key)


def etcdctl_put(target: Target, key: str, value: str, timeout: float = 20) -> str:
    """Through the target's Service, as the tool goes (a put also proves it reachable);
    etcdctl's answer, OK."""
    done = subprocess.run(
        [
            str(etcd_bin_dir(VERSION) / "etcdctl"),
            *(f.replace("--endpoints=", "--endpoints=https://") for f in target.flags()),
            f"--command-timeout={timeout}s",
            "put",
            key,
            value,
        ],
        capture_output=True,
        text=True,
        timeout=timeout + 10,
        check=True,
    )
    return done.stdout.strip()


# --- the static baseline -----------------------------------------------------------------------
def static_claims(name: str, model: dict[str, Any]) -> list[dict[str, Any]]:
    """A claim per member asking what the operator's claim `model` asks: size, StorageClass,
    access modes."""
    spec = model["spec"]
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"{name}-{i}-data", "labels": {STATIC_LABEL: name}},
            "spec": {
                "accessModes": spec["accessModes"],
                "resources": {"requests": {"storage": spec["resources"]["requests"]["storage"]}},
                **(
                    {"storageClassName": spec["storageClassName"]}
                    if spec.get("storageClassName")
                    else {}
                ),
            },
        }
        for i in range(SIZE)
    ]


def client_service(name: str, selector: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{name}-client", "labels": {STATIC_LABEL: name}},
        "spec": {
            "selector": selector,
            "ports": [{"name": "client", "port": 2379, "targetPort": 2379, "protocol": "TCP"}],
        },
    }


def like_operator(pods: list[dict[str, Any]], model: dict[str, Any]) -> list[str]:
    """The operator member `model`'s resources and tuning flags onto the static `pods`; the
    flags copied."""
    container = model["spec"]["containers"][0]
    flags = [a for a in container.get("args", []) if a.split("=", 1)[0] in TUNING_FLAGS]
    for pod in pods:
        static = pod["spec"]["containers"][0]
        static["args"] += flags
        if container.get("resources"):
            static["resources"] = container["resources"]
    return flags


# --- the run -----------------------------------------------------------------------------------
class Run:
    def __init__(self, bench: Bench, workdir: Path, timeout: float) -> None:
        self.bench = bench
        self.kube = bench.kube
        self.ns = bench.ns
        self.workdir = workdir
        self.timeout = timeout

    def pods(self, selector: str) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{self.ns}/pods"
        return list(self.kube.get(path, {"labelSelector": selector})["items"])

    def operator_cluster(self) -> tuple[Target, dict[str, Any]]:
        """The EtcdCluster, Available; its target and one of its member Pods."""
        self.kube.create(self.bench.etcd_path(), etcd_cluster(OPERATOR, size=SIZE, version=VERSION))
        wait_for(lambda: self.bench.available(OPERATOR, SIZE), 900, 1, f"{OPERATOR} Available")
        model = self.pods(f"etcd.runbook.io/cluster={OPERATOR}")[0]
        return etcdcluster_target(self.kube, self.ns, OPERATOR, self.workdir / "tls"), model

    def static_cluster(self, image: str, model: dict[str, Any]) -> tuple[Target, list[str]]:
        """The three static Pods, all healthy, and their client Service; the flags copied."""
        service, pods = static_objects(self.ns, STATIC, image, durable=True)
        flags = like_operator(pods, model)
        core = f"/api/v1/namespaces/{self.ns}"
        secret = static_tls_secret(self.ns, STATIC)
        self.kube.create(f"{core}/secrets", secret)
        claims = static_claims(STATIC, model_claim(self.kube, self.ns))
        create_static(self.kube, self.ns, service, pods, claims)
        self.kube.create(f"{core}/services", client_service(STATIC, service["spec"]["selector"]))
        members = [p["metadata"]["name"] for p in pods]
        wait_for(
            lambda: all(healthy(self.kube, self.ns, m, 2381) for m in members),
            600,
            1,
            f"{STATIC}: {SIZE} members healthy",
        )
        pem = {k: v.encode() for k, v in secret["stringData"].items()}
        ca, cert, key = write_tls(self.workdir / "tls" / STATIC, pem)
        address = f"{service_ip(self.kube, self.ns, f'{STATIC}-client')}:2379"
        return Target(f"{self.ns}/{STATIC}", address, ca, cert, key), flags

    def prepare(self, target: Target) -> None:
        """The key the range workloads read, written through the target's Service (which
        also waits until the Service forwards to its members)."""
        wait_for(
            lambda: etcdctl_put(target, RANGE_KEY, "v" * VALUE_SIZE) == "OK",
            120,
            2,
            f"a put through {target.label}'s Service",
        )

    def rounds(
        self, tool: Path, targets: dict[str, Target], loads: list[Workload], count: int
    ) -> list[dict[str, Any]]:
        results = []
        for i in range(count):
            order = list(targets) if i % 2 == 0 else list(reversed(targets))
            for kind in order:
                for load in loads:
                    started = time.monotonic()
                    figures = run_workload(tool, targets[kind], load, self.timeout)
                    results.append(
                        {
                            "round": i,
                            "cluster": kind,
                            "workload": load.name,
                            "load1": load1(),
                            "seconds": time.monotonic() - started,
                            **asdict(figures),
                        }
                    )
                    print(
                        f"round {i} {kind} {load.name}: {figures.rps:.0f} req/s, p50/p90/p99 "
                        + "/".join(f"{figures.ms(p):.1f}" for p in PERCENTILES)
                        + f" ms, {sum(figures.errors.values())} errors",
                        flush=True,
                    )
        return results


def model_claim(kube: Kube, ns: str) -> dict[str, Any]:
    """One of the operator's member claims: the static claims ask the same."""
    claims = kube.get(
        f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
        {"labelSelector": f"etcd.runbook.io/cluster={OPERATOR}"},
    )["items"]
    return dict(claims[0])


def run(args: argparse.Namespace) -> dict[str, Any]:
    tool = benchmark_bin()
    tool_version = json.loads((tool.parent / ".complete").read_text())["module_version"]
    k8s = cluster_up()
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    workdir = Path(tempfile.mkdtemp(prefix="bench-etcd-"))
    print(f"namespace {ns}, work directory {workdir}, tool {tool}", flush=True)
    loads = workloads(args.total, args.clients, args.conns)
    report: dict[str, Any] = {
        "ns": ns,
        "where": args.where,
        "tool_version": tool_version,
        "rounds": args.rounds,
        "workloads": [asdict(w) for w in loads],
        "load_start": load1(),
        "cores": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
        # Before the operator's image is built from it: others may commit during the run.
        "commit": subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", args.ref],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip(),
    }
    began = time.monotonic()
    host_args = ["--watches-file", str(REPO / "watches.yaml"), "--reconcile-period", "60"]
    with operator_watching(k8s, ns, args.where, args.ref, workdir, host_args) as bench:
        report["operator_image"] = bench.image
        r = Run(bench, workdir, args.timeout)
        op_target, model = r.operator_cluster()
        image = member_image(
            bench.kube, bench.etcd_path(), etcd_cluster("probe", size=SIZE, version=VERSION)
        )
        if model["spec"]["containers"][0]["image"] != image:
            raise SystemExit(f"operator Pods run {model['spec']['containers'][0]['image']}")
        static_target, flags = r.static_cluster(image, model)
        report.update(
            image=image,
            copied_flags=flags,
            resources=model["spec"]["containers"][0].get("resources") or {},
            operator_args=model["spec"]["containers"][0].get("args", []),
        )
        targets = {OPERATOR: op_target, STATIC: static_target}
        for target in targets.values():
            r.prepare(target)
        report["results"] = r.rounds(tool, targets, loads, args.rounds)
    report["load_end"] = load1()
    report["minutes"] = (time.monotonic() - began) / 60
    return report


# --- the section -------------------------------------------------------------------------------
def medians(results: list[dict[str, Any]], cluster: str, workload: str) -> dict[str, float]:
    """Median over the rounds of req/s and of each percentile (ms); errors summed."""
    runs = [x for x in results if x["cluster"] == cluster and x["workload"] == workload]
    out = {"rps": median([x["rps"] for x in runs])}
    for pct in PERCENTILES:
        # JSON round trips turn the float keys into strings.
        out[f"p{pct:g}"] = median(
            [1000 * float({float(k): v for k, v in x["percentiles"].items()}[pct]) for x in runs]
        )
    out["errors"] = sum(sum(x["errors"].values()) for x in runs)
    return out


def spread(results: list[dict[str, Any]], cluster: str, workload: str) -> float:
    """How far apart one cluster's rounds of one workload are: fastest / slowest req/s."""
    rps = [x["rps"] for x in results if x["cluster"] == cluster and x["workload"] == workload]
    return max(rps) / min(rps)


def section(report: dict[str, Any], command_line: str) -> str:
    results = report["results"]

    def lat(m: dict[str, float]) -> str:
        return " / ".join(f"{m[f'p{p:g}']:.1f}" for p in PERCENTILES)

    figures = [
        row(
            "workload",
            "static req/s",
            "operator req/s",
            "**req/s operator / static**",
            "static p50 / p90 / p99 ms",
            "operator p50 / p90 / p99 ms",
            "latency operator / static",
            "errors static / operator",
        ),
        row(*["---"] * 8),
    ]
    rounds = [row("workload", "cluster", "req/s, each round"), row(*["---"] * 3)]
    beyond: list[str] = []
    for w in report["workloads"]:
        name = w["name"]
        op, st = medians(results, OPERATOR, name), medians(results, STATIC, name)
        conns = f"{w['conns']} conn" + ("s" if w["conns"] > 1 else "")
        figures.append(
            row(
                f"{name} ({w['total']:,} requests, {conns})",
                f"{st['rps']:.0f}",
                f"{op['rps']:.0f}",
                f"**{op['rps'] / st['rps']:.2f}**",
                lat(st),
                lat(op),
                " / ".join(f"{op[f'p{p:g}'] / st[f'p{p:g}']:.2f}" for p in PERCENTILES),
                f"{int(st['errors'])} / {int(op['errors'])}",
            )
        )
        for cluster in (STATIC, OPERATOR):
            values = [
                f"{x['rps']:.0f}"
                for x in results
                if x["cluster"] == cluster and x["workload"] == name
            ]
            rounds.append(row(name, SHOWN[cluster], ", ".join(values)))
        noise = max(spread(results, STATIC, name), spread(results, OPERATOR, name))
        if not 1 / noise <= op["rps"] / st["rps"] <= noise:
            beyond.append(f"{name} ({op['rps'] / st['rps']:.2f}, rounds apart by {noise:.2f}x)")
    loads = [x["load1"] for x in results]
    flags = ", ".join(f"`{f}`" for f in report["copied_flags"]) or "none"
    resources = (
        f"resources `{json.dumps(report['resources'])}`"
        if report["resources"]
        else "no resources (the operator sets none unless spec.pod.resources asks)"
    )
    figures_table, rounds_table = "\n".join(figures), "\n".join(rounds)
    when = (
        f"{report['commit']} on {report['date']}; {report['rounds']} rounds, whole run"
        f" {report['minutes']:.0f} min"
    )
    verdict = (
        "Throughput ratios beyond the spread of the clusters' own rounds (fastest / slowest "
        "round of the workload, the larger of the two): " + "; ".join(beyond) + "."
        if beyond
        else "Every throughput ratio lies within the spread of the clusters' own rounds "
        "(fastest / slowest round of the workload, the larger of the two): at rest, this run "
        "measures no difference between the operator's cluster and three static Pods."
    )
    return f"""{HEADING}

Command: `{command_line}` (from the repository root, wrapped in `flock
/tmp/ero-cluster-suite.lock` so that no test suite used the local Kubernetes meanwhile), at
{when}. The tool is etcd's own `benchmark` (`go.etcd.io/etcd/v3/tools/benchmark`
{report["tool_version"]}, built by `hack/etcd-benchmark-bin` through the Go module proxy,
which serves etcd's root module, where the tool lives, at no later 3.6 tag), run on this
machine (node 0's network namespace) against each cluster's client Service cluster IP, with
`--precise`.

Both clusters ran at the same time in one namespace of the local Kubernetes (one node), every
member from `{report["image"]}`:

- **operator**: an EtcdCluster `size: 3, version: {VERSION}`, the operator deployed in the
  cluster (image {report["operator_image"] or "a host process"}, built from the committed
  tree); TLS between members and for clients, client certificates required, a claim per
  member, the operator's client Service.
- **static** (the baseline): three Pods started at once with the full `--initial-cluster`, TLS
  between members and for clients, client certificates required (one CA and one certificate
  the benchmark makes), a claim per member of the same size and StorageClass, a ClusterIP
  Service over the three. Copied from one of the operator's member Pods:
  {resources}; and the flags that change how etcd performs:
  {flags}. The other flags differ only in names and file paths.
- the client: TLS with each cluster's client certificate; the server's certificate is **not
  verified** for either (`--insecure-skip-tls-verify`: the members' certificates name their DNS
  names, not the Service's cluster IP, and the tool cannot be told which name to expect). It
  costs nothing per request: a run makes its connections once. kube-proxy spreads the
  connections over the three members; a put that reaches a follower is forwarded to the leader.
- workloads: `put --key-size=8 --val-size={VALUE_SIZE} --key-space-size=100000`, and `range
  {RANGE_KEY}` (one key, {VALUE_SIZE} bytes) with `--consistency=l` and `--consistency=s`; each
  run a fixed count, bounded in time; in each round both clusters, the one that goes first
  alternating.

Machine: {report["cores"]} cores, which the local Kubernetes (API server, kubelet, both clusters,
the operator) and the tool share, and not otherwise idle: load average (1 min)
{report["load_start"]:.1f} at the start, {min(loads):.1f} to {max(loads):.1f} after each run.
Medians over the rounds:

{figures_table}

Each round's req/s:

{rounds_table}

{verdict}

The same load during the chaos run: the next section (`CHAOS_BENCHMARK=1`,
tests/e2e/test_chaos.py, through `load_during` here).
"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/run.py etcd", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--total", type=int, default=20000, help="requests of each loaded run")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--conns", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=300, help="seconds, each run")
    add_where_arguments(parser)
    args = parse_args(parser, argv)
    return finish(run(args), section, HEADING, command("etcd", argv), args.no_docs)
