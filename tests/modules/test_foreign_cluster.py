"""Every call checks the cluster ID its answer carries (etcd_runbook/clients/etcd_client.py, the
snapshot stream): two real clusters on loopback, and each call meant for one pointed at the
other fails before anything is acted on, the other cluster left as it was."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest

from etcd_runbook.clients.etcd_client import EtcdClient
from etcd_runbook.clients.etcd_common import ConnectionParams
from etcd_runbook.clients.etcd_errors import EtcdForeignClusterError
from etcd_runbook.clients.etcd_snapshot_stream import stream_snapshot

pytestmark = pytest.mark.etcd


def cluster_id(c: Any) -> str:
    return f"{c.endpoint_status()[0]['Status']['header']['cluster_id']:x}"


def looks(c: Any) -> tuple[Any, ...]:
    """What a call sent to the wrong cluster could change there: members, leader, revision
    and the compacted revision (a read at revision 2 fails once it is compacted away)."""
    members = sorted((m["id"], tuple(m["peer_urls"]), m["is_learner"]) for m in c.member_list())
    revision = c.endpoint_status()[0]["Status"]["header"]["revision"]
    readable = c.etcdctl("get", "--rev=2", "k", check=False).returncode == 0
    return members, c.leader_name(), revision, readable


class Sink:
    def __init__(self) -> None:
        self.data = io.BytesIO()

    def write_many(self, chunks: list[bytes]) -> None:
        for chunk in chunks:
            self.data.write(chunk)


@pytest.mark.parametrize("version", ["3.4", "3.6"])
def test_every_call_meant_for_one_cluster_fails_at_another(etcd_cluster_factory, version):
    ours = etcd_cluster_factory(version=version, size=1)
    other = etcd_cluster_factory(version=version, size=3)
    for i in range(3):
        other.put("k", f"v{i}")  # revisions 2..4: a compaction would be seen
    ours_id, other_id = cluster_id(ours), cluster_id(other)
    members = other.member_list()
    leader = next(m for m in members if m["name"] == other.leader_name())
    follower = next(m for m in members if m["id"] != leader["id"])
    before = looks(other)

    def client(**given: Any) -> EtcdClient:
        # A fresh client each: one that met the other cluster distrusts its endpoints.
        params = {"endpoints": tuple(other.client_urls), "cluster_id": ours_id, **given}
        return EtcdClient(ConnectionParams(**params))

    calls: dict[str, Callable[[EtcdClient], Any]] = {
        "member add": lambda c: c.member_add([etcd_cluster_factory.free_url()], learner=True),
        "member remove": lambda c: c.member_remove(follower["id"]),
        "member promote": lambda c: c.member_promote(follower["id"]),
        "member update": lambda c: c.member_update(follower["id"], follower["peer_urls"]),
        "alarm disarm": lambda c: c.alarm_disarm(),
        "compact": lambda c: c.compact(3),
        "defragment": lambda c: c.endpoint(follower["client_urls"][0]).defragment(),
        "move leader": lambda c: c.endpoint(leader["client_urls"][0]).move_leader(follower["id"]),
        "member list": lambda c: c.member_list(),
        "alarms": lambda c: c.alarms(),
        "revision": lambda c: c.current_revision(),
        "cluster version": lambda c: c.cluster_version(),
        "hash": lambda c: c.endpoint(follower["client_urls"][0]).hash_kv(),
        "status": lambda c: c.endpoint(follower["client_urls"][0]).status(),
    }
    for what, call in calls.items():
        with client() as c, pytest.raises(EtcdForeignClusterError) as raised:
            call(c)
        message = str(raised.value)
        assert ours_id in message and other_id in message, (what, message)
        assert raised.value.reason == "ForeignCluster", what

    # Without a cluster ID given, the first answer decides: a change sent on afterwards
    # through an endpoint of another cluster is not sent.
    mixed = {"endpoints": tuple(ours.client_urls), "cluster_id": None}
    with client(**mixed) as c:
        assert c.member_list()[0].name == "m1"
        with pytest.raises(EtcdForeignClusterError):
            c.member_remove(follower["id"], via=[follower["client_urls"][0]])

    # The snapshot stream: nothing of the other cluster's reaches the sink.
    sink = Sink()
    with pytest.raises(EtcdForeignClusterError):
        stream_snapshot(
            ConnectionParams(endpoints=tuple(other.client_urls)),
            other.client_urls[0],
            sink,
            60,
            ours_id,
        )
    assert sink.data.tell() == 0
    assert (
        stream_snapshot(
            ConnectionParams(endpoints=tuple(other.client_urls)),
            other.client_urls[0],
            sink,
            60,
            other_id,
        )
        == sink.data.tell()
        > 0
    ), "the right cluster's snapshot streams as before"

    assert looks(other) == before, "the other cluster was not changed"
