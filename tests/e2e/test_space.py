"""Space end to end, on one three-member cluster with the smallest quota (64Mi): the
defragmentation policy once history was compacted (waiting for its schedule's window, then
in it), a NOSPACE alarm that history raised and the runbook recovers without a person (the
newest value of every key intact, the window closed), and one that live data raised, which it
says (DatabaseFull, with the figures) without rewriting the members again, until a person's
deletions let it recover."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from typing import Any

import pytest

from etcd_runbook.names import ANN_CHECK_REQUESTED, ANN_SPACE_FULL, LABEL_CLUSTER
from testbed.cluster import K8sCluster
from tests.e2e.helpers import (
    TLS_ARGS,
    Operator,
    apply,
    condition,
    etcd_cluster,
    etcdctl,
    events,
    get,
    pods,
    said,
    wait_available,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

NAME = "space"
QUOTA = 64 * 1024**2
# A value of 1 MiB (base64 of random bytes): within etcd's 1.5 MiB request limit.
VALUE = base64.b64encode(os.urandom(768 * 1024)).decode()
# A cluster under space pressure is looked at every 30 s (space.SPACE_RECHECK); a recovery also
# waits for each member's defragmentation and the cluster's health after it.
RECOVERY_TIMEOUT = 240
# The defragmentation schedule that keeps the window closed here: New Year, midnight UTC.
CLOSED = "0 0 1 1 *"


def put_stdin(k8s: K8sCluster, ns: str, key: str, value: str) -> str:
    """One put of a value too large for a command line, through member 0's etcdctl; etcd's
    error text when refused ('' when acknowledged)."""
    proc = k8s.kubectl(
        "-n", ns, "exec", "-i", f"{NAME}-0", "-c", "etcd", "--",
        "/usr/local/bin/etcdctl", *TLS_ARGS, "put", key,
        input=value, check=False,
    )  # fmt: skip
    return "" if proc.returncode == 0 and proc.stdout.strip() == "OK" else proc.stderr.strip()


def fill(k8s: K8sCluster, ns: str, key_of: Any, limit: int = 200) -> int:
    """Put 1 MiB values, each its own (value_of(n)), at key_of(n) until etcd refuses for
    space; returns how many went in."""
    for n in range(limit):
        error = put_stdin(k8s, ns, key_of(n), value_of(n))
        if error:
            assert "database space exceeded" in error, error
            return n
    raise AssertionError(f"no NOSPACE after {limit} MiB")


def value_of(n: int) -> str:
    return f"{n:04d}{VALUE}"


def alarms(k8s: K8sCluster, ns: str) -> str:
    return etcdctl(k8s, ns, f"{NAME}-0", "alarm", "list").strip()


def revision(k8s: K8sCluster, ns: str) -> int:
    out = json.loads(etcdctl(k8s, ns, f"{NAME}-0", "get", "nothing", "-w", "json"))
    return int(out["header"]["revision"])


def value_digest(k8s: K8sCluster, ns: str, key: str) -> str:
    out = json.loads(etcdctl(k8s, ns, f"{NAME}-0", "get", key, "-w", "json"))
    return hashlib.sha256(base64.b64decode(out["kvs"][0]["value"])).hexdigest()


def poke(k8s: K8sCluster, ns: str) -> None:
    """Ask the operator to look at the cluster now (docs/api.md, check-requested)."""
    k8s.kubectl(
        "-n", ns, "annotate", "etcd", NAME, "--overwrite",
        f"{ANN_CHECK_REQUESTED}={time.time()}",
    )  # fmt: skip


def set_schedule(k8s: K8sCluster, ns: str, line: str) -> None:
    body = {"spec": {"defragmentation": {"schedule": line}}}
    k8s.kubectl("-n", ns, "patch", "etcd", NAME, "--type=merge", "-p", json.dumps(body))


def reasons(k8s: K8sCluster, ns: str, reason: str) -> list[str]:
    return [str(e.get("message")) for e in events(k8s, ns, reason)]


def test_defragmentation_policy_nospace_recovered_and_database_full_said(
    k8s_cluster: K8sCluster, k8s_namespace: str, operator: Operator
) -> None:
    k8s, ns = k8s_cluster, k8s_namespace
    spec = etcd_cluster(
        NAME,
        storage={"size": "1Gi", "quotaBackendBytes": "64Mi"},
        defragmentation={
            "freePercent": 20,
            "minReclaim": "4Mi",
            "memberTimeout": "2m",
            # A window that opens once a year, at New Year (not today): closed until changed.
            "schedule": CLOSED,
            "window": "1m",
        },
    )
    apply(k8s, ns, spec)
    wait_available(k8s, ns, NAME, 3, timeout=300)

    # Live data over half the quota: once a run has seen it, the cluster is under pressure
    # and looked at every SPACE_RECHECK seconds, so nothing below needs a person. The first
    # look is asked for, as a person would (nothing else queues one for an alarm).
    for n in range(34):
        assert not put_stdin(k8s, ns, f"base/{n}", value_of(n))
    poke(k8s, ns)

    # 1. The policy: history compacted (as auto-compaction would, hourly) leaves a fifth of
    # each file free; the runbook defragments every member, the leader last after moving away.
    for n in range(18):
        assert not put_stdin(k8s, ns, "churn", value_of(n))
    etcdctl(k8s, ns, f"{NAME}-0", "compact", str(revision(k8s, ns)), "--physical")
    # bbolt counts pages freed by the compaction only once later writes commit (and no older
    # read is open).
    for n in range(3):
        etcdctl(k8s, ns, f"{NAME}-0", "put", "tick", str(n))
        time.sleep(1)

    # Outside the schedule's window nothing is defragmented, and status says what waits.
    def waiting() -> dict[str, Any]:
        obj = get(k8s, ns, "etcd", NAME)
        message = str(obj["status"].get("space", {}).get("message") or "")
        return obj if "waiting for the defragmentation window" in message else {}

    obj = k8s.wait_for(waiting, timeout=RECOVERY_TIMEOUT, interval=3, what="the window waited for")
    assert CLOSED in obj["status"]["space"]["message"], obj["status"]["space"]
    assert not any(m.get("lastDefragmented") for m in obj["status"]["members"])
    assert reasons(k8s, ns, "Defragmented") == []
    # A line that fires every minute, each window a minute long: always open.
    set_schedule(k8s, ns, "* * * * *")

    def defragmented() -> dict[str, Any]:
        obj = get(k8s, ns, "etcd", NAME)
        members = obj["status"].get("members") or []
        done = len(members) == 3 and all(m.get("lastDefragmented") for m in members)
        return obj if done and condition(obj, "Progressing").get("status") == "False" else {}

    try:
        obj = k8s.wait_for(defragmented, timeout=RECOVERY_TIMEOUT, interval=3, what="defragmented")
    except TimeoutError as error:
        status = get(k8s, ns, "etcd", NAME)["status"]
        sizes = [(m["name"], m.get("dbSize"), m.get("dbSizeInUse")) for m in status["members"]]
        raise TimeoutError(f"{error}; sizes {sizes}; space {status.get('space')}") from error
    for member in obj["status"]["members"]:
        assert member["dbSize"] < 40 * 1024**2, member
    done = reasons(k8s, ns, "Defragmented")
    moved = [m for m in done if "leadership moved" in m]
    assert len(done) == 3 and len(moved) == 1, done
    # The leader went last, after leadership moved away from it.
    last = {m["name"]: m["lastDefragmented"] for m in obj["status"]["members"]}
    assert last[moved[0].split(":")[0]] == max(last.values()), (last, moved)

    # 2. NOSPACE raised by history (one key overwritten): recovered without a person, the
    # window closed again (an outage waits for no window).
    set_schedule(k8s, ns, CLOSED)
    for i in range(5):
        etcdctl(k8s, ns, f"{NAME}-0", "put", f"keep/{i}", "old")
        etcdctl(k8s, ns, f"{NAME}-0", "put", f"keep/{i}", f"newest-{i}")
    written = fill(k8s, ns, lambda n: "big")
    assert written > 5, written
    newest_big = hashlib.sha256(value_of(written - 1).encode()).hexdigest()
    assert "NOSPACE" in alarms(k8s, ns)
    k8s.wait_for(
        lambda: reasons(k8s, ns, "NoSpaceRecovered"), timeout=RECOVERY_TIMEOUT, interval=3,
        what="NOSPACE recovered",
    )  # fmt: skip
    assert alarms(k8s, ns) == ""
    # The run that found the alarm said so at once (a Warning naming it), then recovered.
    announced = reasons(k8s, ns, "RecoveringSpace")
    assert any(m.startswith("NOSPACE on ") for m in announced), announced
    assert not put_stdin(k8s, ns, "after", "writes again")
    for i in range(5):
        got = etcdctl(k8s, ns, f"{NAME}-0", "get", f"keep/{i}", "--print-value-only").strip()
        assert got == f"newest-{i}", got
    assert value_digest(k8s, ns, "big") == newest_big
    assert value_digest(k8s, ns, "base/33") == hashlib.sha256(value_of(33).encode()).hexdigest()

    # 3. NOSPACE raised by live data: said with the figures, and not retried at that revision.
    # The first NOSPACE of new keys may still leave the 10% a disarm needs once the history is
    # compacted (then it is recovered, rightly): the writes go on until it does not.
    def full() -> dict[str, Any]:
        obj = get(k8s, ns, "etcd", NAME)
        return obj if condition(obj, "Degraded").get("reason") == "DatabaseFull" else {}

    def recoveries() -> int:
        return sum(int(e.get("count") or 1) for e in events(k8s, ns, "NoSpaceRecovered"))

    def full_or_recovered(before: int) -> bool:
        return bool(full()) or recoveries() > before

    obj = {}
    for round_ in range(4):
        before = recoveries()
        fill(k8s, ns, lambda n, r=round_: f"live/{r}/{n}")
        k8s.wait_for(
            lambda: full_or_recovered(before),  # noqa: B023  # waited for within the round
            timeout=RECOVERY_TIMEOUT, interval=3, what="DatabaseFull or recovered",
        )  # fmt: skip
        if obj := full():
            break
    assert obj, said(get(k8s, ns, "etcd", NAME)["status"])
    message = condition(obj, "Degraded")["message"]
    assert "live data fills the backend quota" in message and "64Mi quota" in message, message
    assert "quotaBackendBytes up to" in message, message
    assert "NOSPACE" in alarms(k8s, ns)
    defrags = len(reasons(k8s, ns, "Defragmented"))
    # The next run at that revision says so again (the Event's count grows) and rewrites
    # nothing.
    k8s.wait_for(
        lambda: any(int(e.get("count") or 1) >= 2 for e in events(k8s, ns, "DatabaseFull")),
        timeout=180, interval=5, what="DatabaseFull said again",
    )  # fmt: skip
    assert full(), said(get(k8s, ns, "etcd", NAME)["status"])
    assert len(reasons(k8s, ns, "Defragmented")) == defrags

    # 4. A person deletes keys (deletes pass under NOSPACE): the runbook recovers again.
    etcdctl(k8s, ns, f"{NAME}-0", "del", "live/", "--prefix")
    k8s.wait_for(
        lambda: alarms(k8s, ns) == "", timeout=RECOVERY_TIMEOUT, interval=3, what="disarmed"
    )
    assert not put_stdin(k8s, ns, "after-full", "writes again")
    wait_available(k8s, ns, NAME, 3, timeout=120)
    # The record of the full database is gone with the alarm.
    claims = get(k8s, ns, "pvc", "-l", f"{LABEL_CLUSTER}={NAME}")["items"]
    assert len(claims) == 3
    assert not [c for c in claims if ANN_SPACE_FULL in c["metadata"].get("annotations", {})]

    # 5. etcd's settings from the spec, and limits: one change rolls the members one at a time,
    # the leader last after leadership moved away; each member then runs with the flags, and
    # Go's runtime sized to the limits.
    settings: dict[str, Any] = {
        "snapshotCount": 5000,
        "logLevel": "warn",
        "electionTimeout": 1500,
        "featureGates": {"InitialCorruptCheck": True},
    }
    k8s.kubectl(
        "-n", ns, "patch", "etcd", NAME, "--type=merge",
        "-p", json.dumps({"spec": {
            "etcd": settings,
            # Small: a limit alone is also the request, and the bed has two cores.
            "pod": {"resources": {"limits": {"cpu": "250m", "memory": "512Mi"}}},
        }}),
    )  # fmt: skip
    wanted = {
        "--snapshot-count=5000",
        "--log-level=warn",
        "--election-timeout=1500",
        "--feature-gates=InitialCorruptCheck=true",
    }

    go_env = [
        {"name": "GOMAXPROCS", "value": "1"},
        {"name": "GOMEMLIMIT", "value": str(512 * 1024**2 * 9 // 10)},
    ]

    def rolled() -> bool:
        members = pods(k8s, ns, NAME)
        return len(members) == 3 and all(
            wanted <= set(p["spec"]["containers"][0]["args"])
            and p["spec"]["containers"][0].get("env") == go_env
            for p in members
        )

    k8s.wait_for(rolled, timeout=600, interval=5, what="every member on the new settings")
    wait_available(k8s, ns, NAME, 3, timeout=300)
    assert [m for m in reasons(k8s, ns, "LeaderMoved") if "before its restart" in m]
    assert etcdctl(k8s, ns, f"{NAME}-0", "get", "keep/0", "--print-value-only").strip() == (
        "newest-0"
    )
