"""The real-etcd fixture itself: every supported version comes up, TLS and auth are enforced.

A version whose binaries cannot be built makes these tests fail with the build's error
(etcd_bin_dir raises); nothing here skips.
"""

import pytest

from testbed.host import etcd_bin_dir
from tests.etcd_cluster import EtcdClusterError, EtcdctlError

pytestmark = pytest.mark.etcd


@pytest.mark.parametrize("minor", ["3.4", "3.5", "3.6"])
def test_plain_cluster_of_each_minor(etcd_cluster_factory, minor):
    c = etcd_cluster_factory(version=minor, size=3)

    assert c.version.startswith(minor + ".")
    assert {s["Status"]["version"] for s in c.endpoint_status()} == {c.version}
    c.put("smoke/key", "value with spaces")
    assert c.get("smoke/key") == "value with spaces"
    assert c.get("smoke/missing") is None
    members = c.member_list()
    assert sorted(m["name"] for m in members) == ["m1", "m2", "m3"]
    assert all(len(m["id"]) > 0 and int(m["id"], 16) > 0 for m in members)
    assert c.leader_name() in {"m1", "m2", "m3"}
    assert c.module_args() == {"endpoints": c.client_urls}


@pytest.mark.parametrize("minor", ["3.4", "3.5", "3.6"])
def test_tls_cluster_requires_a_client_certificate(etcd_cluster_factory, minor):
    c = etcd_cluster_factory(version=minor, size=1, tls=True)

    assert all(url.startswith("https://127.0.0.1:") for url in c.client_urls)
    c.put("tls/key", "v")
    assert c.get("tls/key") == "v"
    args = c.module_args()
    assert set(args) == {"endpoints", "ca_cert", "client_cert", "client_key"}

    refused = c.etcdctl("--command-timeout=3s", "get", "tls/key", client_cert=False, check=False)
    assert refused.returncode != 0, refused.stdout
    assert "client didn't provide a certificate" in c.members[0].log_path.read_text()


@pytest.mark.parametrize("minor", ["3.4", "3.5", "3.6"])
def test_auth_cluster_requires_the_password(etcd_cluster_factory, minor):
    c = etcd_cluster_factory(version=minor, size=1, auth=True)

    assert c.user == "root" and c.password
    c.put("auth/key", "v")
    assert c.get("auth/key") == "v"
    assert c.module_args()["password"] == c.password

    anonymous = c.etcdctl("put", "auth/key", "x", auth=False, check=False)
    assert anonymous.returncode != 0
    assert "user name is empty" in anonymous.stderr or "permission denied" in anonymous.stderr
    real = c.password
    c.password = real + "-wrong"
    with pytest.raises(EtcdctlError, match="authentication failed"):
        c.get("auth/key")
    c.password = real
    assert c.get("auth/key") == "v"


def test_stop_kill_and_rejoin(etcd_cluster_factory):
    c = etcd_cluster_factory(version="3.5", size=3)
    leader = c.leader_name()
    follower = next(m.name for m in c.members if m.name != leader)

    c.kill_member(follower)
    assert len(c.client_urls) == 2
    c.wait_healthy(30)
    c.put("k", "written while a member is down")

    c.restart_member(follower)
    c.wait_healthy(30)
    assert c.get("k") == "written while a member is down"
    on_follower = c.etcdctl(
        "get", "k", "--print-value-only", endpoints=[c.member(follower).client_url]
    )
    assert on_follower.stdout.strip() == "written while a member is down"


def test_learner_joins_through_allocate_and_start(etcd_cluster_factory):
    c = etcd_cluster_factory(version="3.5", size=1)
    m = c.allocate_member("m2")
    c.etcdctl("member", "add", "m2", f"--peer-urls={m.peer_url}", "--learner")

    c.start_member(m)
    c.wait_healthy(30)
    learners = [e for e in c.member_list() if e["is_learner"]]
    assert [e["name"] for e in learners] == ["m2"]
    assert m.running


def test_failed_start_reports_the_member_log(etcd_cluster_factory):
    c = etcd_cluster_factory(version="3.5", size=1)
    ghost = c.allocate_member("ghost")
    # Joining as "existing" without a member add first: etcd refuses and exits.
    c.start_member(ghost)
    with pytest.raises(EtcdClusterError, match="ghost") as info:
        c.wait_healthy(20)
    assert "--- ghost" in str(info.value)


@pytest.mark.parametrize("minor", ["3.4", "3.5", "3.6"])
def test_cluster_from_a_restored_data_dir(etcd_cluster_factory, tmp_path, minor):
    c = etcd_cluster_factory(version=minor, size=1)
    c.put("restore/key", "before snapshot")
    snap = tmp_path / "snap.db"
    c.etcdctl("snapshot", "save", str(snap))
    c.put("restore/key", "after snapshot")

    peer = etcd_cluster_factory.free_url()
    data = tmp_path / "restored"
    restore = ["snapshot", "restore", str(snap), "--name", "r1", "--data-dir", str(data)]
    restore += ["--initial-cluster", f"r1={peer}", "--initial-advertise-peer-urls", peer]
    if minor == "3.4":  # 3.4 has no etcdutl
        c.etcdctl(*restore)
    else:
        c.etcdutl(*restore)
    r = etcd_cluster_factory.from_data_dir(minor, data, "r1", peer)

    assert r.get("restore/key") == "before snapshot"
    assert [m["name"] for m in r.member_list()] == ["r1"]
    assert r.member_list()[0]["peer_urls"] == [peer]


def test_restart_member_with_the_next_minor(etcd_cluster_factory):
    c = etcd_cluster_factory(version="3.5", size=3)
    c.put("upgrade/key", "kept")
    newer = etcd_bin_dir("3.6").name

    for m in c.members:
        c.stop_member(m.name)
        c.restart_member(m.name, version="3.6")
        c.wait_healthy(60)

    assert {s["Status"]["version"] for s in c.endpoint_status()} == {newer}
    assert c.get("upgrade/key") == "kept"
