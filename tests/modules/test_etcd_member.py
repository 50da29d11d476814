"""etcd_member against real etcd clusters, run through the real `ansible` command.

The core flow (learner add, promote while it catches up, remove a follower, remove the
leader) runs on every supported minor; edge cases run on 3.5.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from etcd3aio import Etcd3Client

from etcd_runbook.clients.etcd_client import EtcdClient
from etcd_runbook.clients.etcd_common import ConnectionParams
from testbed.ansible_adhoc import run_module

pytestmark = pytest.mark.etcd

VERSIONS = ["3.4", "3.5", "3.6"]


def membership(c) -> list[tuple[str, str, tuple[str, ...], bool]]:
    """The member list as etcdctl reports it, comparable across calls."""
    return sorted(
        (m["id"], m["name"], tuple(sorted(m["peer_urls"])), m["is_learner"])
        for m in c.member_list()
    )


def fill(c, keys: int, value_size: int) -> None:
    """Write `keys` keys of `value_size` bytes, so a new member has a log to catch up on."""

    async def write() -> None:
        endpoint = c.client_urls[0].removeprefix("http://")
        async with Etcd3Client([endpoint]) as client:
            assert client.kv is not None
            value = b"x" * value_size
            for start in range(0, keys, 100):
                await asyncio.gather(
                    *(client.kv.put(f"fill/{i:06d}", value) for i in range(start, start + 100))
                )

    asyncio.run(write())


def refused_promotions(c) -> float:
    """Promotions etcd refused so far, summed over the members' /metrics."""
    total = 0.0
    for url in c.client_urls:
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
            for line in response.read().decode().splitlines():
                if line.startswith("etcd_server_learner_promote_failures{"):
                    total += float(line.rsplit(" ", 1)[1])
    return total


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def diff_text(result: dict[str, Any]) -> tuple[str, str]:
    diff = result["diff"]
    diff = diff[0] if isinstance(diff, list) else diff
    return diff["before"], diff["after"]


def member_run(c, check: bool = False, diff: bool = False, **args: Any) -> dict[str, Any]:
    return run_module("etcd_member", {**c.module_args(), **args}, check=check, diff=diff)


@pytest.mark.parametrize("version", VERSIONS)
def test_learner_promote_and_removals(etcd_cluster_factory, version):
    """The membership flow on every minor; on 3.5 also check mode, --diff, idempotence and
    the second-learner refusal at each step (the module's logic is the same on all)."""
    exhaustive = version == "3.5"
    c = etcd_cluster_factory(version=version, size=3)
    fill(c, keys=1000, value_size=4096)
    m4 = c.allocate_member("m4")
    add: dict[str, Any] = {"name": "m4", "peer_urls": [m4.peer_url], "learner": True}

    if exhaustive:
        before = membership(c)
        r = member_run(c, check=True, diff=True, **add)
        assert r["changed"] and not r.get("failed"), r.get("msg")
        assert membership(c) == before
        diff_before, diff_after = diff_text(r)
        assert m4.peer_url not in diff_before
        assert f"peer_urls={m4.peer_url} learner" in diff_after

    r = member_run(c, **add)
    assert r["changed"] and not r.get("failed"), r.get("msg")
    learner_id = r["member"]["id"]
    assert (learner_id, "", (m4.peer_url,), True) in membership(c)
    assert len(r["members"]) == 4

    # Until it starts, the learner has no name in etcd: its peer URL identifies it.
    promote: dict[str, Any] = {
        "name": "m4",
        "peer_urls": [m4.peer_url],
        "learner": False,
        "promote_timeout": 90,
    }
    if exhaustive:
        r = member_run(c, **add)
        assert not r["changed"] and not r.get("failed"), r.get("msg")

        # A second learner is refused by the module, before etcd is asked.
        before = membership(c)
        other = etcd_cluster_factory.free_url()
        r = member_run(c, name="m5", peer_urls=[other], learner=True)
        assert r.get("failed") and r["reason"] == "Refused", r.get("msg")
        assert "one learner at a time" in r["msg"] and learner_id in r["msg"]
        assert membership(c) == before

        r = member_run(c, check=True, **promote)
        assert r["changed"] and r["steps"] == ["promote"], r.get("msg")
        assert membership(c) == before

    # Promote while the learner cannot be in sync yet: the module must retry until the
    # learner, started once etcd has refused a promotion, has caught up on the ~4 MB log.
    refused_before = refused_promotions(c)
    with ThreadPoolExecutor(1) as pool:
        promoting = pool.submit(member_run, c, **promote)
        wait_for(lambda: refused_promotions(c) > refused_before, 60, "a refused promotion")
        c.start_member(m4)
        r = promoting.result()
    assert r["changed"] and not r.get("failed"), r.get("msg")
    assert r["retries"] > 0, r.get("msg")
    promoted = r["member"]
    assert (promoted["id"], promoted["name"], promoted["is_learner"]) == (learner_id, "m4", False)
    c.wait_healthy()
    assert (learner_id, "m4", (m4.peer_url,), False) in membership(c)
    if exhaustive:
        r = member_run(c, **promote)
        assert not r["changed"] and not r.get("failed"), r.get("msg")

    # Remove a follower.
    leader = c.leader_name()
    follower = next(m for m in ("m4", "m1", "m2", "m3") if m != leader)
    absent: dict[str, Any] = {"name": follower, "state": "absent"}
    if exhaustive:
        before = membership(c)
        r = member_run(c, check=True, **absent)
        assert r["changed"] and r["steps"] == ["remove"], r.get("msg")
        assert membership(c) == before
    r = member_run(c, **absent)
    assert r["changed"] and r["steps"] == ["remove"] and not r.get("failed"), r.get("msg")
    c.stop_member(follower)
    assert follower not in {m["name"] for m in c.member_list()}
    if exhaustive:
        r = member_run(c, **absent)
        assert not r["changed"] and not r.get("failed"), r.get("msg")
        assert f"no member named {follower}" in r["msg"]

    # Remove the leader: leadership moves to another voter first, then it is removed.
    c.wait_healthy()
    leader = c.leader_name()
    r = member_run(c, name=leader, state="absent")
    assert r["changed"] and not r.get("failed"), r.get("msg")
    assert r["steps"] == ["move_leader", "remove"]
    assert r["leader_moved_to"]["name"] not in (leader, "")
    c.stop_member(leader)
    c.wait_healthy()
    assert c.leader_name() == r["leader_moved_to"]["name"]
    assert len(c.member_list()) == 2


def test_refusals_below_quorum_and_from_two_members(etcd_cluster_factory):
    c = etcd_cluster_factory(version="3.5", size=3)
    c.kill_member("m1")
    c.wait_healthy()
    before = membership(c)

    # Refused only after looking again for quorum_wait seconds (m1 stays down).
    started = time.monotonic()
    r = member_run(c, name="m2", state="absent", quorum_wait=2)
    assert r.get("failed") and r["reason"] == "Refused", r.get("msg")
    assert "below the quorum" in r["msg"] and "m1" in r["msg"]
    assert time.monotonic() - started >= 2
    assert membership(c) == before

    # Removing the failed member keeps quorum (the first step of replacing it).
    r = member_run(c, name="m1", state="absent")
    assert r["changed"] and not r.get("failed"), r.get("msg")

    before = membership(c)
    for check in (True, False):
        r = member_run(c, check=check, name="m2", state="absent")
        assert r.get("failed") and r["reason"] == "Refused", r.get("msg")
        assert "2 voting members" in r["msg"]
    assert membership(c) == before
    assert len(before) == 2


def test_peer_url_update_and_unstarted_voter(etcd_cluster_factory):
    c = etcd_cluster_factory(version="3.5", size=3)
    m2 = c.member("m2")
    extra = etcd_cluster_factory.free_url()

    r = member_run(c, diff=True, name="m2", peer_urls=[m2.peer_url, extra])
    assert r["changed"] and r["steps"] == ["update"], r.get("msg")
    assert f"peer_urls={','.join(sorted([m2.peer_url, extra]))}" in diff_text(r)[1]
    assert [e["peer_urls"] for e in c.member_list() if e["name"] == "m2"] == [[m2.peer_url, extra]]
    r = member_run(c, name="m2", peer_urls=[m2.peer_url, extra])
    assert not r["changed"], r.get("msg")
    r = member_run(c, name="m2", peer_urls=[m2.peer_url])
    assert r["changed"] and r["steps"] == ["update"], r.get("msg")

    # A voter added but never started has no name: found again by its peer URL.
    unstarted = etcd_cluster_factory.free_url()
    r = member_run(c, name="m9", peer_urls=[unstarted])
    assert r["changed"] and r["member"]["is_learner"] is False, r.get("msg")
    r = member_run(c, name="m9", peer_urls=[unstarted])
    assert not r["changed"], r.get("msg")
    r = member_run(c, name="m9", peer_urls=[unstarted], state="absent")
    assert r["changed"] and r["steps"] == ["remove"], r.get("msg")
    assert unstarted not in {u for e in c.member_list() for u in e["peer_urls"]}


@pytest.mark.parametrize("security", ["tls", "auth"])
def test_learner_add_and_remove_on_secured_cluster(etcd_cluster_factory, security):
    c = etcd_cluster_factory(version="3.5", size=3, tls=security == "tls", auth=security == "auth")
    assert ("ca_cert" in c.module_args()) == (security == "tls")
    assert ("password" in c.module_args()) == (security == "auth")
    m4 = c.allocate_member("m4")

    r = member_run(c, name="m4", peer_urls=[m4.peer_url], learner=True)
    assert r["changed"] and not r.get("failed"), r.get("msg")
    assert (r["member"]["id"], "", (m4.peer_url,), True) in membership(c)
    r = member_run(c, name="m4", peer_urls=[m4.peer_url], learner=True)
    assert not r["changed"] and not r.get("failed"), r.get("msg")

    r = member_run(c, name="m4", peer_urls=[m4.peer_url], state="absent")
    assert r["changed"] and not r.get("failed"), r.get("msg")
    assert len(membership(c)) == 3

    if security == "auth":
        anonymous = {k: v for k, v in c.module_args().items() if k not in ("user", "password")}
        r = run_module("etcd_member", {**anonymous, "name": "m1", "state": "absent"})
        assert r.get("failed") and r["reason"] == "AuthRequired", r.get("msg")
        assert "authentication enabled: give user and password" in r["msg"]
        assert len(membership(c)) == 3


def test_client_logs_in_again_when_a_member_forgot_the_token(etcd_cluster_factory):
    """Simple tokens live in each member's memory: after a restart the member rejects the
    token the client got before; the client must log in again, once, and carry on."""
    c = etcd_cluster_factory(version="3.5", size=3, auth=True)
    m1 = c.member("m1")
    params = ConnectionParams.from_module_params({**c.module_args(), "timeout": 5})
    with EtcdClient(params) as client:
        assert len(client.member_list()) == 3
        c.stop_member("m1")
        c.restart_member("m1")
        c.wait_healthy()
        assert client.endpoint(m1.client_url).hash_kv().member_id in {
            m["id"] for m in c.member_list() if m["name"] == "m1"
        }
