"""A roll never costs quorum, end to end: one 3-member cluster under writes is asked, one after
the other, for changes the API server accepts but etcd cannot run on (an image that does not
exist, a node selector no node has, a memory limit etcd cannot live in). Each must stop at its
first member, keep the two others running, say why naming the field within seconds, and be
undone by setting the spec back: the halted member comes back as it was, on its own data.
Member Pods are sampled all along: at no sample may the operator have more than one member
out (a Pod it made anew that is not Ready yet), a client's writes through the Service must never
stall for long, and no acknowledged write may be lost. A member the operator did not touch can
still fail its readiness probe for a few seconds on a starved test machine (two cores, two test
workers); such blips are printed with the member's last log lines, and bounded by the stall rule,
because they are etcd's health, not the roll's doing."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from etcd_runbook.names import LABEL_CLUSTER
from testbed.cluster import K8sCluster
from tests.e2e.helpers import (
    Operator,
    apply,
    condition,
    etcd_cluster,
    etcdctl,
    events,
    get,
    pods,
    put_via_service,
    wait_available,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

AVAILABLE_WITHIN = 300
# From the spec change to the halt in status: the roll's wait ends on the kubelet's word. A
# roll starts only once every member answers healthy; on two cores a member missed its health
# check, the run that was to halt failed and the next one came after 60 s (CI, 2026-11-27).
HALTED_WITHIN = 120
# After the halt, the roll is watched this much longer than spec.minReadySeconds (default 30 s):
# a member that answered once and died later must not have let the next one go.
HOLD = 45
# With one member out and two serving, a client's writes through the Service go on. A pause this
# long while both untouched members stay Ready is the roll's doing (their probes fail together
# for 10 s at least before the Service drops them, so a shorter hiccup stays under it).
WRITE_STALL = 30.0
# A two-member quorum on a starved machine (two cores, two test workers) can lose its leader for
# half a minute with no hand of the operator in it: CI saw writes pause 33.7 s while an untouched
# member's linearized reads waited on raft agreement (2026-11-27). A pause that overlaps such a
# blip (a member not Ready on the Pod and container that served) is printed and bounded by this.
BLIP_STALL = 120.0
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
        # Killed as it starts, every time: an idle etcd 3.6 needs about 7 MiB (8Mi runs, 6Mi
        # is killed). At 16Mi a member in CI was neither killed nor healthy for the 120 s the
        # test waits (2026-11-27; such a member is now bounded by roll.ROLL_HEALTHY_WITHIN).
        {"pod": {"resources": {"limits": {"memory": "4Mi"}}}},
        {"pod": {"resources": None}},
        "spec.pod.resources",
        "",
    ),
]


def _patch(k8s: K8sCluster, ns: str, name: str, spec: dict[str, Any]) -> None:
    k8s.kubectl("-n", ns, "patch", "etcd", name, "--type=merge", "-p", json.dumps({"spec": spec}))


def _restarts(pod: dict[str, Any]) -> int:
    return sum(c.get("restartCount", 0) for c in pod.get("status", {}).get("containerStatuses", []))


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions", [])
    )


class Watch:
    """Samples the member Pods twice a second and writes keys through the client Service from
    whichever member is Ready, until stopped (both bounded). A sample maps each member to its
    Pod's uid, Ready and restart count."""

    def __init__(self, k8s: K8sCluster, ns: str, name: str) -> None:
        self.k8s, self.ns, self.name = k8s, ns, name
        # (when, each member's (uid, Ready, restarts), out by the operator's hand, blipped)
        self.samples: list[
            tuple[float, dict[str, tuple[str, bool, int]], list[str], list[str]]
        ] = []
        self.acked: list[str] = []
        self.acked_at: list[float] = []
        # The uid and restart count each member had when last Ready: a Pod the operator made
        # anew, or a container that restarted since, is not the one that served.
        self.served: dict[str, tuple[str, int]] = {}
        self.blip_logs: dict[str, str] = {}
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
        selector = f"{LABEL_CLUSTER}={self.name}"
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:  # every Pod, those being deleted too (`pods` leaves them out)
                found = get(self.k8s, self.ns, "pods", "-l", selector)["items"]
            except Exception:  # a failed read is no sample
                found = []
            seen = {
                p["metadata"]["name"]: (p["metadata"]["uid"], _ready(p), _restarts(p))
                for p in found
            }
            # A Pod being deleted was taken down by a hand (in this test, the operator's).
            deleting = {
                p["metadata"]["name"] for p in found if p["metadata"].get("deletionTimestamp")
            }
            if seen:
                self.samples.append(
                    (time.monotonic(), seen, self.out(seen, deleting), self.blips(seen, deleting))
                )
                self.served.update({n: (u, r) for n, (u, ready, r) in seen.items() if ready})
                self._keep_blip_logs(self.samples[-1][3])
            time.sleep(0.5)

    def _keep_blip_logs(self, blips: list[str]) -> None:
        """The first time an untouched member is not Ready, its last log lines say why."""
        for n in blips:
            if n in self.blip_logs:
                continue
            try:
                out = self.k8s.kubectl("-n", self.ns, "logs", n, "-c", "etcd", "--tail=15")
                self.blip_logs[n] = out.stdout
            except Exception as e:  # the logs are a diagnosis, not the check
                self.blip_logs[n] = f"(no logs: {e})"

    def out(self, seen: dict[str, tuple[str, bool, int]], deleting: set[str]) -> list[str]:
        """The members the operator has down at a sample: not Ready on a Pod being deleted, on a
        Pod it made anew or in a container that restarted."""
        return sorted(
            n
            for n, (uid, ready, restarts) in seen.items()
            if not ready and (n in deleting or self.served.get(n) != (uid, restarts))
        )

    def blips(self, seen: dict[str, tuple[str, bool, int]], deleting: set[str]) -> list[str]:
        """The members not Ready at a sample on the very Pod and container that served, which
        nobody is deleting: etcd's own health on a starved machine, not the operator's doing."""
        return sorted(
            n
            for n, (uid, ready, restarts) in seen.items()
            if not ready and n not in deleting and self.served.get(n) == (uid, restarts)
        )

    def stalls(self) -> tuple[list[float], list[float]]:
        """The pauses between acknowledged writes, split into those with every untouched member
        Ready all along and those overlapping a blip."""
        clean: list[float] = []
        blipped: list[float] = []
        for a, b in zip(self.acked_at, self.acked_at[1:], strict=False):
            during = any(bl for at, _, _, bl in self.samples if a <= at <= b)
            (blipped if during else clean).append(b - a)
        return clean, blipped

    def _write(self) -> None:
        for i in range(3000):
            if self.stop.is_set():
                return
            ready = sorted(
                n for n, (_, r, _) in (self.samples[-1][1] if self.samples else {}).items() if r
            )
            if not ready:
                time.sleep(0.5)
                continue
            key = f"roll/{i:05d}"
            if put_via_service(self.k8s, self.ns, self.name, ready[i % len(ready)], key, str(i)):
                self.acked.append(key)
                self.acked_at.append(time.monotonic())


def test_a_roll_that_cannot_run_halts_at_its_first_member_and_is_undone(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns, name = k8s_cluster, k8s_namespace, "roll"
    apply(k8s, ns, etcd_cluster(name))
    obj = wait_available(k8s, ns, name, 3, AVAILABLE_WITHIN)
    ids = {m["name"]: m["id"] for m in obj["status"]["members"]}
    timings: dict[str, float] = {}
    last: list[dict[str, Any]] = []  # the last Degraded and Progressing while waiting for a halt

    with Watch(k8s, ns, name) as watch:
        for what, change, undo, field, words in CAUSES:
            before = {p["metadata"]["name"]: p for p in pods(k8s, ns, name)}
            start = time.monotonic()
            _patch(k8s, ns, name, change)

            def halted() -> dict[str, Any]:
                o = get(k8s, ns, "etcd", name)
                last[:] = [condition(o, "Degraded"), condition(o, "Progressing")]
                return o if last[0].get("reason") == "RollHalted" else {}

            try:
                obj = k8s.wait_for(
                    halted, timeout=HALTED_WITHIN, interval=0.5, what=f"halt on {what}"
                )
            except TimeoutError as timeout:
                # What status said last: why the run that should have halted did not.
                raise AssertionError(f"{timeout}; status said {last}") from timeout
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
            # The others keep their Pods and containers. Ready is read over a window, not at one
            # instant: on a loaded machine a two-member quorum's /health can miss five probes
            # (10 s) with no hand of the operator in it (CI saw one such blip at this check).
            for n, p in now.items():
                if n != victim:
                    assert _restarts(p) == _restarts(before[n]), (what, n, p.get("status"))

                    def ready(n: str = n, uid: str = p["metadata"]["uid"]) -> bool:
                        pod = get(k8s, ns, "pod", n)
                        return pod["metadata"]["uid"] == uid and _ready(pod)

                    k8s.wait_for(ready, timeout=30, interval=0.5, what=f"{n} Ready ({what})")
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
    # Never two members out by the operator's hand, from the first change to the end.
    two_out = [(at, out) for at, _, out, _ in watch.samples if len(out) > 1]
    assert not two_out, f"more than one member out at once: {two_out[:3]}"
    short = [at for at, seen, _, _ in watch.samples if sum(r for _, r, _ in seen.values()) < 2]
    if short:
        print(f"fewer than a quorum Ready at {len(short)} samples, {short[0]:.1f}..{short[-1]:.1f}")
        for n, logs in watch.blip_logs.items():
            print(f"--- {n}, untouched, not Ready; its last log lines:\n{logs}")
    # And quorum all along, as a client sees it: its writes never stall while the two untouched
    # members are Ready, and a pause in etcd's own blip is bounded.
    clean, blipped = watch.stalls()
    if blipped:
        print(f"longest pause in writes during a blip: {max(blipped):.1f}s")
    assert max(clean, default=0.0) < WRITE_STALL, f"writes stalled {max(clean):.1f}s"
    assert max(blipped, default=0.0) < BLIP_STALL, f"writes stalled {max(blipped):.1f}s in a blip"
    assert len(watch.samples) > 100, len(watch.samples)
    assert len(watch.acked) > 50, f"the writer got through: {len(watch.acked)} writes"
    stored = set(etcdctl(k8s, ns, f"{name}-0", "get", "roll/", "--prefix", "--keys-only").split())
    missing = sorted(set(watch.acked) - stored)
    assert not missing, f"acknowledged writes lost: {missing[:5]}"
