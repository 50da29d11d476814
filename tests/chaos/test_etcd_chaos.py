"""A short, seeded chaos run against a real three-member etcd on loopback: clients put and get
through every member while members are killed (SIGKILL) or stopped and started again, never
more than one at a time; the clients' history must be linearizable (tests/chaos/history.py),
every acknowledged put readable at the end. This proves the clients' side and the checker on
the real store; the runs through the operator use them alike.

CHAOS_SEED replays a run (the seed of each is printed); CHAOS_SECONDS sets its length."""

from __future__ import annotations

import base64
import functools
import json
import os
import random
import threading
import time
from typing import Any

import pytest

from tests.chaos.history import History, check, run_client
from tests.etcd_cluster import EtcdCluster

SECONDS = float(os.environ.get("CHAOS_SECONDS") or 20)
# The faults' time, the slowest member's return and the check after it.
pytestmark = [pytest.mark.etcd, pytest.mark.timeout(int(SECONDS) + 240)]

KEYS = [f"chaos/{i}" for i in range(8)]
CLIENTS = 4


def _get(c: EtcdCluster, key: str) -> str | None:
    out = c.etcdctl("get", "-w", "json", "--", key, endpoints=_all(c), timeout=20)
    kvs = json.loads(out.stdout).get("kvs") or []
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


def _all(c: EtcdCluster) -> list[str]:
    return [m.client_url for m in c.members]


def _put(c: EtcdCluster, key: str, value: str) -> None:
    c.etcdctl("put", "--", key, value, endpoints=_all(c), timeout=20)


def _faults(c: EtcdCluster, seed: int, seconds: float, done: list[str]) -> None:
    """One member down at a time: killed or stopped, back after a moment."""
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(0.5, 2.0))
        victim = rng.choice(c.members).name
        how = rng.choice(["kill", "stop"])
        (c.kill_member if how == "kill" else c.stop_member)(victim)
        time.sleep(rng.uniform(0.2, 2.0))
        c.restart_member(victim)
        done.append(f"{how} {victim}")
    c.wait_healthy(60)


@pytest.mark.parametrize("version", ["3.5", "3.6"])
def test_seeded_member_faults_keep_the_history_linearizable(etcd_cluster_factory, version):
    seed = int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(1 << 30))
    print(f"CHAOS_SEED={seed} CHAOS_SECONDS={SECONDS} etcd {version}")
    c = etcd_cluster_factory(version=version, size=3)
    h, stop, done = History(), threading.Event(), list[str]()
    put, get = functools.partial(_put, c), functools.partial(_get, c)
    clients = [
        threading.Thread(target=run_client, args=(h, n, seed, stop, KEYS, put, get), daemon=True)
        for n in range(CLIENTS)
    ]
    for t in clients:
        t.start()
    try:
        _faults(c, seed, SECONDS, done)
    finally:
        stop.set()
        for t in clients:
            t.join(60)
    # Every key read once more, by a client of its own, after the faults: an acknowledged put
    # lost shows here as a read the history cannot explain.
    for key in KEYS:
        for _ in range(5):
            recorded = len(h.ops)
            h.get(CLIENTS, key, functools.partial(_get, c, key))
            if len(h.ops) > recorded:
                break
        else:
            pytest.fail(f"{key} could not be read after the faults:\n{c.log_tails()}")
    verdict: dict[str, Any] = check(h.ops)
    puts = [o for o in h.ops if o["op"] == "put"]
    acked = [o for o in puts if "return" in o]
    print(
        f"faults: {len(done)} ({', '.join(done)}); ops {len(h.ops)}, puts {len(puts)} "
        f"({len(acked)} acknowledged), verdict {verdict}"
    )
    assert verdict["result"] == "ok", f"not linearizable (CHAOS_SEED={seed}): {verdict}"
    assert len(done) >= 3 and len(acked) >= 50, (done, len(acked))
