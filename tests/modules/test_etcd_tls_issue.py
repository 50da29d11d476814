"""etcd_tls_issue's material used by real etcd: members serve and talk to each other with its
certificates, its client certificate is let in, and one from another CA is not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from etcd_runbook.clients.etcd_client import EtcdClient
from etcd_runbook.clients.etcd_common import ConnectionParams
from etcd_runbook.clients.etcd_errors import EtcdModuleError
from etcd_runbook.rules import etcd_manifests
from testbed.ansible_adhoc import run_module
from testbed.host import etcd_bin_dir
from tests.etcd_cluster import EtcdCluster
from tests.etcd_pki import Pki

pytestmark = pytest.mark.etcd


def role_profiles() -> dict[str, Any]:
    """What the role passes: etcd_cert_profiles of a cluster `e` in namespace `ns`."""
    return dict(
        etcd_manifests.cert_profiles({"name": "e", "namespace": "ns", "domain": "cluster.local"})
    )


def issue(args: dict[str, Any], check: bool = False) -> dict[str, Any]:
    result = run_module("etcd_tls_issue", args, check=check)
    assert not result.get("failed"), result.get("msg")
    return result


def write_pki(directory: Path, server: dict[str, str], client: dict[str, str]) -> Pki:
    """The fixture's layout; the server certificate is the peer certificate too, as the
    fixture's own is (the role's peer profile names only in-cluster DNS, not loopback)."""
    directory.mkdir(parents=True)
    files = {
        "ca.crt": server["ca.crt"],
        "server.crt": server["tls.crt"],
        "server.key": server["tls.key"],
        "client.crt": client["tls.crt"],
        "client.key": client["tls.key"],
    }
    for name, text in files.items():
        (directory / name).write_text(text)
        (directory / name).chmod(0o600)
    return Pki(
        ca_cert=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
    )


def client_params(c: EtcdCluster, client: dict[str, str]) -> ConnectionParams:
    return ConnectionParams.from_module_params(
        {
            "endpoints": c.client_urls,
            "ca_cert_content": client["ca.crt"],
            "client_cert_content": client["tls.crt"],
            "client_key_content": client["tls.key"],
            "timeout": 5,
        }
    )


def test_etcd_serves_and_admits_with_the_issued_material(etcd_cluster_factory, tmp_path):
    profiles = role_profiles()
    made = issue({"ca_common_name": "e.ns etcd CA", "profiles": profiles})
    assert made["changed"] and made["new_ca"] is True
    assert made["issued"] == ["ca", "peer", "server", "client"]
    material = made["material"]

    c = EtcdCluster(
        etcd_bin_dir("3.5"),
        tmp_path / "etcd",
        pki=write_pki(tmp_path / "pki", material["server"], material["client"]),
    )
    etcd_cluster_factory.clusters.append(c)  # killed with the factory's clusters
    # Three members: peers dial each other with the issued certificate, and the bootstrap
    # waits on etcdctl with the issued client certificate.
    c.bootstrap(3)

    c.put("tls/issued", "by etcd_tls_issue")
    assert c.get("tls/issued") == "by etcd_tls_issue"
    with EtcdClient(client_params(c, material["client"])) as client:
        assert sorted(m.name for m in client.member_list()) == ["m1", "m2", "m3"]

    # The missing-certificate path: a new client certificate from the CA in place.
    again = issue({"ca": material["ca"], "profiles": profiles, "issue": ["client"]})
    assert again["new_ca"] is False and again["issued"] == ["client"]
    reissued = again["material"]["client"]
    assert reissued["ca.crt"] == material["ca"]["tls.crt"]
    with EtcdClient(client_params(c, reissued)) as client:
        assert len(client.member_list()) == 3

    # A client certificate from another CA (same profile, same common name) is refused.
    other = issue({"ca_common_name": "e.ns etcd CA", "profiles": profiles, "issue": ["client"]})
    foreign = {**other["material"]["client"], "ca.crt": material["ca"]["tls.crt"]}
    (tmp_path / "foreign.crt").write_text(foreign["tls.crt"])
    (tmp_path / "foreign.key").write_text(foreign["tls.key"])
    refused = c.etcdctl(
        "--command-timeout=3s",
        f"--cert={tmp_path / 'foreign.crt'}",
        f"--key={tmp_path / 'foreign.key'}",
        "get",
        "tls/issued",
        client_cert=False,
        check=False,
    )
    assert refused.returncode != 0, refused.stdout
    assert "by etcd_tls_issue" not in refused.stdout
    with pytest.raises(EtcdModuleError) as raised, EtcdClient(client_params(c, foreign)) as client:
        client.member_list()
    assert raised.value.reason in {"TLSError", "Unreachable"}, raised.value.message
    logs = "".join(m.log_path.read_text() for m in c.members)
    assert "certificate signed by unknown authority" in logs


def test_check_mode_issues_and_a_bad_ca_fails_clearly():
    profiles = role_profiles()
    checked = issue({"ca_common_name": "e.ns etcd CA", "profiles": profiles}, check=True)
    assert checked["changed"] and checked["issued"] == ["ca", "peer", "server", "client"]

    ca = checked["material"]["ca"]
    other = checked["material"]["client"]
    bad = run_module(
        "etcd_tls_issue",
        {"ca": {**ca, "tls.key": other["tls.key"]}, "profiles": profiles, "issue": ["client"]},
    )
    assert bad.get("failed") and bad["reason"] == "InvalidTLSInput", bad
    assert "is not the private key of the CA certificate CN=e.ns etcd CA" in bad["msg"]
    assert "material" not in bad

    nothing = issue({"ca": ca, "profiles": profiles, "issue": []})
    assert nothing["changed"] is False and nothing["material"] == {}
