"""A throwaway CA and the server/peer/client certificates a TLS etcd test cluster needs."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The client certificate's CN must not name an etcd user: with --client-cert-auth etcd takes
# the CN as the user name when no password is given, which would bypass password auth tests.
CLIENT_CN = "etcd-test-client"


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    server_cert: Path  # also the peer certificate: it carries both server and client usage
    server_key: Path
    client_cert: Path
    client_key: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _builder(
    subject: str, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
    )


def make_pki(directory: Path) -> Pki:
    """Write ca.crt, server.{crt,key} and client.{crt,key} into directory."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        _builder("etcd-test-ca", _name("etcd-test-ca"), ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pki = Pki(
        ca_cert=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
    )
    pki.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))

    sans = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    leaves = [
        ("etcd-test-server", pki.server_cert, pki.server_key, True),
        (CLIENT_CN, pki.client_cert, pki.client_key, False),
    ]
    for cn, cert_path, key_path, is_server in leaves:
        key = ec.generate_private_key(ec.SECP256R1())
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = _builder(cn, ca.subject, key).add_extension(
            x509.BasicConstraints(ca=False, path_length=None), critical=True
        )
        if is_server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
            builder = builder.add_extension(sans, critical=False)
        cert = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False).sign(
            ca_key, hashes.SHA256()
        )
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, key_path)
    return pki
