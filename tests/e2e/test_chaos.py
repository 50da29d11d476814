"""A seeded chaos run through the operator on the local Kubernetes: four clients put and get
through the cluster's client Service while, one at a time, a member's Pod is deleted or
killed, the leader's Pod is killed, a member's data is destroyed, a member is cut off from its
peers, or the operator is killed; in runs of two minutes or more the cluster is also scaled
between three and five members, and upgraded once from etcd 3.5 to 3.6 (its snapshot first,
to an EtcdBackup's claim), and the operator may be killed while a scale or the upgrade goes
on. The clients' history must be
linearizable (hack/lincheck, tests/chaos/history.py), a watcher must see every acknowledged put
in order, every key must read at the end, and the operator must have the cluster back at its
size under the cluster ID it started with.

The clients talk to the Service's cluster IP from this machine (node 0 shares its network
namespace, and kube-proxy's rules there lead a Service address to a Ready member), with the
cluster's client certificate and the server's name checked: what a client in the cluster
sees, without the 0.3-0.5 s a `kubectl exec` costs per operation.

CHAOS_SEED replays a run (each prints its seed); CHAOS_SECONDS sets how long faults are made
(default 40; `make chaos` runs longer). CHAOS_BENCHMARK=1 (as `make chaos` sets it) also runs
etcd's own benchmark tool through the client Service, rate-limited puts beside the clients:
once at rest before the faults, then for as long as they go on, and prints both summaries."""

from __future__ import annotations

import base64
import contextlib
import functools
import itertools
import json
import math
import os
import random
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from etcd3aio._protobuf import KVStub, PutRequest, RangeRequest, WatchStub

from bench.etcd_benchmark import (
    Summary,
    Target,
    Workload,
    benchmark_bin,
    load_during,
    run_workload,
    write_tls,
)
from etcd_runbook.names import LABEL_VOTER
from testbed.cluster import K8sCluster
from tests.chaos.history import History, check, run_client
from tests.chaos.watch import Watcher, problems
from tests.e2e.helpers import (
    Operator,
    apply,
    etcd_cluster,
    get,
    member_list,
    pods,
    said,
    wait_available,
)
from tests.e2e.test_etcdbackup import backup_claim, volume_backup

SECONDS = float(os.environ.get("CHAOS_SECONDS") or 40)
BENCHMARK = os.environ.get("CHAOS_BENCHMARK") == "1"
# The tool's puts per second: a load beside the four clients, not one that saturates the
# cluster (the clients' history, not the tool's, is what must stay linearizable).
BENCH_RATE = 100
BENCH_AT_REST = 2000
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.chaos,
    pytest.mark.operator_exclusive,
    pytest.mark.timeout(int(SECONDS) + 900),
]

KEYS = [f"chaos/{i}" for i in range(8)]
CLIENTS = 4
OP_TIMEOUT = 5.0
# Every rule this test adds carries this comment, so a run that died leaves none behind
# that the next run does not remove.
RULE_TAG = "ero-chaos-partition"
SIZE = 3
# A scale fault moves the cluster between its size and this one, through learners. Only in
# runs this long or longer (`make chaos`): in two of three 300 s runs a learner added late could
# not publish itself to the cluster for minutes (etcd: "failed to publish local member ...
# too many requests", its applied index over 5000 behind its committed one), a liveness
# problem still to be understood (docs/benchmarks.md), which the short run of `make test` is
# not the place to meet.
SCALED = 5
SCALE_FROM_SECONDS = 120
KINDS = ["pod-delete", "pod-kill", "leader-kill", "partition", "operator-kill", "data-destroy"]
# Long runs start a minor behind and upgrade once, at a random moment, among the faults.
UPGRADE_FROM, UPGRADE_TO = "3.5.35", "3.6.16"
FORCE = ["--grace-period=0", "--force"]
# How long every member stays untouched once Ready, before the next fault (see `_faults`).
SEEN_WHOLE = 1.5
# The longest a cut is held waiting for its member to notice it.
MAX_CUT = 20.0
# A member is asked directly, never through a proxy the environment may name.
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ServiceClient:
    """One gRPC channel to the client Service's cluster IP; TLS checks the Service's name."""

    def __init__(self, k8s: K8sCluster, ns: str, name: str) -> None:
        secret = get(k8s, ns, "secret", f"{name}-client-tls")["data"]
        pem = {k: base64.b64decode(v) for k, v in secret.items()}
        address = get(k8s, ns, "service", f"{name}-client")["spec"]["clusterIP"]
        credentials = grpc.ssl_channel_credentials(
            root_certificates=pem["ca.crt"],
            private_key=pem["tls.key"],
            certificate_chain=pem["tls.crt"],
        )
        self.channel = grpc.secure_channel(
            f"{address}:2379",
            credentials,
            options=[
                ("grpc.ssl_target_name_override", f"{name}-client.{ns}.svc.cluster.local"),
                ("grpc.enable_http_proxy", 0),
            ],
        )
        self.kv = KVStub(self.channel)

    def put(self, key: str, value: str) -> None:
        self.kv.Put(PutRequest(key=key.encode(), value=value.encode()), timeout=OP_TIMEOUT)

    def get(self, key: str) -> str | None:
        kvs = self.kv.Range(RangeRequest(key=key.encode()), timeout=OP_TIMEOUT).kvs
        return kvs[0].value.decode() if kvs else None

    def revision(self) -> int:
        """The store's revision now, as a linearizable read's header says it."""
        return int(self.kv.Range(RangeRequest(key=b"chaos/"), timeout=OP_TIMEOUT).header.revision)

    def close(self) -> None:
        self.channel.close()


def watch_every_key(client: ServiceClient, max_seconds: float) -> tuple[Watcher, int]:
    """A watcher of every chaos key from the revision before the first put, on `client`'s
    channel (used for nothing else), made again from where it stopped whenever its stream
    breaks; and that revision."""
    start = client.revision()
    channel = client.channel
    watcher = Watcher(lambda: WatchStub(channel), "chaos/", start, max_seconds=max_seconds)
    return watcher.begin(), start


def client_threads(
    h: History, seed: int, stop: threading.Event, clients: list[ServiceClient]
) -> list[threading.Thread]:
    """One writer and reader of the chaos keys per client, recording into `h` until `stop`
    (not started). A Service with no Ready member refuses at once: a client that failed waits
    a moment."""
    return [
        threading.Thread(
            target=run_client,
            args=(h, n, seed, stop, KEYS, c.put, c.get, 0.2),
            daemon=True,
        )
        for n, c in enumerate(clients)
    ]


def _iptables(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["iptables", "-w", *args], capture_output=True, text=True, check=False)


def _heal_partitions() -> None:
    """Remove every rule this test added (this run's or a dead run's)."""
    for line in _iptables("-S", "FORWARD").stdout.splitlines():
        if RULE_TAG in line and line.startswith("-A "):
            _iptables("-D", *line.split()[1:])


@contextmanager
def _cut_off(ip: str) -> Iterator[None]:
    """The Pod at `ip` cut from every other Pod (its peers and the operator): what passes
    the bridge is dropped. Traffic from this machine (the kubelet's probes, the clients
    through the Service) still reaches it, as a partitioned member still gets requests."""
    for direction in ("-s", "-d"):
        rule = ["FORWARD", direction, ip, "-m", "comment", "--comment", RULE_TAG, "-j", "DROP"]
        done = _iptables("-I", *rule)
        assert done.returncode == 0, done.stderr
    try:
        yield
    finally:
        _heal_partitions()


def _leaderless(ip: str) -> bool:
    """Whether the member at `ip` says, on its metrics port, that it has no leader."""
    try:
        with NO_PROXY.open(f"http://{ip}:2381/health", timeout=1) as answer:
            said = json.load(answer)
    except urllib.error.HTTPError as e:  # 503 with the same body when unhealthy
        said = json.loads(e.read() or b"{}")
    except (OSError, ValueError):
        return False
    return said.get("health") == "false" and "leader" in str(said.get("reason", "")).lower()


def _felt(ip: str, seconds: float) -> bool:
    """Holds a cut for `seconds`, and longer (up to MAX_CUT s) until the member cut off says
    it lost its leader (its election timeout passed without a word from its peers). True when
    it said so."""
    start = time.monotonic()
    felt = False
    while time.monotonic() - start < (seconds if felt else MAX_CUT):
        felt = felt or _leaderless(ip)
        time.sleep(0.5)
    return felt


def _all_ready(k8s: K8sCluster, ns: str, name: str, size: int) -> list[dict[str, Any]]:
    """The member Pods when `size` of them are Ready voting members and none is going away,
    else []. A learner's Pod turns Ready before it votes: a fault on a voter then would take
    a second vote out (the operator's disruption budget counts voters only, for that reason)."""
    members = pods(k8s, ns, name)
    ready = [
        p
        for p in members
        if not p["metadata"].get("deletionTimestamp")
        and p["metadata"].get("labels", {}).get(LABEL_VOTER) == "true"
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in p.get("status", {}).get("conditions", [])
        )
    ]
    return ready if len(ready) == len(members) == size else []


def _faults(
    k8s: K8sCluster,
    ns: str,
    name: str,
    operator: Operator,
    seed: int,
    done: list[tuple[str, float]],
    destroyed: list[str],
    size: list[int],
    upgraded: list[bool],
) -> set[str]:
    """Faults one at a time for SECONDS; a member fault (or a scale) only once every member
    is Ready again (never two members out). The operator may be killed while a scale goes on.
    Each fault is kept in `done` with when it ended (a cut when it healed), the member IDs
    whose data was destroyed in `destroyed`, the size asked for last in `size[0]`, and
    whether the upgrade was asked for in `upgraded[0]` (an empty list: no upgrade in this run).
    Returns the cluster IDs status showed meanwhile."""
    rng = random.Random(seed)
    ids: set[str] = set()
    deadline = time.monotonic() + SECONDS
    # Three faults at least: a scale's wait for every member can outlast a short run.
    while time.monotonic() < deadline or len(done) < 3:
        time.sleep(rng.uniform(1.0, 4.0))
        ids.add(get(k8s, ns, "etcd", name).get("status", {}).get("clusterID", ""))
        long_kinds = ["scale"] + (["upgrade"] if upgraded == [False] else [])
        kind = rng.choice([*KINDS, *long_kinds] if SECONDS >= SCALE_FROM_SECONDS else KINDS)
        if kind == "operator-kill":
            # Killed again only once it runs again (a kill finds no process while the
            # container restarts).
            operator.wait_running()
            k8s.wait_for(lambda: operator.kill() or True, timeout=60, what="the operator killed")
            done.append((kind, time.monotonic()))
            continue
        members = _wait_all_ready(k8s, ns, name, done, size[0])
        # Held a moment, so the once-a-second sampler sees the cluster whole between two
        # faults; else one fault's figure runs on into the next.
        time.sleep(SEEN_WHOLE)
        if kind == "scale":
            up = size[0] == SIZE
            size[0] = SCALED if up else SIZE
            patch = json.dumps({"spec": {"size": size[0]}})
            k8s.kubectl("-n", ns, "patch", "etcd", name, "--type=merge", "-p", patch)
            done.append((f"scale-{'up' if up else 'down'} {size[0]}", time.monotonic()))
            continue
        if kind == "upgrade":
            upgraded[0] = True
            patch = json.dumps({"spec": {"version": UPGRADE_TO}})
            k8s.kubectl("-n", ns, "patch", "etcd", name, "--type=merge", "-p", patch)
            done.append((f"upgrade {UPGRADE_TO}", time.monotonic()))
            continue
        ordered = sorted(members, key=lambda p: p["metadata"]["name"])
        victim = rng.choice(ordered)
        if kind == "leader-kill":
            # The leader as status last named it; a member otherwise (leadership moved since,
            # or none known): the kill is then of a follower, and said so.
            leader = get(k8s, ns, "etcd", name).get("status", {}).get("leader") or ""
            victim = next((p for p in ordered if p["metadata"]["name"] == leader), victim)
            kind = kind if victim["metadata"]["name"] == leader else "pod-kill"
        pod = victim["metadata"]["name"]
        if kind == "partition":
            ip = victim["status"]["podIP"]
            with _cut_off(ip):
                felt = _felt(ip, rng.uniform(3.0, 8.0))
            # A cut the member never noticed proves nothing: said, and failed on below.
            pod += "" if felt else " (never felt)"
        elif kind == "data-destroy":
            # The member's data gone with its claim: it must come back under a new member ID.
            listed = get(k8s, ns, "etcd", name).get("status", {}).get("members") or []
            destroyed += [m["id"] for m in listed if m.get("name") == pod and m.get("id")]
            k8s.kubectl("-n", ns, "delete", "pvc", f"{pod}-data", "--wait=false")
            k8s.kubectl("-n", ns, "delete", "pod", pod, "--wait=false", *FORCE)
        else:
            force = FORCE if kind in ("pod-kill", "leader-kill") else []
            k8s.kubectl("-n", ns, "delete", "pod", pod, "--wait=false", *force)
        done.append((f"{kind} {pod}", time.monotonic()))
    return ids


def _wait_all_ready(
    k8s: K8sCluster, ns: str, name: str, done: list[tuple[str, float]], size: int
) -> list[dict[str, Any]]:
    """Every member Ready, within 180 s of asking; else what status and the Pods said."""
    try:
        return k8s.wait_for(lambda: _all_ready(k8s, ns, name, size), timeout=180, interval=1)
    except TimeoutError as timeout:
        status = get(k8s, ns, "etcd", name).get("status", {})
        seen = {
            p["metadata"]["name"]: (p.get("status", {}).get("phase"), p["metadata"].get("uid"))
            for p in pods(k8s, ns, name)
        }
        raise AssertionError(
            f"{timeout}; after {[what for what, _ in done]}; status {said(status)}; Pods {seen}"
        ) from timeout


def _sample_ready(
    k8s: K8sCluster,
    ns: str,
    name: str,
    size: list[int],
    stop: threading.Event,
    seen: list[tuple[float, bool, bool]],
) -> None:
    """Whether every member of the size asked last is Ready, and whether the EtcdCluster says
    Available, once a second until stopped (at most an hour)."""
    for _ in range(3600):
        if stop.is_set():
            return
        with contextlib.suppress(Exception):  # a failed read is no sample
            whole = bool(_all_ready(k8s, ns, name, size[0]))
            conditions = get(k8s, ns, "etcd", name).get("status", {}).get("conditions") or []
            available = any(
                c.get("type") == "Available" and c.get("status") == "True" for c in conditions
            )
            seen.append((time.monotonic(), whole, available))
        stop.wait(1.0)


def figures(
    done: list[tuple[str, float]],
    samples: list[tuple[float, bool, bool]],
    ops: list[dict[str, Any]],
) -> dict[str, Any]:
    """Seconds from each member fault's end until every member was Ready again, and until the
    EtcdCluster said Available again (after a sample that said it was not: a fault its status
    never showed counts 0), by kind (None when no sample saw it); and the longest time
    between two acknowledged puts."""
    back: dict[str, list[float | None]] = {}
    available: dict[str, list[float | None]] = {}
    for what, ended in done:
        kind = what.split()[0]
        if kind == "operator-kill":
            continue
        after = [(t, whole, ok) for t, whole, ok in samples if t > ended]
        at = next((t for t, whole, _ in after if whole), None)
        back.setdefault(kind, []).append(None if at is None else round(at - ended, 1))
        # Until the next fault: a later fault's unavailability is not this one's.
        upto = next((t for w, t in done if t > ended), math.inf)
        window = [(t, ok) for t, _, ok in after if t < upto]
        lost = next((t for t, ok in window if not ok), None)
        seen = next((t for t, ok in window if ok and (lost is None or t > lost)), None)
        available.setdefault(kind, []).append(
            0.0 if lost is None and window else None if seen is None else round(seen - ended, 1)
        )
    returns = sorted(o["return"] for o in ops if o["op"] == "put" and "return" in o)
    gaps = [(b - a) / 1e9 for a, b in itertools.pairwise(returns)]
    return {
        "ready_again_s": {kind: _spread(seconds) for kind, seconds in back.items()},
        "available_again_s": {kind: _spread(seconds) for kind, seconds in available.items()},
        "longest_write_outage_s": round(max(gaps, default=0.0), 1),
    }


def _spread(seconds: list[float | None]) -> dict[str, Any]:
    """How many, the median and the 95th percentile (nearest rank) of what was seen, and
    how many were never seen back within the run."""
    seen = sorted(s for s in seconds if s is not None)
    if not seen:
        return {"n": len(seconds), "unseen": len(seconds)}
    return {
        "n": len(seconds),
        "median": round(statistics.median(seen), 1),
        "p95": seen[max(0, math.ceil(0.95 * len(seen)) - 1)],
        "unseen": len(seconds) - len(seen),
    }


def test_seeded_faults_through_the_operator_keep_the_history_linearizable(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    seed = int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"CHAOS_SEED={seed} CHAOS_SECONDS={SECONDS}")
    k8s, ns, name = k8s_cluster, k8s_namespace, "chaos"
    _heal_partitions()
    # The upgrade's snapshot goes where an EtcdBackup of the cluster saves: a claim here.
    upgrade = SECONDS >= SCALE_FROM_SECONDS
    version = UPGRADE_FROM if upgrade else UPGRADE_TO
    if upgrade:
        apply(k8s, ns, backup_claim("backups"))
        apply(k8s, ns, volume_backup("before-upgrade", name, "backups"))
    apply(k8s, ns, etcd_cluster(name, SIZE, version=version, minReadySeconds=5))
    started = wait_available(k8s, ns, name, SIZE, 300)
    cluster_id = started["status"]["clusterID"]

    h, stop, done = History(), threading.Event(), list[tuple[str, float]]()
    ready: list[tuple[float, bool, bool]] = []
    destroyed: list[str] = []
    size = [SIZE]
    upgraded = [False] if upgrade else []
    clients = [ServiceClient(k8s, ns, name) for _ in range(CLIENTS + 2)]
    watcher, start = watch_every_key(clients[CLIENTS + 1], SECONDS + 900)
    threads = client_threads(h, seed, stop, clients[:CLIENTS])
    # Sampled until the cluster is back at the end, so the last fault has its figure too.
    sampled = threading.Event()
    sampler = threading.Thread(
        target=_sample_ready, args=(k8s, ns, name, size, sampled, ready), daemon=True
    )
    loads = contextlib.ExitStack()
    during = None
    if BENCHMARK:
        tool = benchmark_bin()
        target = _bench_target(k8s, ns, name, Path(tempfile.mkdtemp(prefix="chaos-bench-")))
        at_rest = run_workload(tool, target, _bench_puts(BENCH_AT_REST), timeout=120)
        print(_said_bench("at rest", at_rest))
        # Through the faults: as many puts as the faults' time at that rate, 10% short so the
        # tool ends by itself as they do; killed (and said) if the faults slow it far more.
        total = int(SECONDS * BENCH_RATE * 0.9)
        during = loads.enter_context(
            load_during(tool, target, _bench_puts(total), timeout=SECONDS + 300)
        )
    for t in [*threads, sampler]:
        t.start()
    try:
        with loads:
            ids = _faults(k8s, ns, name, operator, seed, done, destroyed, size, upgraded)
    except BaseException:
        watcher.finish(start, timeout=0)
        sampled.set()
        raise
    finally:
        _heal_partitions()
        stop.set()
        for t in threads:
            t.join(60)
    operator.wait_running()
    # The member Pods first: status may still say Available from before the last fault (a Pod
    # killed as the run ended), and only a Pod that is there answers for the membership.
    _wait_all_ready(k8s, ns, name, done, size[0])
    final = wait_available(k8s, ns, name, size[0], 420)
    expected = UPGRADE_TO if upgraded == [True] or not upgrade else UPGRADE_FROM
    if expected != final["status"].get("currentVersion"):
        final = k8s.wait_for(
            lambda: _on_version(k8s, ns, name, size[0], expected),
            timeout=600,
            interval=2,
            what=f"every member on {expected}",
        )
    sampled.set()
    sampler.join(30)

    # Every key read once more after the faults, by a client of its own: an acknowledged
    # put lost shows as a read the history cannot explain.
    reader = clients[CLIENTS]
    for key in KEYS:
        k8s.wait_for(
            functools.partial(_read, h, reader, key),
            timeout=60,
            what=f"{key} read after the faults",
        )
    end = reader.revision()
    caught_up = watcher.finish(end)
    for c in clients:
        c.close()

    with tempfile.NamedTemporaryFile(
        "w", prefix="chaos-history-", suffix=".jsonl", delete=False
    ) as f:
        f.writelines(json.dumps(op) + "\n" for op in h.ops)
    verdict = check(h.ops)
    puts = [o for o in h.ops if o["op"] == "put"]
    acked = [o for o in puts if "return" in o]
    # The benchmark's puts (none under chaos/) take revisions the watcher does not see.
    wrong = problems(watcher.events, start, end, puts, watcher.compacted, others=BENCHMARK)
    print(
        f"faults: {len(done)} ({', '.join(what for what, _ in done)}); ops {len(h.ops)}, puts "
        f"{len(puts)} ({len(acked)} acknowledged), verdict {verdict}; history in "
        f"{Path(f.name)}\nwatch: revisions {start + 1}..{end}, {len(watcher.events)} events, "
        f"{watcher.reconnects} streams made again, caught up {caught_up}\n"
        f"figures: {json.dumps(figures(done, ready, h.ops))}"
    )
    if during is not None:
        try:
            print(_said_bench("during the faults", during.result()))
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"benchmark during the faults gave no figures: {e}")
    assert verdict["result"] == "ok", f"not linearizable (CHAOS_SEED={seed}): {verdict}"
    assert not wrong, f"the watch (CHAOS_SEED={seed}): {wrong}"
    assert not [what for what, _ in done if "never felt" in what], done
    assert len(done) >= 3 and len(acked) >= 50, (done, len(acked))

    # The operator healed every fault under the cluster's own identity.
    assert ids - {""} <= {cluster_id}, ids
    assert final["status"]["clusterID"] == cluster_id
    names = sorted(m["name"] for m in final["status"]["members"])
    members = member_list(k8s, ns, names[0])
    assert sorted(m["name"] for m in members) == names and len(set(names)) == size[0], members
    assert not any(m.get("isLearner") for m in members), members
    # The version asked for last, on every member.
    assert final["status"]["currentVersion"] == expected, final["status"]
    # A member whose data was destroyed never came back under its old identity.
    back = {format(int(m["ID"]), "x") for m in members} & set(destroyed)
    assert not back, (back, members)


def _on_version(k8s: K8sCluster, ns: str, name: str, size: int, version: str) -> dict[str, Any]:
    """The EtcdCluster once all `size` members run `version` and it is Available; else {}."""
    o = get(k8s, ns, "etcd", name)
    st = o.get("status", {})
    available = any(
        c.get("type") == "Available" and c.get("status") == "True"
        for c in st.get("conditions") or []
    )
    whole = st.get("currentVersion") == version and st.get("readyMembers") == size
    return o if whole and available else {}


def _bench_target(k8s: K8sCluster, ns: str, name: str, into: Path) -> Target:
    """The cluster's client Service as the benchmark tool dials it, with its client
    certificate."""
    secret = get(k8s, ns, "secret", f"{name}-client-tls")["data"]
    ca, cert, key = write_tls(into, {k: base64.b64decode(v) for k, v in secret.items()})
    address = get(k8s, ns, "service", f"{name}-client")["spec"]["clusterIP"]
    return Target(f"{ns}/{name}", f"{address}:2379", ca, cert, key)


def _bench_puts(total: int) -> Workload:
    """Rate-limited puts of 256-byte values over 100,000 8-byte keys (none under chaos/)."""
    args = ("put", "--key-size=8", "--val-size=256", "--key-space-size=100000")
    return Workload(f"put at {BENCH_RATE}/s", (*args, f"--rate={BENCH_RATE}"), total, 8, 2)


def _said_bench(when: str, summary: Summary) -> str:
    p = summary.percentiles
    return (
        f"benchmark {when}: {summary.ok} puts ok in {summary.total:.1f}s ({summary.rps:.0f}/s), "
        f"latency p50/p90/p99 {p.get(50.0, 0) * 1e3:.1f}/{p.get(90.0, 0) * 1e3:.1f}/"
        f"{p.get(99.0, 0) * 1e3:.1f} ms, slowest {summary.slowest * 1e3:.0f} ms, errors "
        f"{summary.errors or 'none'}"
    )


def _read(h: History, client: ServiceClient, key: str) -> bool:
    """One recorded read of `key`; True when it answered."""
    recorded = len(h.ops)
    h.get(CLIENTS, key, functools.partial(client.get, key))
    return len(h.ops) > recorded
