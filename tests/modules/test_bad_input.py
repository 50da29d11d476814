"""Bad input to the etcd modules: a clear failure that says what is wrong, and no change."""

from __future__ import annotations

import pytest

from testbed.ansible_adhoc import run_module
from testbed.host import free_port
from tests.etcd_pki import make_pki

pytestmark = pytest.mark.etcd


def membership(c) -> list[tuple[str, str, bool]]:
    return sorted((m["id"], m["name"], m["is_learner"]) for m in c.member_list())


def test_unreachable_endpoint_names_the_url_and_why():
    url = f"http://127.0.0.1:{free_port()}"
    for module, extra in (
        ("etcd_member", {"name": "m4", "peer_urls": ["http://127.0.0.1:2380"], "learner": True}),
        ("etcd_cluster_info", {}),
    ):
        r = run_module(module, {"endpoints": [url], "timeout": 3, **extra})
        assert r.get("failed") and r["reason"] == "Unreachable", r.get("msg")
        assert url in r["msg"] and "connection refused" in r["msg"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ({"endpoints": ["127.0.0.1:2379"]}, "is not a URL like https://"),
        ({"endpoints": ["http://127.0.0.1"]}, "it has no port"),
        ({"endpoints": ["http://127.0.0.1:1"], "peer_urls": ["http//127.0.0.1:2380"]}, "peer URL"),
        ({"endpoints": ["http://127.0.0.1:1"], "user": "root"}, "password"),
    ],
)
def test_malformed_input_is_refused_before_connecting(args, words):
    r = run_module("etcd_member", {"name": "m4", **args})
    assert r.get("failed"), r
    assert words in r["msg"]


def test_secured_cluster_with_wrong_ca_or_password(etcd_cluster_factory, tmp_path):
    c = etcd_cluster_factory(version="3.5", size=3, tls=True, auth=True)
    before = membership(c)
    add = {"name": "m4", "peer_urls": ["https://127.0.0.1:1"], "learner": True, "timeout": 5}

    wrong_ca = make_pki(tmp_path / "other").ca_cert
    r = run_module("etcd_member", {**c.module_args(), **add, "ca_cert": str(wrong_ca)})
    assert r.get("failed") and r["reason"] == "TLSError", r.get("msg")
    assert "TLS handshake failed" in r["msg"] and "ca_cert" in r["msg"]
    assert c.client_urls[0] in r["msg"]

    r = run_module("etcd_member", {**c.module_args(), **add, "password": "wrong"})
    assert r.get("failed") and r["reason"] == "AuthFailed", r.get("msg")
    assert "user name or password" in r["msg"]
    assert "wrong" not in r["msg"]

    anonymous = {k: v for k, v in c.module_args().items() if k not in ("user", "password")}
    r = run_module("etcd_member", {**anonymous, **add})
    # With client certificates etcd takes the certificate's CN as the user.
    assert r.get("failed") and r["reason"] == "AuthFailed", r.get("msg")
    assert "no such user" in r["msg"] and "common name" in r["msg"]

    r = run_module("etcd_member", {**c.module_args(), **add, "endpoints": ["http://127.0.0.1:1"]})
    assert r.get("failed") and "https://" in r["msg"], r.get("msg")

    assert membership(c) == before


def test_unknown_member_absent_is_ok_and_says_so(etcd_cluster_factory):
    c = etcd_cluster_factory(version="3.5", size=1)
    before = membership(c)
    r = run_module("etcd_member", {**c.module_args(), "name": "nope", "state": "absent"})
    assert not r.get("failed") and r["changed"] is False, r.get("msg")
    assert "no member named nope exists" in r["msg"]
    assert membership(c) == before

    # A peer URL that belongs to another member is an error, not a second member.
    m1 = c.member("m1")
    r = run_module("etcd_member", {**c.module_args(), "name": "m9", "peer_urls": [m1.peer_url]})
    assert r.get("failed") and "belong to member m1" in r["msg"], r.get("msg")
    assert membership(c) == before
