"""etcd_maintenance against real etcd clusters, run through the real `ansible` command.

Defragmentation order and compaction run on every supported minor; alarms (a real NOSPACE
on a cluster with a tiny quota), move_leader and downgrade on the versions that have them.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

import grpc
import pytest
from etcd3aio._protobuf import AlarmRequest, KVStub, MaintenanceStub, PutRequest, StatusRequest

from testbed.ansible_adhoc import run_module
from testbed.host import etcd_bin_dir
from tests.etcd_cluster import EtcdCluster

pytestmark = pytest.mark.etcd

VERSIONS = ["3.4", "3.5", "3.6"]
QUOTA = 16 * 1024 * 1024


def maintenance(c, check: bool = False, diff: bool = False, **args: Any) -> dict[str, Any]:
    return run_module("etcd_maintenance", {**c.module_args(), **args}, check=check, diff=diff)


def target(url: str) -> str:
    return url.removeprefix("http://")


def db_sizes(c) -> dict[str, int]:
    sizes = {}
    for m in c.members:
        with grpc.insecure_channel(target(m.client_url)) as channel:
            sizes[m.name] = int(MaintenanceStub(channel).Status(StatusRequest(), timeout=5).dbSize)
    return sizes


def churn(c, rounds: int, value_size: int = 64 * 1024) -> None:
    """Overwrite a few keys many times: history that compaction frees and defrag reclaims."""
    value = os.urandom(value_size)
    with grpc.insecure_channel(target(c.client_urls[0])) as channel:
        kv = KVStub(channel)
        for i in range(rounds):
            kv.Put(PutRequest(key=b"churn/%d" % (i % 4), value=value), timeout=10)


def compact_revision_of(c) -> int:
    """The compaction point as etcd reports it through HashKV (independent of the module)."""
    out = json.loads(c.etcdctl("endpoint", "hashkv", "-w", "json").stdout)
    return int(out[0]["HashKV"].get("compact_revision", 0))


def defrag_finished_at(member) -> float:
    """When the member's own log says its last defragmentation finished (epoch seconds):
    etcd logs "finished defragment" (3.4 to 3.6) with a microsecond timestamp."""
    stamps = []
    for line in member.log_path.read_text().splitlines():
        if "finished defragment" in line and line.startswith("{"):
            ts = json.loads(line)["ts"]
            stamps.append(
                float(ts) if isinstance(ts, int | float) else datetime.fromisoformat(ts).timestamp()
            )
    assert stamps, f"no defragmentation in {member.log_path}"
    return max(stamps)


@pytest.mark.parametrize("version", VERSIONS)
def test_compact_then_defragment_followers_first_leader_last(etcd_cluster_factory, version):
    c = etcd_cluster_factory(version=version, size=3)
    churn(c, rounds=200)
    current = int(json.loads(c.etcdctl("get", "-w", "json", "x").stdout)["header"]["revision"])

    by_revision = maintenance(c, action="compact", revision=current - 150)
    assert by_revision["changed"] and by_revision["compact_revision_before"] == 0, by_revision
    assert compact_revision_of(c) == current - 150
    again = maintenance(c, action="compact", revision=current - 150)
    assert not again["changed"] and again["compact_revision_before"] == current - 150, again
    older = maintenance(c, action="compact", revision=10)
    assert not older["changed"], older

    planned_keep = maintenance(c, check=True, diff=True, action="compact", keep=1)
    assert planned_keep["changed"] and planned_keep["revision"] == current, planned_keep
    assert compact_revision_of(c) == current - 150, "check mode must not compact"
    kept = maintenance(c, action="compact", keep=1)
    assert kept["changed"] and kept["compact_revision"] == current, kept
    assert compact_revision_of(c) == current
    assert not maintenance(c, action="compact", keep=1)["changed"]
    future = maintenance(c, action="compact", revision=current + 1000)
    assert future["failed"] and "in the future" in future["msg"], future

    leader = c.leader_name()
    followers = sorted(m.name for m in c.members if m.name != leader)
    before = db_sizes(c)
    planned = maintenance(c, check=True, action="defragment")
    assert planned["order"] == [*followers, leader] and planned["changed"], planned
    assert db_sizes(c) == before, "check mode must not defragment"

    result = maintenance(c, action="defragment")
    assert result["changed"] and result["order"] == [*followers, leader], result
    for step in result["members"]:
        assert step["db_size_after"] < step["db_size_before"], step
    # The leader handed leadership to a follower already defragmented before its own turn.
    assert result["members"][-1]["leader_moved_to"] in followers, result
    assert c.leader_name() == result["members"][-1]["leader_moved_to"]
    assert all(s["leader_moved_to"] is None for s in result["members"][:-1]), result
    finished = {s["name"]: s["finished_at"] for s in result["members"]}
    assert all(finished[f] <= finished[leader] for f in followers), finished
    # From the members' own logs: each was defragmented, the leader last.
    logged = {m.name: defrag_finished_at(m) for m in c.members}
    assert max(logged[f] for f in followers) < logged[leader], logged

    # Nothing left to reclaim, and the leader kept: unchanged.
    second = maintenance(c, action="defragment", leader_away=False)
    assert not second["changed"], second


@pytest.mark.parametrize("version", VERSIONS)
def test_move_leader(etcd_cluster_factory, version):
    c = etcd_cluster_factory(version=version, size=3)
    leader = c.leader_name()
    follower = sorted(m.name for m in c.members if m.name != leader)[0]

    planned = maintenance(c, check=True, action="move_leader", to=follower)
    assert planned["changed"] and planned["leader"] == follower, planned
    assert c.leader_name() == leader, "check mode must not move the leader"

    moved = maintenance(c, action="move_leader", to=follower)
    assert moved["changed"] and moved["leader_before"] == leader, moved
    assert c.leader_name() == follower
    assert not maintenance(c, action="move_leader", to=follower)["changed"]

    unknown = maintenance(c, action="move_leader", to="nope")
    assert unknown["failed"] and "no member 'nope'" in unknown["msg"], unknown

    down = next(m.name for m in c.members if m.name not in (follower,))
    c.stop_member(down)
    refused = maintenance(c, action="move_leader", to=down)
    assert refused["failed"] and refused["reason"] == "ClusterUnhealthy", refused
    assert c.leader_name() == follower
    defrag = maintenance(c, action="defragment")
    assert defrag["failed"] and "is unhealthy" in defrag["msg"], defrag


def raise_nospace(c) -> int:
    """Overwrite one key with 100 KB values until etcd refuses with NOSPACE; returns puts."""
    value = os.urandom(100_000)
    with grpc.insecure_channel(target(c.client_urls[0])) as channel:
        kv = KVStub(channel)
        for count in range(1, 2 * QUOTA // len(value)):
            try:
                kv.Put(PutRequest(key=b"big", value=value), timeout=10)
            except grpc.RpcError as error:
                assert "database space exceeded" in (error.details() or ""), error
                return count
    raise AssertionError("the quota was never reached")


@pytest.mark.parametrize("version", ["3.5", "3.6"])
def test_nospace_alarm_disarmed_only_after_compact_and_defrag(tmp_path, version):
    # A tiny backend quota, so NOSPACE is reached in seconds.
    c = EtcdCluster(
        etcd_bin_dir(version), tmp_path / "quota", extra_flags=[f"--quota-backend-bytes={QUOTA}"]
    )
    try:
        c.bootstrap(1)
        raise_nospace(c)
        quota: dict[str, Any] = {"quota_backend_bytes": QUOTA}
        alarms = json.loads(c.etcdctl("alarm", "list", "-w", "json").stdout).get("alarms")
        assert alarms and alarms[0]["alarm"] == 1, alarms
        # Under NOSPACE the member still answers and follows its leader: healthy, the alarm
        # said apart (a cluster runbook that read it as down reported quorum lost).
        info = run_module("etcd_cluster_info", c.module_args())
        assert info["healthy"] and info["quorum"]["ok"], info
        assert [a["alarm"] for a in info["alarms"]] == ["NOSPACE"], info["alarms"]

        full = maintenance(c, action="disarm_alarms", **quota)
        assert full["failed"] and full["reason"] == "StillFull", full
        assert c.etcdctl("alarm", "list").stdout.strip(), "refusal must leave the alarm"

        assert maintenance(c, action="compact", keep=1)["changed"]
        assert maintenance(c, action="defragment")["changed"]
        planned = maintenance(c, check=True, action="disarm_alarms", **quota)
        assert planned["changed"] and planned["alarms_before"], planned
        assert c.etcdctl("alarm", "list").stdout.strip(), "check mode must leave the alarm"

        disarmed = maintenance(c, diff=True, action="disarm_alarms", **quota)
        assert disarmed["changed"] and disarmed["alarms"] == [], disarmed
        assert c.etcdctl("alarm", "list").stdout.strip() == ""
        c.put("after", "disarm")
        assert not maintenance(c, action="disarm_alarms", **quota)["changed"]

        # A CORRUPT alarm (raised by hand through the API) is never disarmed by the module,
        # and blocks defragmentation.
        member_id = int(c.member_list()[0]["id"], 16)
        with grpc.insecure_channel(target(c.client_urls[0])) as channel:
            MaintenanceStub(channel).Alarm(
                AlarmRequest(action=AlarmRequest.ACTIVATE, memberID=member_id, alarm=2),
                timeout=10,
            )
        corrupt = maintenance(c, action="disarm_alarms")
        assert corrupt["failed"] and corrupt["reason"] == "CorruptAlarm", corrupt
        defrag = maintenance(c, action="defragment")
        assert defrag["failed"] and defrag["reason"] == "CorruptAlarm", defrag
    finally:
        c.close()


def test_downgrade_on_36(etcd_cluster_factory):
    c = etcd_cluster_factory(version="3.6", size=3)
    valid = maintenance(c, action="downgrade", downgrade_action="validate", target_version="3.5")
    assert not valid["changed"] and not valid.get("failed"), valid
    invalid = maintenance(c, action="downgrade", downgrade_action="validate", target_version="3.4")
    assert invalid["failed"] and "invalid downgrade target version" in invalid["msg"], invalid

    enable: dict[str, Any] = {
        "action": "downgrade",
        "downgrade_action": "enable",
        "target_version": "3.5",
    }
    planned = maintenance(c, check=True, **enable)
    assert planned["changed"] and planned["downgrade"]["enabled"], planned
    status = c.endpoint_status()[0]["Status"]
    assert not status.get("downgrade_info", {}).get("enabled"), status

    enabled = maintenance(c, **enable)
    assert enabled["changed"] and enabled["downgrade"] == {
        "enabled": True,
        "target_version": "3.5.0",
    }, enabled
    assert not maintenance(c, **enable)["changed"]

    cancel: dict[str, Any] = {**enable, "downgrade_action": "cancel"}
    cancelled = maintenance(c, diff=True, **cancel)
    assert cancelled["changed"] and not cancelled["downgrade"]["enabled"], cancelled
    assert not maintenance(c, **cancel)["changed"]


@pytest.mark.parametrize("version", ["3.4", "3.5"])
def test_downgrade_refused_before_36(etcd_cluster_factory, version):
    c = etcd_cluster_factory(version=version, size=1)
    enable = maintenance(c, action="downgrade", downgrade_action="enable", target_version="3.4")
    assert enable["failed"] and enable["reason"] == "Unsupported", enable


def test_unreachable_endpoint_fails_clearly(etcd_cluster_factory):
    url = etcd_cluster_factory.free_url()
    result = run_module("etcd_maintenance", {"endpoints": [url], "action": "defragment"})
    assert result["failed"] and "connection refused" in result["msg"], result
