"""Pieces of the etcd fixture and the test bed that need no etcd process."""

import ipaddress

import pytest
from cryptography import x509

from testbed import TestbedError
from testbed.host import etcd_bin_dir, free_port
from tests.etcd_pki import CLIENT_CN, make_pki


def test_unbuildable_version_fails_with_the_build_error():
    with pytest.raises(TestbedError, match=r"hack/etcd-bin 9\.9\.1 failed") as info:
        etcd_bin_dir("9.9.1")
    assert "unsupported minor 9.9" in str(info.value)


def test_free_ports_are_never_handed_out_twice():
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)


def test_pki_server_certificate_covers_loopback(tmp_path):
    pki = make_pki(tmp_path)
    server = x509.load_pem_x509_certificate(pki.server_cert.read_bytes())
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    client = x509.load_pem_x509_certificate(pki.client_cert.read_bytes())
    assert client.subject.rfc4514_string() == f"CN={CLIENT_CN}"
    assert oct(pki.client_key.stat().st_mode & 0o777) == "0o600"


def test_test_processes_side_by_side_take_ports_from_blocks_of_their_own(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    ports = [free_port() for _ in range(50)]
    assert all(26000 <= p < 32000 for p in ports) and len(set(ports)) == len(ports)
    # A worker whose block would reach the kernel's ephemeral range asks the kernel instead.
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw9")
    assert free_port() > 0
