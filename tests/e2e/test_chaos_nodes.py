"""A node stopped under writes, on the three-node bed (hack/cluster up --nodes 3): the chaos
run's clients (tests/e2e/test_chaos.py) put and get through the client Service while a node
that holds a member, chosen by the seed, is stopped and started again, twice, each time within
spec.nodeLossTimeout. Its member is away with its data, never replaced: it must come back on
its own volume under its own member ID, with every acknowledged write kept, the history
linearizable and the watch whole. Run by `make test-nodes` (and `make chaos`).

CHAOS_SEED replays a run (each prints its seed)."""

from __future__ import annotations

import functools
import json
import os
import random
import threading
import time
from typing import Any

import pytest

from testbed.cluster import K8sCluster, hack_cluster
from tests.chaos.history import History, check
from tests.chaos.watch import problems
from tests.e2e.helpers import (
    TLS_ARGS,
    Operator,
    apply,
    etcd_cluster,
    member_list,
    pods,
    wait_available,
)
from tests.e2e.test_chaos import (
    CLIENTS,
    KEYS,
    ServiceClient,
    _all_ready,
    _read,
    client_threads,
    watch_every_key,
)
from tests.e2e.test_nodes import node_of, operator_node

pytestmark = [pytest.mark.e2e, pytest.mark.nodes, pytest.mark.chaos, pytest.mark.timeout(1500)]

STOPS = 2
# Long enough for the member's peers to lose it and for the operator to say NodeLost; far
# inside the cluster's nodeLossTimeout, so the member is waited for, never replaced.
AWAY = (20.0, 40.0)
NODE_LOSS_TIMEOUT = "600s"


def healthy(k8s: K8sCluster, ns: str, pod: str) -> dict[str, bool]:
    """Each member's endpoint -> whether it answers, as etcd in `pod` finds them (`endpoint
    health --cluster`: every member the cluster lists, asked directly). A Pod's Ready
    condition is no measure here: while its node is stopped nothing updates it."""
    out = k8s.kubectl(
        "-n", ns, "exec", pod, "-c", "etcd", "--", "/usr/local/bin/etcdctl",
        "--endpoints=https://127.0.0.1:2379", *TLS_ARGS, "--command-timeout=5s",
        "endpoint", "health", "--cluster", "-w", "json",
        check=False, timeout=60,
    )  # fmt: skip
    try:
        return {str(e["endpoint"]): bool(e.get("health")) for e in json.loads(out.stdout)}
    except ValueError:
        return {}


def silent(k8s: K8sCluster, ns: str, pod: str) -> list[str]:
    """The endpoints that do not answer, as etcd in `pod` finds them."""
    return [e for e, ok in healthy(k8s, ns, pod).items() if not ok]


def whole(k8s: K8sCluster, ns: str, pod: str) -> bool:
    """Every one of the three members answers, as etcd in `pod` finds them."""
    found = healthy(k8s, ns, pod)
    return len(found) == 3 and all(found.values())


def test_a_node_stopped_and_started_under_writes_keeps_every_write_and_member(
    three_nodes: list[str], k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    seed = int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"CHAOS_SEED={seed}")
    rng = random.Random(seed)
    k8s, ns, name = k8s_cluster, k8s_namespace, "nodechaos"
    apply(k8s, ns, etcd_cluster(name, nodeLossTimeout=NODE_LOSS_TIMEOUT, minReadySeconds=5))
    started = wait_available(k8s, ns, name, 3, 300)
    cluster_id = started["status"]["clusterID"]
    ids = {m["name"]: m["id"] for m in started["status"]["members"]}
    # Never node 0 (the API server, and the host the clients share a network with) nor the
    # operator's own node: those are other tests' faults.
    candidates: list[str] = [
        n for n in ("erop-node1", "erop-node2") if n != operator_node(k8s) and n in three_nodes
    ]
    assert candidates, "no node to stop"

    h, stop = History(), threading.Event()
    clients = [ServiceClient(k8s, ns, name) for _ in range(CLIENTS + 2)]
    watcher, start = watch_every_key(clients[CLIENTS + 1], 1500)
    threads = client_threads(h, seed, stop, clients[:CLIENTS])
    for t in threads:
        t.start()
    back: list[float] = []
    stopped: list[str] = []
    try:
        for _ in range(STOPS):
            time.sleep(rng.uniform(2.0, 6.0))
            node = rng.choice(candidates)
            away = rng.uniform(*AWAY)
            placed = node_of(k8s, ns, name)
            on_it = [m for m, n in placed.items() if n == node]
            asker = next(m for m, n in sorted(placed.items()) if n != node)
            hack_cluster("node", "stop", node, timeout=120)
            began_away = time.monotonic()
            stopped.append(node)
            try:
                # The stop felt: the member on that node stops answering its peers.
                felt = k8s.wait_for(
                    functools.partial(silent, k8s, ns, asker),
                    timeout=away,
                    interval=2,
                    what=f"the member on {node} silent",
                )
                time.sleep(max(0.0, away - (time.monotonic() - began_away)))
            finally:
                hack_cluster("node", "start", node, timeout=300)
                stopped.remove(node)
            began = time.monotonic()
            k8s.wait_for(
                functools.partial(whole, k8s, ns, asker),
                timeout=300,
                interval=1,
                what=f"every member answering after {node} came back",
            )
            back.append(round(time.monotonic() - began, 1))
            print(
                f"{node} stopped {away:.0f}s (members {on_it}, silent: {felt}); every member "
                f"answering {back[-1]}s after its start"
            )
    finally:
        for left in stopped:
            hack_cluster("node", "start", left, timeout=300)
        stop.set()
        for t in threads:
            t.join(60)

    final = wait_available(k8s, ns, name, 3, 300)
    assert _all_ready(k8s, ns, name, 3), "every member Pod Ready, voting"
    reader = clients[CLIENTS]
    for key in KEYS:
        k8s.wait_for(
            functools.partial(_read, h, reader, key), timeout=60, what=f"{key} read after the stops"
        )
    end = reader.revision()
    caught_up = watcher.finish(end)
    for c in clients:
        c.close()
    verdict = check(h.ops)
    puts = [o for o in h.ops if o["op"] == "put"]
    acked = [o for o in puts if "return" in o]
    wrong = problems(watcher.events, start, end, puts, watcher.compacted)
    print(
        f"ops {len(h.ops)}, puts {len(puts)} ({len(acked)} acknowledged), verdict {verdict}; "
        f"watch {start + 1}..{end}, {len(watcher.events)} events, caught up {caught_up}; "
        f"every member answering again after each start: {back} s"
    )
    assert verdict["result"] == "ok", f"not linearizable (CHAOS_SEED={seed}): {verdict}"
    assert not wrong, f"the watch (CHAOS_SEED={seed}): {wrong}"
    assert len(acked) >= 50, len(acked)
    # Waited for, never replaced: the same members under the same cluster ID.
    assert final["status"]["clusterID"] == cluster_id
    assert {m["name"]: m["id"] for m in final["status"]["members"]} == ids
    members = member_list(k8s, ns, sorted(ids)[0])
    assert sorted(format(int(m["ID"]), "x") for m in members) == sorted(ids.values()), members
    statuses: list[Any] = [p["status"].get("phase") for p in pods(k8s, ns, name)]
    assert statuses == ["Running"] * 3, statuses
