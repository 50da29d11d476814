"""A roll never costs quorum, end to end: one 3-member cluster under writes is asked, one after
the other, for changes the API server accepts but etcd cannot run on (an image that does not
exist, a node selector no node has, a memory limit etcd cannot live in). Each must stop at its
first member, keep the two others running, say why naming the field within seconds, and be
undone by setting the spec back: the halted member comes back as it was, on its own data.
Member readiness is sampled all along; at no sample may fewer than a quorum be Ready, and no
acknowledged write may be lost."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from tests.e2e.helpers import (
    Operator,
    apply,
    condition,
    etcd_cluster,
    etcdctl,
    events,
    get,
    pods,
    wait_available,
)
from tests.k8s_cluster import K8sCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

AVAILABLE_WITHIN = 300
# From the spec change to the halt in status: the roll's wait ends on the kubelet's word.
HALTED_WITHIN = 60
# After the halt, the roll is watched this much longer than spec.minReadySeconds (default 30 s):
# a member that answered once and died later must not have let the next one go.
HOLD = 45
# (what, the change, the change undone, the field status must name, words of the reason)
CAUSES: list[tuple[str, dict[str, Any], dict[str, Any], str, str]] = [
    (
        "an image that does not exist",
        {"version": "3.6.17"},
        {"version": "3.6.16"},
        "spec.version",
        "etcd:v3.6.17 cannot be pulled",
    ),
    (
        "a node selector no node has",
        {"pod": {"nodeSelector": {"etcd.runbook.io/e2e": "nowhere"}}},
        {"pod": {"nodeSelector": None}},
        "spec.pod.nodeSelector",
        "no node takes it",
    ),
    (
        "a memory limit etcd cannot run in",
        {"pod": {"resources": {"limits": {"memory": "16Mi"}}}},
        {"pod": {"resources": None}},
        "spec.pod.resources",
        "",
    ),
]


def _patch(k8s: K8sCluster, ns: str, name: str, spec: dict[str, Any]) -> None:
    k8s.kubectl("-n", ns, "patch", "etcd", name, "--type=merge", "-p", json.dumps({"spec": spec}))


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions", [])
    )


class Watch:
    """Samples the member Pods (name -> (uid, Ready)) twice a second, and writes keys through
    the client Service from whichever member is Ready, until stopped (both bounded)."""

    def __init__(self, k8s: K8sCluster, ns: str, name: str) -> None:
        self.k8s, self.ns, self.name = k8s, ns, name
        self.samples: list[tuple[float, dict[str, tuple[str, bool]]]] = []
        self.acked: list[str] = []
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._sample, daemon=True),
            threading.Thread(target=self._write, daemon=True),
        ]

    def __enter__(self) -> Watch:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _sample(self) -> None:
        deadline = time.monotonic() + 1200
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                seen = {
                    p["metadata"]["name"]: (p["metadata"]["uid"], _ready(p))
                    for p in pods(self.k8s, self.ns, self.name)
                }
            except Exception:  # a failed read is no sample
                seen = {}
            if seen:
                self.samples.append((time.monotonic(), seen))
            time.sleep(0.5)

    def _write(self) -> None:
        svc = f"https://{self.name}-client.{self.ns}.svc.cluster.local:2379"
        for i in range(3000):
            if self.stop.is_set():
                return
            ready = sorted(
                n for n, (_, r) in (self.samples[-1][1] if self.samples else {}).items() if r
            )
            if not ready:
                time.sleep(0.5)
                continue
            key = f"roll/{i:05d}"
            try:
                out = etcdctl(
                    self.k8s, self.ns, ready[i % len(ready)], "put", key, str(i), endpoint=svc
                )
            except Exception:  # an unacknowledged write is not counted
                continue
            if out.strip() == "OK":
                self.acked.append(key)


def test_a_roll_that_cannot_run_halts_at_its_first_member_and_is_undone(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "roll"
    apply(k8s, ns, etcd_cluster(name))
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    ids = {m["name"]: m["id"] for m in obj["status"]["members"]}
    timings: dict[str, float] = {}

    with Watch(k8s, ns, name) as watch:
        for what, change, undo, field, words in CAUSES:
            before = {p["metadata"]["name"]: p for p in pods(k8s, ns, name)}
            start = time.monotonic()
            _patch(k8s, ns, name, change)

            def halted() -> dict[str, Any]:
                o = get(k8s, ns, "etcd", name)
                return o if condition(o, "Degraded").get("reason") == "RollHalted" else {}

            obj = k8s.wait_for(halted, timeout=HALTED_WITHIN, interval=0.5, what=f"halt on {what}")
            timings[what] = time.monotonic() - start
            message = condition(obj, "Degraded")["message"]
            assert f"Changed: {field}." in message and words in message, (what, message)

            def said(field: str = field) -> list[dict[str, Any]]:
                return [e for e in events(k8s, ns, "RollHalted") if field in e["message"]]

            k8s.wait_for(
                said,
                timeout=30,
                interval=0.5,
                what=f"a RollHalted Event naming {field}",
            )

            # Held: one member on its new Pod, down; the two others untouched and Ready.
            time.sleep(HOLD)
            now = {p["metadata"]["name"]: p for p in pods(k8s, ns, name)}
            touched = sorted(
                n for n, p in before.items() if now[n]["metadata"]["uid"] != p["metadata"]["uid"]
            )
            assert len(touched) == 1, (what, touched)
            (victim,) = touched
            for n, p in now.items():
                if n != victim:
                    assert _ready(p), (what, n, p.get("status"))
            assert condition(get(k8s, ns, "etcd", name), "Degraded")["reason"] == "RollHalted"

            # Set back: the halted member is made again as it was, on its own claim.
            _patch(k8s, ns, name, undo)
            obj = wait_available(k8s, ns, name, 3, 180)
            back = next(p for p in pods(k8s, ns, name) if p["metadata"]["name"] == victim)
            old = before[victim]
            assert back["metadata"]["uid"] != now[victim]["metadata"]["uid"], what
            assert back["spec"]["containers"][0]["image"] == old["spec"]["containers"][0]["image"]
            assert back["spec"]["containers"][0].get("resources") == old["spec"]["containers"][
                0
            ].get("resources")
            assert back["spec"].get("nodeSelector") == old["spec"].get("nodeSelector")
            assert {m["name"]: m["id"] for m in obj["status"]["members"]} == ids, what
            if watch.acked:
                key = watch.acked[0]
                got = etcdctl(k8s, ns, victim, "get", key, "--print-value-only", "--consistency=s")
                assert got.strip() == str(int(key.rsplit("/", 1)[1])), (what, key, got)
            timings[f"{what}, set back"] = time.monotonic() - start

    for what, seconds in timings.items():
        print(f"{what}: {seconds:.1f}s")
    # A quorum Ready at every sample, from the first change to the end.
    short = [(at, seen) for at, seen in watch.samples if sum(r for _, r in seen.values()) < 2]
    assert not short, f"fewer than a quorum Ready: {short[:3]}"
    assert len(watch.samples) > 100, len(watch.samples)
    assert len(watch.acked) > 50, f"the writer got through: {len(watch.acked)} writes"
    stored = set(etcdctl(k8s, ns, f"{name}-0", "get", "roll/", "--prefix", "--keys-only").split())
    missing = sorted(set(watch.acked) - stored)
    assert not missing, f"acknowledged writes lost: {missing[:5]}"
