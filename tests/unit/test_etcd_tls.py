"""etcd_runbook/clients/etcd_tls.py: the CA and certificates etcd_tls_issue makes, checked with
cryptography's own path validation, on the profiles the role really passes."""

from __future__ import annotations

import datetime
import ipaddress
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import (
    Criticality,
    ExtensionPolicy,
    PolicyBuilder,
    Store,
    VerificationError,
)

from etcd_runbook.clients.etcd_tls import (
    EtcdTlsError,
    cert_pem,
    create_ca,
    issue_cert,
    issue_material,
    key_pem,
    profile_of,
)
from etcd_runbook.rules import etcd_manifests

NOW = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
DAY = datetime.timedelta(days=1)


def _role_profiles() -> dict[str, Any]:
    return dict(
        etcd_manifests.cert_profiles({"name": "e", "namespace": "ns", "domain": "cluster.local"})
    )


PROFILES = _role_profiles()


def issue(**kwargs: Any) -> Any:
    args: dict[str, Any] = {
        "ca": None,
        "ca_common_name": "e.ns etcd CA",
        "ca_days": 3650,
        "cert_days": 825,
        "profiles": PROFILES,
        "issue": None,
        "now": NOW,
    }
    return issue_material(**{**args, **kwargs})


@pytest.fixture(scope="module")
def fresh() -> Any:
    return issue()


def cert(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode())


def ext(c: x509.Certificate, kind: type) -> Any:
    return c.extensions.get_extension_for_class(kind)


# The web PKI policy cryptography verifies with wants a SAN in every certificate; etcd (Go's
# crypto/x509) does not, and the role's client certificate has none.
SAN_OPTIONAL = ExtensionPolicy.webpki_defaults_ee().may_be_present(
    x509.SubjectAlternativeName, Criticality.AGNOSTIC, None
)


def as_server(ca: x509.Certificate, name: Any, at: datetime.datetime = NOW) -> Any:
    return PolicyBuilder().store(Store([ca])).time(at).build_server_verifier(name)


def as_client(ca: x509.Certificate, at: datetime.datetime = NOW) -> Any:
    return (
        PolicyBuilder()
        .store(Store([ca]))
        .time(at)
        .extension_policies(ca_policy=ExtensionPolicy.webpki_defaults_ca(), ee_policy=SAN_OPTIONAL)
        .build_client_verifier()
    )


def test_a_new_ca_and_every_profile_in_order(fresh):
    assert fresh.new_ca is True
    assert fresh.issued == ["ca", "peer", "server", "client"]
    for purpose, data in fresh.material.items():
        assert set(data) == {"tls.crt", "tls.key", "ca.crt"}, purpose
        assert data["ca.crt"] == fresh.material["ca"]["tls.crt"], purpose


def test_the_ca():
    material = issue(issue=[]).material
    assert list(material) == ["ca"]
    ca = cert(material["ca"]["tls.crt"])
    assert ca.subject.rfc4514_string() == "CN=e.ns etcd CA" == ca.issuer.rfc4514_string()
    ca.verify_directly_issued_by(ca)
    constraints = ext(ca, x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca
    usage = ext(ca, x509.KeyUsage)
    assert usage.critical
    assert usage.value.key_cert_sign and usage.value.crl_sign and usage.value.digital_signature
    assert not usage.value.key_encipherment
    public = ca.public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey) and public.curve.name == "secp256r1"
    assert ca.not_valid_after_utc == NOW + 3650 * DAY


@pytest.mark.parametrize(
    ("purpose", "server_name"),
    [
        ("peer", "e-0.e.ns.svc.cluster.local"),
        ("peer", "e-9.e.ns.svc"),
        ("server", "e-client.ns.svc"),
        ("server", "localhost"),
        ("server", "127.0.0.1"),
        ("server", "::1"),
        ("client", None),
    ],
)
def test_each_certificate_verifies_for_its_use(fresh, purpose, server_name):
    """Every profile is a client (peers dial each other, the server dials its own gRPC
    gateway); peer and server also serve under the names etcd is reached by."""
    ca = cert(fresh.material["ca"]["tls.crt"])
    leaf = cert(fresh.material[purpose]["tls.crt"])
    leaf.verify_directly_issued_by(ca)
    if server_name is not None:
        try:
            name: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(server_name))
        except ValueError:
            name = x509.DNSName(server_name)
        as_server(ca, name).verify(leaf, [])
    as_client(ca).verify(leaf, [])


@pytest.mark.parametrize("purpose", ["peer", "server", "client"])
def test_sans_usages_and_lifetime_are_the_profiles(fresh, purpose):
    profile = PROFILES[purpose]
    leaf = cert(fresh.material[purpose]["tls.crt"])
    assert leaf.subject.rfc4514_string() == f"CN={profile['common_name']}"
    try:
        names = ext(leaf, x509.SubjectAlternativeName).value
        sans = [f"DNS:{n}" for n in names.get_values_for_type(x509.DNSName)]
        sans += [f"IP:{n}" for n in names.get_values_for_type(x509.IPAddress)]
    except x509.ExtensionNotFound:
        sans = []
    assert sans == profile["sans"]
    oids = {
        "serverAuth": ExtendedKeyUsageOID.SERVER_AUTH,
        "clientAuth": ExtendedKeyUsageOID.CLIENT_AUTH,
    }
    assert list(ext(leaf, x509.ExtendedKeyUsage).value) == [oids[u] for u in profile["usage"]]
    usage = ext(leaf, x509.KeyUsage).value
    assert usage.digital_signature and usage.key_encipherment and not usage.key_cert_sign
    assert ext(leaf, x509.BasicConstraints).value.ca is False
    assert leaf.not_valid_after_utc == NOW + 825 * DAY
    assert leaf.not_valid_before_utc < NOW


def test_a_server_name_not_in_the_profile_is_refused(fresh):
    ca = cert(fresh.material["ca"]["tls.crt"])
    leaf = cert(fresh.material["server"]["tls.crt"])
    with pytest.raises(VerificationError):
        as_server(ca, x509.DNSName("e-10.e.ns.svc")).verify(leaf, [])
    # The client certificate has clientAuth only: no server may present it.
    client = cert(fresh.material["client"]["tls.crt"])
    with pytest.raises(VerificationError):
        as_server(ca, x509.DNSName("localhost")).verify(client, [])


def test_expired_after_cert_days(fresh):
    ca = cert(fresh.material["ca"]["tls.crt"])
    leaf = cert(fresh.material["client"]["tls.crt"])
    as_client(ca, NOW + 824 * DAY).verify(leaf, [])
    with pytest.raises(VerificationError):
        as_client(ca, NOW + 826 * DAY).verify(leaf, [])


@pytest.mark.parametrize("purpose", ["ca", "peer", "server", "client"])
def test_keys_are_unencrypted_pkcs8_p256_of_their_certificate(fresh, purpose):
    data = fresh.material[purpose]
    assert data["tls.key"].startswith("-----BEGIN PRIVATE KEY-----\n")
    key = serialization.load_pem_private_key(data["tls.key"].encode(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(*spki) == cert(data["tls.crt"]).public_key().public_bytes(
        *spki
    )


def test_a_given_ca_is_used_not_remade(fresh):
    given = fresh.material["ca"]
    again = issue(ca=given, ca_common_name=None, issue=["client", "server"])
    assert again.new_ca is False
    assert again.issued == ["client", "server"]
    ca = cert(given["tls.crt"])
    for data in again.material.values():
        assert cert(data["ca.crt"]) == ca
        as_client(ca).verify(cert(data["tls.crt"]), [])
    # A new key each time: nothing of the earlier certificate is reused.
    assert again.material["client"]["tls.key"] != fresh.material["client"]["tls.key"]


def test_nothing_to_issue_with_a_given_ca(fresh):
    made = issue(ca=fresh.material["ca"], issue=[])
    assert made.material == {} and made.issued == [] and made.new_ca is False


def test_issue_is_deduplicated_and_keeps_its_order():
    assert issue(issue=["client", "peer", "client"]).issued == ["ca", "client", "peer"]


def test_a_given_rsa_ca_signs_too():
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "rsa CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(NOW - DAY)
        .not_valid_after(NOW + DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    made = issue(ca={"tls.crt": cert_pem(ca), "tls.key": key_pem(key)}, issue=["client"])
    cert(made.material["client"]["tls.crt"]).verify_directly_issued_by(ca)


def _other_ca() -> Any:
    return create_ca("other CA", 10, NOW)


def _bad_cas() -> list[tuple[str, Any, str]]:
    good = create_ca("good CA", 10, NOW)
    other = _other_ca()
    leaf_cert, leaf_key = issue_cert(good, profile_of("client", PROFILES["client"]), 10, NOW)
    expired = create_ca("old CA", 1, NOW - 30 * DAY)
    encrypted = good.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    ).decode()
    good_crt = cert_pem(good.cert)
    return [
        ("garbage key", {"tls.crt": good_crt, "tls.key": "not a key"}, "not an unencrypted PEM"),
        ("encrypted key", {"tls.crt": good_crt, "tls.key": encrypted}, "not an unencrypted PEM"),
        (
            "another CA's key",
            {"tls.crt": good_crt, "tls.key": key_pem(other.key)},
            "is not the private key of the CA certificate CN=good CA",
        ),
        ("garbage cert", {"tls.crt": "nope", "tls.key": key_pem(good.key)}, "not a PEM cert"),
        (
            "a leaf as CA",
            {"tls.crt": cert_pem(leaf_cert), "tls.key": key_pem(leaf_key)},
            "is not a CA certificate",
        ),
        (
            "expired CA",
            {"tls.crt": cert_pem(expired.cert), "tls.key": key_pem(expired.key)},
            "CA CN=old CA expired on",
        ),
        ("key only", {"tls.crt": None, "tls.key": key_pem(good.key)}, "needs both"),
        ("cert only", {"tls.crt": good_crt}, "needs both"),
    ]


@pytest.mark.parametrize(
    ("ca", "message"), [c[1:] for c in _bad_cas()], ids=[c[0] for c in _bad_cas()]
)
def test_a_bad_ca_is_refused_clearly(ca, message):
    with pytest.raises(EtcdTlsError, match=message) as raised:
        issue(ca=ca)
    assert raised.value.as_result()["reason"] == "InvalidTLSInput"


def _with(purpose: str, **changes: Any) -> dict[str, Any]:
    return {**PROFILES, purpose: {**PROFILES[purpose], **changes}}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"issue": ["server", "metrics"]}, r"issue names \['metrics'\], which profiles does not"),
        ({"issue": ["ca"], "profiles": {**PROFILES, "ca": {}}}, "'ca' is not a certificate"),
        ({"profiles": _with("server", san=[])}, r"unknown keys \['san'\]"),
        ({"profiles": _with("server", sans=["localhost"])}, "neither 'DNS:name' nor 'IP:"),
        ({"profiles": _with("server", sans=["IP:300.1.1.1"])}, "is not an IP address"),
        ({"profiles": _with("server", sans=["email:a@b"])}, "neither 'DNS:name'"),
        ({"profiles": _with("server", sans="DNS:x")}, "sans must be a list of strings"),
        ({"profiles": _with("client", usage=["codeSigning"])}, "'codeSigning' is not one of"),
        ({"profiles": _with("client", usage=[])}, "usage must name serverAuth"),
        ({"profiles": _with("client", common_name="")}, "common_name must be a non-empty"),
        ({"profiles": {"client": "etcd"}}, "profiles.client must be a dict"),
        ({"ca_common_name": None}, "needs a common name"),
        ({"ca_days": 0}, "ca_days must be a whole number of days"),
        ({"cert_days": -1}, "cert_days must be a whole number of days"),
    ],
)
def test_bad_input_is_refused_before_anything_is_made(kwargs, message):
    with pytest.raises(EtcdTlsError, match=message):
        issue(**kwargs)


def test_sans_are_written_like_community_crypto():
    made = issue(
        profiles={
            "x": {
                "common_name": "x",
                "sans": ["dns:a.example", "IP:10.0.0.1"],
                "usage": ["serverAuth"],
            }
        },
    )
    names = ext(cert(made.material["x"]["tls.crt"]), x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["a.example"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.1")]
