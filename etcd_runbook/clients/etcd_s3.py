"""An S3-compatible object store for snapshots: the client, its errors, manifests, listing.

The client is minio-py (pinned in requirements.txt; boto3 pins a botocore whose urllib3
range conflicts with the kubernetes client's). Every S3 failure a person can meet is turned
into an `EtcdModuleError` whose message says what to fix (credentials, bucket, endpoint,
object) and whose `reason` a role can copy into a condition. Credentials never appear in a
message: they travel only in request signatures, and `scrub` removes them from any text taken
from an exception before it is shown.

Layout (etcd_snapshot_catalog, docs/backup-storage.md): a snapshot is one object, written by
a multipart upload that completes only after etcd's trailer was checked, its manifest beside
it.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit
from xml.etree import ElementTree

from ansible.module_utils.basic import env_fallback

from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError
from etcd_runbook.rules.etcd_s3_store import DEFAULT_REGION
from etcd_runbook.rules.etcd_snapshot_catalog import (
    MANIFEST_MAX_BYTES,
    SnapshotCatalog,
    manifest_body,
    manifest_key,
    parse_manifest,
    rfc3339,
)

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 120.0

# S3 error codes (AWS, MinIO, versitygw) that mean the credentials are wrong or lack rights.
AUTH_CODES = {
    "AccessDenied",
    "AllAccessDisabled",
    "ExpiredToken",
    "InvalidAccessKeyId",
    "InvalidToken",
    "SignatureDoesNotMatch",
    "XAdminUserNotFound",
    "XAmzContentSHA256Mismatch",
}


def s3_argument_spec() -> dict[str, Any]:
    """The `s3` option (documented in the `etcd_s3` doc fragment)."""
    return {
        "type": "dict",
        "options": {
            "endpoint": {"type": "str", "required": True},
            "bucket": {"type": "str", "required": True},
            "region": {"type": "str", "default": DEFAULT_REGION},
            "access_key": {
                "type": "str",
                "no_log": True,
                "fallback": (env_fallback, ["AWS_ACCESS_KEY_ID"]),
            },
            "secret_key": {
                "type": "str",
                "no_log": True,
                "fallback": (env_fallback, ["AWS_SECRET_ACCESS_KEY"]),
            },
            "ca_file": {"type": "path"},
            "path_style": {"type": "bool"},
            "validate_certs": {"type": "bool", "default": True},
        },
    }


class S3Error(EtcdModuleError):
    reason = "S3Error"


@dataclass(frozen=True)
class S3Params:
    endpoint: str  # scheme://host[:port]
    bucket: str
    region: str
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    ca_file: str | None = None
    path_style: bool | None = None
    validate_certs: bool = True

    @classmethod
    def from_option(cls, option: dict[str, Any]) -> S3Params:
        endpoint = (option.get("endpoint") or "").strip().rstrip("/")
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path:
            raise EtcdInputError(
                f"s3.endpoint must be http://host[:port] or https://host[:port], not {endpoint!r}"
            )
        if not option.get("access_key") or not option.get("secret_key"):
            raise EtcdInputError(
                "s3 needs access_key and secret_key (or AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY in the module's environment)"
            )
        if option.get("ca_file") and not os.path.isfile(option["ca_file"]):
            raise EtcdInputError(f"s3.ca_file {option['ca_file']} does not exist")
        return cls(
            endpoint=endpoint,
            bucket=option["bucket"],
            region=option.get("region") or DEFAULT_REGION,
            access_key=option["access_key"],
            secret_key=option["secret_key"],
            ca_file=option.get("ca_file"),
            path_style=option.get("path_style"),
            validate_certs=option.get("validate_certs", True),
        )

    @property
    def secure(self) -> bool:
        return self.endpoint.startswith("https://")

    def where(self, key: str | None = None) -> str:
        """s3://bucket/key at endpoint, for messages."""
        return f"s3://{self.bucket}/{key or ''} at {self.endpoint}"

    def scrub(self, text: str) -> str:
        for secret in (self.secret_key, self.access_key):
            if secret:
                text = text.replace(secret, "********")
        return text


def _minio() -> Any:
    try:
        # Imported here: a module run without s3 must not need the package.
        import minio
    except ImportError as exc:
        raise EtcdModuleError(
            "the minio Python package is needed for s3 (pip install minio==7.2.20, as "
            "requirements.txt pins it)",
            reason="MissingDependency",
        ) from exc
    return minio


def make_client(params: S3Params) -> Any:
    """A minio client with short connect timeouts and few retries: an endpoint that does not
    answer is reported in seconds, not after minutes of retries."""
    minio = _minio()
    # Imported here with minio: a module run without s3 does not load them (start-up time).
    import certifi
    import urllib3

    pool_options: dict[str, Any] = {
        "timeout": urllib3.Timeout(connect=CONNECT_TIMEOUT, read=READ_TIMEOUT),
        "maxsize": 4,
        "retries": urllib3.Retry(
            total=3, connect=1, read=1, backoff_factor=0.2, status_forcelist=[500, 502, 503, 504]
        ),
    }
    if params.secure:
        pool_options["cert_reqs"] = "CERT_REQUIRED" if params.validate_certs else "CERT_NONE"
        if params.ca_file:
            pool_options["ca_certs"] = params.ca_file
        else:
            pool_options["ca_certs"] = os.environ.get("SSL_CERT_FILE") or certifi.where()
    client = minio.Minio(
        urlsplit(params.endpoint).netloc,
        access_key=params.access_key,
        secret_key=params.secret_key,
        secure=params.secure,
        region=params.region,
        http_client=urllib3.PoolManager(**pool_options),
    )
    if params.path_style is True:
        client.disable_virtual_style_endpoint()
    elif params.path_style is False:
        client.enable_virtual_style_endpoint()
    return client


# What of the store's answer a message may carry (and so a condition, an Event, the Job's
# termination message): an S3 error code and a short text, never a body. An endpoint that is
# not a store (or is hostile) could otherwise put anything it likes into an EtcdBackup's status.
SAID_MAX = 120
_CODE = re.compile(r"^[A-Za-z][A-Za-z0-9.]{0,63}$")
_UNPRINTABLE = re.compile(r"[^ -~]+")


def short_text(text: Any, limit: int = SAID_MAX) -> str:
    """`text` as one short line of printable ASCII (whitespace collapsed), cut at `limit`."""
    line = " ".join(_UNPRINTABLE.sub(" ", str(text or "")).split())
    return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."


def s3_said(params: S3Params, code: Any, message: Any) -> str:
    """An S3 error as messages show it: `S3 <Code>: <short message>`, credentials scrubbed.
    A code that is not an S3 error code's shape is not repeated."""
    word = str(code or "")
    shown = word if _CODE.match(word) else "error (an unreadable code)"
    said = short_text(params.scrub(str(message or "")))
    return f"S3 {shown}: {said}" if said else f"S3 {shown}"


def explain(
    exc: BaseException, params: S3Params, operation: str, key: str | None = None
) -> S3Error:
    """An S3/HTTP failure as a message that says what to fix; credentials scrubbed, and of
    the store's answer only the S3 error code and a short message (s3_said)."""
    if isinstance(exc, S3Error):
        return exc
    minio = _minio()
    where = params.where(key)
    if isinstance(exc, minio.error.S3Error):
        return _store_refused(exc, params, operation, where)
    if isinstance(exc, minio.error.InvalidResponseError):
        # Its text holds the whole body the endpoint sent: only the status and type are kept.
        status = getattr(exc, "_code", "?")
        kind = short_text(getattr(exc, "_content_type", "") or "none", 40)
        return S3Error(
            f"{operation} {where} failed: the endpoint answered HTTP {status} ({kind}) "
            "without an S3 error; is s3.endpoint the S3 API's address?",
            reason="S3InvalidResponse",
        )
    if isinstance(exc, ElementTree.ParseError) or (
        isinstance(exc, ValueError) and str(exc).startswith("XML element")
    ):
        # An answer that is XML, or looks like it, but no S3 listing or error.
        return S3Error(
            f"{operation} {where} failed: the endpoint's answer is not an S3 one; is "
            "s3.endpoint the S3 API's address?",
            reason="S3InvalidResponse",
        )
    if isinstance(exc, minio.error.ServerError):
        return S3Error(
            f"{operation} {where} failed: the store answered HTTP {exc.status_code} (a server "
            "error; it may be overloaded or down)",
            reason="S3Error",
        )
    return _not_answered(exc, params, operation, where)


def _store_refused(exc: Any, params: S3Params, operation: str, where: str) -> S3Error:
    """The store answered with an S3 error: its code says what to fix (the keys, the bucket,
    the object, the region), each with its own reason word."""
    code = exc.code or ""
    said = s3_said(params, code, exc.message)
    if code in AUTH_CODES:
        return S3Error(
            f"{operation} {where} was refused: the access key and secret key are wrong or "
            f"lack permission on bucket {params.bucket} ({said})",
            reason="S3AuthFailed",
        )
    if code == "NoSuchBucket":
        return S3Error(
            f"{operation} {where} failed: bucket {params.bucket} does not exist (create "
            "it, or fix s3.bucket); nothing was written",
            reason="S3BucketMissing",
        )
    if code in ("NoSuchKey", "NoSuchObject", "ResourceNotFound"):
        return S3Error(f"{operation} {where} failed: no such object", reason="S3ObjectMissing")
    if code in (
        "PermanentRedirect",
        "AuthorizationHeaderMalformed",
        "IllegalLocationConstraint",
    ):
        return S3Error(
            f"{operation} {where} failed: the bucket is in another region than "
            f"s3.region={params.region} ({said})",
            reason="S3WrongRegion",
        )
    return S3Error(f"{operation} {where} failed: {said}")


def _not_answered(exc: BaseException, params: S3Params, operation: str, where: str) -> S3Error:
    """No S3 answer at all: a TLS failure or an unreachable store, told apart by the words of
    the error, each with what to check; anything else is said as it came, scrubbed."""
    text = short_text(params.scrub(str(exc)), 300)
    lowered = text.lower()
    if any(hint in lowered for hint in ("ssl", "certificate", "tls", "handshake")):
        return S3Error(
            f"{operation} {where} failed: the TLS handshake failed (the server's certificate "
            f"is not signed by s3.ca_file or the system CAs, or does not name the host): {text}",
            reason="S3TLSError",
        )
    if any(
        hint in lowered
        for hint in (
            "connection refused",
            "newconnectionerror",
            "timed out",
            "max retries",
            "name or service not known",
            "connection reset",
            "remotedisconnected",
        )
    ):
        return S3Error(
            f"cannot reach the object store at {params.endpoint} ({operation} {where}): "
            f"nothing answers there, or it is down or filtered [{text}]",
            reason="S3Unreachable",
        )
    if isinstance(exc, ValueError):
        return S3Error(f"{operation} {where}: {text}", reason="InvalidInput")
    return S3Error(f"{operation} {where} failed: {type(exc).__name__}: {text}")


class SnapshotStore(SnapshotCatalog):
    """The calls the modules make, each failure explained once here."""

    missing_reason = "S3ObjectMissing"

    def __init__(self, params: S3Params):
        self.params = params
        self.client = make_client(params)

    def _do(self, operation: str, key: str | None, call: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except EtcdModuleError:
            raise
        except Exception as exc:
            raise explain(exc, self.params, operation, key) from None

    def where(self, key: str | None = None) -> str:
        return self.params.where(key)

    def check_access(self, prefix: str = "", *, write: bool = False) -> None:
        """Prove the credentials and the bucket with a listing (a GET: some stores answer
        a HEAD with bad credentials as if the bucket or object were missing). A listing
        cannot prove the right to write (`write`): a refused upload is explained as such."""

        def first() -> Any:
            return next(iter(self.client.list_objects(self.params.bucket, prefix=prefix)), None)

        self._do("list", prefix, first)

    def stat(self, key: str) -> dict[str, Any] | None:
        """{key, size, time} of an object, or None when there is none."""
        try:
            found = self.client.stat_object(self.params.bucket, key)
        except Exception as exc:
            error = explain(exc, self.params, "stat", key)
            if error.reason == "S3ObjectMissing":
                return None
            raise error from None
        return {"key": key, "size": int(found.size), "time": _rfc3339(found.last_modified)}

    def read_manifest(self, key: str) -> dict[str, Any] | None:
        """The manifest of snapshot `key`; None when it has none. An unreadable manifest is
        returned as {} (the snapshot counts as unverified)."""
        name = manifest_key(key)
        try:
            response = self.client.get_object(self.params.bucket, name)
        except Exception as exc:
            error = explain(exc, self.params, "read manifest", name)
            if error.reason == "S3ObjectMissing":
                return None
            raise error from None
        try:
            body = response.read(MANIFEST_MAX_BYTES + 1)
        except Exception as exc:
            raise explain(exc, self.params, "read manifest", name) from None
        finally:
            response.close()
            response.release_conn()
        return parse_manifest(body)

    def write_manifest(self, key: str, manifest: dict[str, Any]) -> None:
        body = manifest_body(manifest)
        self._do(
            "write manifest",
            manifest_key(key),
            self.client.put_object,
            self.params.bucket,
            manifest_key(key),
            io.BytesIO(body),
            len(body),
            content_type="application/json",
        )

    def remove(self, key: str) -> None:
        self._do("delete", key, self.client.remove_object, self.params.bucket, key)

    def list_keys(self, prefix: str, recursive: bool = False) -> list[dict[str, Any]]:
        """The objects under `prefix`: {key, size, time}. Not `recursive`, the store lists
        with its `/` delimiter: what lies deeper comes back as a directory, left out here."""

        def listing() -> list[dict[str, Any]]:
            return [
                {"key": o.object_name, "size": int(o.size or 0), "time": _rfc3339(o.last_modified)}
                for o in self.client.list_objects(
                    self.params.bucket, prefix=prefix, recursive=recursive
                )
                if not o.is_dir
            ]

        result: list[dict[str, Any]] = self._do("list", prefix, listing)
        return result


def _rfc3339(value: Any) -> str:
    return rfc3339(value if isinstance(value, datetime) else datetime.now(UTC))
