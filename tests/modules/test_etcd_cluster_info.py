"""etcd_cluster_info against real etcd, through the real `ansible` command."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from testbed.ansible_adhoc import run_module

pytestmark = pytest.mark.etcd


@pytest.mark.parametrize("version", ["3.4", "3.5", "3.6"])
def test_healthy_cluster_then_one_member_killed(etcd_cluster_factory, version):
    c = etcd_cluster_factory(version=version, size=3)
    # One endpoint is enough: the module asks every member through its advertised URL.
    args = {**c.module_args(), "endpoints": [c.member("m1").client_url]}

    r = run_module("etcd_cluster_info", args, check=True)
    assert not r.get("failed") and r["changed"] is False, r.get("msg")
    etcdctl_members = c.member_list()
    assert sorted((m["id"], m["name"]) for m in r["members"]) == sorted(
        (m["id"], m["name"]) for m in etcdctl_members
    )
    status = c.endpoint_status()[0]["Status"]
    assert r["cluster_id"] == f"{status['header']['cluster_id']:x}"
    assert r["cluster_version"] == f"{version}.0"
    assert r["leader"]["name"] == c.leader_name()
    assert r["quorum"] == {"voters": 3, "healthy_voters": 3, "needed": 2, "ok": True}
    assert r["healthy"] is True and r["alarms"] == []
    assert sorted(s["endpoint"] for s in r["status"]) == sorted(c.client_urls)
    for entry in r["status"]:
        assert entry["healthy"] and entry["errors"] == [], entry
        assert entry["version"] == c.version
        assert entry["leader"] == r["leader"]["id"]
        assert entry["db_size"] >= entry["db_size_in_use"] > 0
        assert entry["raft_term"] >= 2 and entry["raft_index"] > 0
        assert entry["revision"] >= 1
        assert entry["is_learner"] is False

    follower = next(m for m in ("m2", "m3") if m != c.leader_name())
    c.kill_member(follower)
    c.wait_healthy()
    r = run_module("etcd_cluster_info", args)
    assert not r.get("failed"), r.get("msg")
    assert r["quorum"] == {"voters": 3, "healthy_voters": 2, "needed": 2, "ok": True}
    assert r["healthy"] is False
    dead = next(m for m in r["members"] if m["name"] == follower)
    assert dead["healthy"] is False
    dead_status = next(s for s in r["status"] if s["endpoint"] == c.member(follower).client_url)
    assert dead_status["healthy"] is False
    assert "connection refused" in dead_status["errors"][0]
    assert r["leader"]["name"] == c.leader_name()


def test_learner_shows_up_as_learner(etcd_cluster_factory):
    c = etcd_cluster_factory(version="3.5", size=1)
    m2 = c.allocate_member("m2")
    c.etcdctl("member", "add", "m2", f"--peer-urls={m2.peer_url}", "--learner")
    c.start_member(m2)
    c.wait_healthy()
    r = run_module("etcd_cluster_info", c.module_args())
    assert not r.get("failed"), r.get("msg")
    learner = next(m for m in r["members"] if m["name"] == "m2")
    assert learner["is_learner"] and learner["healthy"], learner
    assert r["quorum"] == {"voters": 1, "healthy_voters": 1, "needed": 1, "ok": True}
    statuses = {s["endpoint"]: s for s in r["status"]}
    assert statuses[m2.client_url]["is_learner"] is True


@pytest.mark.parametrize("version", ["3.4", "3.6"])
def test_every_member_gives_its_own_view(etcd_cluster_factory, version):
    c = etcd_cluster_factory(version=version, size=3)
    r = run_module("etcd_cluster_info", c.module_args())
    assert not r.get("failed"), r.get("msg")
    ids = sorted(m["id"] for m in r["members"])
    assert sorted(v["endpoint"] for v in r["views"]) == sorted(c.client_urls)
    for view in r["views"]:
        assert view["cluster_id"] == r["cluster_id"] and view["member_ids"] == ids, view
        assert view["linearizable"] is True and view["errors"] == []
    assert {v["member_id"] for v in r["views"]} == set(ids)
    assert all(s["cluster_id"] == r["cluster_id"] for s in r["status"])


@pytest.mark.parametrize("version", ["3.4", "3.6"])
def test_a_stranger_among_the_endpoints_is_never_trusted(etcd_cluster_factory, version):
    """A one-member cluster of its own (a member that re-bootstrapped on an empty disk) given
    first: the list most members report wins, and with cluster_id its word never counts."""
    real = etcd_cluster_factory(version=version, size=3)
    fork = etcd_cluster_factory(version=version, size=1)
    real_id = f"{real.endpoint_status()[0]['Status']['header']['cluster_id']:x}"
    fork_id = f"{fork.endpoint_status()[0]['Status']['header']['cluster_id']:x}"
    endpoints = fork.client_urls + real.client_urls
    for args in ({"endpoints": endpoints}, {"endpoints": endpoints, "cluster_id": real_id}):
        r = run_module("etcd_cluster_info", args)
        assert not r.get("failed"), r.get("msg")
        assert r["cluster_id"] == real_id
        assert sorted(m["name"] for m in r["members"]) == ["m1", "m2", "m3"]
        assert r["quorum"]["ok"] and r["quorum"]["healthy_voters"] == 3
        stranger = next(s for s in r["status"] if s["endpoint"] == fork.client_urls[0])
        assert stranger["healthy"] is False and stranger["cluster_id"] == fork_id
        assert f"answers for another cluster, {fork_id}" in stranger["errors"][-1]
        view = next(v for v in r["views"] if v["endpoint"] == fork.client_urls[0])
        assert view["cluster_id"] == fork_id
    # Told to expect the stranger's cluster, only the stranger counts; told an unknown one,
    # nothing does and the module says so.
    r = run_module("etcd_cluster_info", {"endpoints": endpoints, "cluster_id": fork_id})
    assert r["cluster_id"] == fork_id and len(r["members"]) == 1
    r = run_module("etcd_cluster_info", {"endpoints": endpoints, "cluster_id": "1234abcd"})
    assert r.get("failed") and "belong to cluster" in r["msg"], r


def test_a_hung_member_outside_the_endpoints_costs_no_timeout_without_advertised_urls(
    etcd_cluster_factory,
):
    """A member that accepts connections but never answers (SIGSTOP: as a Pod going away can),
    left out of the endpoints: asked through its advertised URL the look waits out the call
    timeout; with advertised_urls off it is reported unhealthy at once."""
    c = etcd_cluster_factory(version="3.6", size=3)
    hung = next(m for m in c.members if m.name != c.leader_name())
    others = [m.client_url for m in c.members if m is not hung]
    os.killpg(hung.proc.pid, signal.SIGSTOP)
    try:
        timings = {}
        for advertised in (True, False):
            args = {"endpoints": others, "timeout": 4, "advertised_urls": advertised}
            started = time.monotonic()
            r = run_module("etcd_cluster_info", args)
            timings[advertised] = time.monotonic() - started
            assert not r.get("failed"), r.get("msg")
            member = next(m for m in r["members"] if m["name"] == hung.name)
            assert member["healthy"] is False and r["quorum"]["healthy_voters"] == 2
        assert timings[True] >= 4, timings
        assert timings[False] < 3, timings
        assert all(s["endpoint"] in others for s in r["status"]), r["status"]
    finally:
        os.killpg(hung.proc.pid, signal.SIGCONT)


@pytest.mark.parametrize("first", [True, False], ids=["hung first", "hung last"])
def test_a_hung_member_among_the_endpoints_costs_one_call_timeout(etcd_cluster_factory, first):
    """A member whose node is lost, asked at its Pod's IP, never answers: its status call
    times out, and nothing else is asked of it (its member list, or the alarms and the version
    through it when it comes first): 3.9 s and 4.5 s here with a 3 s timeout, where it cost
    one timeout per call before (7.6 s and 13.9 s)."""
    c = etcd_cluster_factory(version="3.6", size=3)
    hung = next(m for m in c.members if m.name != c.leader_name())
    others = [m.client_url for m in c.members if m is not hung]
    endpoints = [hung.client_url, *others] if first else [*others, hung.client_url]
    os.killpg(hung.proc.pid, signal.SIGSTOP)
    try:
        args = {"endpoints": endpoints, "timeout": 3, "advertised_urls": False}
        started = time.monotonic()
        r = run_module("etcd_cluster_info", args)
        took = time.monotonic() - started
    finally:
        os.killpg(hung.proc.pid, signal.SIGCONT)
    assert not r.get("failed"), r.get("msg")
    assert took < 6, took
    member = next(m for m in r["members"] if m["name"] == hung.name)
    assert member["healthy"] is False and r["quorum"]["healthy_voters"] == 2
    assert r["cluster_version"] == "3.6.0" and r["alarms"] == []
    view = next(v for v in r["views"] if v["endpoint"] == hung.client_url)
    assert view["errors"][0].startswith("not asked for its member list: "), view
    assert "timed out after 3" in view["errors"][0], view


@pytest.mark.parametrize("tls", [False, True])
def test_addresses_reach_a_member_at_its_ip_and_tls_checks_the_host_name(etcd_cluster_factory, tls):
    """The runbooks reach each member Pod at its IP under its DNS name, which cluster DNS may
    not answer for yet. `.invalid` names resolve nowhere: only the address map reaches them."""
    c = etcd_cluster_factory(version="3.6", size=1, tls=tls)
    port = urlsplit(c.client_urls[0]).port
    unresolvable = "m1.etcd.invalid"
    args = {**c.module_args(), "timeout": 3}
    mapped = {**args, "endpoints": [f"{c.scheme}://{unresolvable}:{port}"]}
    r = run_module("etcd_cluster_info", {**mapped, "addresses": {unresolvable: "127.0.0.1"}})
    if tls:
        # Connected, but the certificate (localhost, 127.0.0.1) is not for that name.
        assert r.get("failed"), r
        assert "hostname verification" in r["msg"].lower(), r["msg"]
        named = {**args, "endpoints": [f"https://localhost:{port}"]}
        r = run_module("etcd_cluster_info", {**named, "addresses": {"localhost": "127.0.0.1"}})
    assert not r.get("failed"), r.get("msg")
    assert r["healthy"] is True and r["quorum"]["ok"] is True
    # Read over HTTP(S), not gRPC: the address map holds there too.
    assert r["cluster_version"] == "3.6.0"
    r = run_module("etcd_cluster_info", mapped)
    assert r.get("failed") and unresolvable in r["msg"], r
    bad = run_module("etcd_cluster_info", {**mapped, "addresses": {unresolvable: "not-an-ip"}})
    assert bad.get("failed") and "must map to an IP address" in bad["msg"], bad


@pytest.mark.parametrize("version", ["3.4", "3.6"])
def test_quorum_lost_is_reported_from_the_survivors_local_view(etcd_cluster_factory, version):
    c = etcd_cluster_factory(version=version, size=3)
    survivor = c.members[0]
    for m in c.members[1:]:
        c.kill_member(m.name)
    r = run_module("etcd_cluster_info", {**c.module_args(), "timeout": 3})
    assert not r.get("failed"), r.get("msg")
    # The survivor may still believe in its leader for an election timeout: 0 or 1 healthy.
    assert r["quorum"]["healthy_voters"] <= 1
    assert {k: r["quorum"][k] for k in ("voters", "needed", "ok")} == {
        "voters": 3,
        "needed": 2,
        "ok": False,
    }
    assert len(r["members"]) == 3 and r["healthy"] is False
    (view,) = [v for v in r["views"] if v["cluster_id"]]
    assert view["endpoint"] == survivor.client_url and len(view["member_ids"]) == 3
    assert all(v["errors"] for v in r["views"] if v is not view), "the dead were asked too"
    # 3.5 and later serve a linearizable member list only with a leader. (3.4 answers from
    # local state whatever is asked, so its flag only says whether it still believed in a
    # leader when asked.)
    if version != "3.4":
        assert view["linearizable"] is False


def test_tls_material_given_as_content_leaves_no_file_behind(etcd_cluster_factory, tmp_path):
    """The role hands the client certificate straight from its Secret: as content."""
    c = etcd_cluster_factory(version="3.6", size=1, tls=True)
    args = {
        "endpoints": c.client_urls,
        "ca_cert_content": Path(str(c.ca_cert)).read_text(),
        "client_cert_content": Path(str(c.client_cert)).read_text(),
        "client_key_content": Path(str(c.client_key)).read_text(),
    }

    # Temporary directories of this test's own: another test process side by side writes
    # (and removes) its files in the shared ones meanwhile.
    roots = [tmp_path / "tmp", tmp_path / "ansible-local", tmp_path / "ansible-remote"]
    for root in roots:
        root.mkdir()
    env = {
        "TMPDIR": str(roots[0]),
        "ANSIBLE_LOCAL_TEMP": str(roots[1]),
        "ANSIBLE_REMOTE_TMP": str(roots[2]),
    }

    def leftovers() -> set[Path]:
        return {p for root in roots for p in root.rglob("etcd-module-*")}

    r = run_module("etcd_cluster_info", args, env=env)
    assert not r.get("failed"), r.get("msg")
    assert r["quorum"]["ok"] and r["cluster_version"] == "3.6.0"
    assert leftovers() == set(), "the module's private files were left behind"
    key = args["client_key_content"]
    assert key not in json.dumps(r), "the key never comes back in the result"
    both = run_module("etcd_cluster_info", {**args, "ca_cert": str(c.ca_cert)})
    assert both.get("failed") and "ca_cert or ca_cert_content" in both["msg"], both
