"""An etcd cluster's TLS material made in one process: a CA and the certificates it signs.

One process because community.crypto's privatekey/CSR/certificate pipes cost three module
processes per certificate (~8 s of a new cluster's first run). Each step is a small function
over `cryptography`, and the
result is already shaped as kubernetes.io/tls Secret data ({'tls.crt', 'tls.key', 'ca.crt'},
PEM; keys PKCS#8 without a password, which is what etcd reads).

Profiles have the shape `etcd_cert_profiles` (etcd_runbook/rules/etcd_manifests.py) gives them:
{'common_name': str, 'sans': ['DNS:name', 'IP:1.2.3.4', ...], 'usage': ['serverAuth', ...]}.
Every problem with the input is an `EtcdTlsError`.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from etcd_runbook.clients.etcd_errors import EtcdInputError

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError as exc:  # reported by issue_material(), where a module can fail_json on it
    IMPORT_ERROR: ImportError | None = exc
else:
    IMPORT_ERROR = None

# Certificates start a little in the past: the nodes' clocks may lag the operator's, and a
# certificate that is not yet valid fails every handshake until they catch up.
BACKDATE = datetime.timedelta(minutes=5)
PROFILE_KEYS = frozenset({"common_name", "sans", "usage"})
# Extended key usages a profile may ask for, as community.crypto spells them.
USAGES = {"serverAuth": "SERVER_AUTH", "clientAuth": "CLIENT_AUTH"}


class EtcdTlsError(EtcdInputError):
    """The CA, a profile or a lifetime given cannot make valid TLS material."""

    reason = "InvalidTLSInput"


@dataclass(frozen=True)
class Authority:
    """A CA: its certificate and the private key that signs with it."""

    cert: Any  # x509.Certificate
    key: Any  # a private key cryptography can sign with


@dataclass(frozen=True)
class Profile:
    common_name: str
    sans: tuple[str, ...]
    usage: tuple[str, ...]


@dataclass(frozen=True)
class Issued:
    """What `issue_material` made: Secret data per purpose ('ca' first when it is new)."""

    material: dict[str, dict[str, str]]
    new_ca: bool

    @property
    def issued(self) -> list[str]:
        return list(self.material)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _name(common_name: str) -> Any:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _check_days(days: int, what: str) -> None:
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise EtcdTlsError(f"{what} must be a whole number of days, at least 1; got {days!r}")


def _new_key() -> Any:
    return ec.generate_private_key(ec.SECP256R1())


def _signing_hash(key: Any) -> Any:
    # Ed25519/Ed448 sign the message itself: cryptography wants no hash for them.
    if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return None
    if isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        return hashes.SHA256()
    raise EtcdTlsError(f"the CA key is a {type(key).__name__}, which cannot sign certificates")


def _key_usage(*, signing: bool, encipherment: bool) -> Any:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signing,
        crl_sign=signing,
        encipher_only=False,
        decipher_only=False,
    )


def _builder(common_name: str, key: Any, days: int, now: datetime.datetime) -> Any:
    return (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )


def create_ca(common_name: str, days: int, now: datetime.datetime | None = None) -> Authority:
    """A new self-signed ECDSA P-256 CA valid for `days`."""
    if not common_name:
        raise EtcdTlsError("the new CA needs a common name (ca_common_name)")
    _check_days(days, "ca_days")
    key = _new_key()
    cert = (
        _builder(common_name, key, days, now or _now())
        .issuer_name(_name(common_name))
        # This CA signs leaf certificates only: path length 0 forbids intermediate CAs.
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signing=True, encipherment=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Authority(cert=cert, key=key)


def load_ca(cert_pem: str, key_pem: str, now: datetime.datetime | None = None) -> Authority:
    """An existing CA from PEM, checked: the key is the certificate's, the certificate is a
    CA and has not expired."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
    except ValueError as exc:
        raise EtcdTlsError(f"ca['tls.crt'] is not a PEM certificate: {exc}") from exc
    try:
        key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise EtcdTlsError(f"ca['tls.key'] is not an unencrypted PEM private key: {exc}") from exc
    subject = cert.subject.rfc4514_string()
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*spki) != cert.public_key().public_bytes(*spki):
        raise EtcdTlsError(f"ca['tls.key'] is not the private key of the CA certificate {subject}")
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if not is_ca:
        raise EtcdTlsError(f"ca['tls.crt'] ({subject}) is not a CA certificate (no CA:TRUE)")
    if cert.not_valid_after_utc <= (now or _now()):
        raise EtcdTlsError(
            f"the CA {subject} expired on {cert.not_valid_after_utc.isoformat()}: "
            "certificates it signs would not be trusted"
        )
    _signing_hash(key)
    return Authority(cert=cert, key=key)


def profile_of(purpose: str, raw: Any) -> Profile:
    """A profile dict as etcd_cert_profiles gives it, checked."""
    where = f"profiles.{purpose}"
    if not isinstance(raw, Mapping):
        raise EtcdTlsError(f"{where} must be a dict with common_name, sans and usage")
    unknown = sorted(set(raw) - PROFILE_KEYS)
    if unknown:
        raise EtcdTlsError(f"{where} has unknown keys {unknown}; known: {sorted(PROFILE_KEYS)}")
    common_name = raw.get("common_name")
    if not isinstance(common_name, str) or not common_name:
        raise EtcdTlsError(f"{where}.common_name must be a non-empty string")
    sans, usage = raw.get("sans") or [], raw.get("usage") or []
    for field, value in (("sans", sans), ("usage", usage)):
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise EtcdTlsError(f"{where}.{field} must be a list of strings")
    if not usage:
        raise EtcdTlsError(f"{where}.usage must name serverAuth and/or clientAuth")
    for name in usage:
        if name not in USAGES:
            raise EtcdTlsError(f"{where}.usage: {name!r} is not one of {sorted(USAGES)}")
    for san in sans:
        parse_san(san, where)
    return Profile(common_name=common_name, sans=tuple(sans), usage=tuple(usage))


def parse_san(san: str, where: str = "sans") -> Any:
    """'DNS:name' or 'IP:address' (community.crypto's spelling) as an x509 general name."""
    kind, _, value = san.partition(":")
    if kind.upper() == "DNS" and value:
        return x509.DNSName(value)
    if kind.upper() == "IP":
        try:
            return x509.IPAddress(ipaddress.ip_address(value))
        except ValueError as exc:
            raise EtcdTlsError(f"{where}: {san!r} is not an IP address") from exc
    raise EtcdTlsError(f"{where}: {san!r} is neither 'DNS:name' nor 'IP:address'")


def issue_cert(
    ca: Authority, profile: Profile, days: int, now: datetime.datetime | None = None
) -> tuple[Any, Any]:
    """A new ECDSA P-256 key and its certificate for `profile`, signed by `ca`."""
    _check_days(days, "cert_days")
    key = _new_key()
    usages = [getattr(ExtendedKeyUsageOID, USAGES[u]) for u in profile.usage]
    builder = (
        _builder(profile.common_name, key, days, now or _now())
        .issuer_name(ca.cert.subject)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signing=False, encipherment=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    if profile.sans:
        names = [parse_san(s) for s in profile.sans]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca.key, _signing_hash(ca.key)), key


def cert_pem(cert: Any) -> str:
    return str(cert.public_bytes(serialization.Encoding.PEM).decode())


def key_pem(key: Any) -> str:
    return str(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
    )


def secret_data(cert: Any, key: Any, ca_cert: Any) -> dict[str, str]:
    """kubernetes.io/tls Secret data (stringData) of one certificate."""
    return {"tls.crt": cert_pem(cert), "tls.key": key_pem(key), "ca.crt": cert_pem(ca_cert)}


def issue_material(
    *,
    ca: Mapping[str, Any] | None,
    ca_common_name: str | None,
    ca_days: int,
    cert_days: int,
    profiles: Mapping[str, Any],
    issue: Sequence[str] | None,
    now: datetime.datetime | None = None,
) -> Issued:
    """Load `ca` (its 'tls.crt' and 'tls.key'), or create a CA when it has neither, then issue
    a certificate for each purpose in `issue` (default: every profile, in order)."""
    if IMPORT_ERROR is not None:
        raise EtcdTlsError(
            f"the Python package 'cryptography' is missing for this interpreter: {IMPORT_ERROR}"
        )
    now = now or _now()
    if not isinstance(profiles, Mapping):
        raise EtcdTlsError("profiles must be a dict of purpose -> profile")
    purposes = list(profiles) if issue is None else list(dict.fromkeys(issue))
    undefined = [p for p in purposes if p not in profiles]
    if undefined:
        raise EtcdTlsError(f"issue names {undefined}, which profiles does not define")
    if "ca" in purposes:
        raise EtcdTlsError("'ca' is not a certificate purpose: leave ca empty for a new CA")
    checked = {p: profile_of(p, profiles[p]) for p in purposes}
    _check_days(cert_days, "cert_days")
    cert_text, key_text = (ca or {}).get("tls.crt"), (ca or {}).get("tls.key")
    material: dict[str, dict[str, str]] = {}
    if cert_text and key_text:
        authority = load_ca(cert_text, key_text, now)
    elif cert_text or key_text:
        raise EtcdTlsError("ca needs both 'tls.crt' and 'tls.key', or neither for a new CA")
    else:
        authority = create_ca(ca_common_name or "", ca_days, now)
        material["ca"] = secret_data(authority.cert, authority.key, authority.cert)
    for purpose, profile in checked.items():
        cert, key = issue_cert(authority, profile, cert_days, now)
        material[purpose] = secret_data(cert, key, authority.cert)
    return Issued(material=material, new_ca="ca" in material)
