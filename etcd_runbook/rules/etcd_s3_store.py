"""An S3 store as the specs name it (`spec.destination.s3` of an EtcdBackup, `spec.source.s3`
of an EtcdRestore), checked once for both, and what a Job needs to reach it.

The checks are the CRDs' own (config/crd/bases): the API server refuses most bad values, but
a run by hand has no schema, and a backup and a restore of one store must accept the same
store. The credentials reach a Job only as references to their Secret, never as values."""

from __future__ import annotations

import re
from typing import Any

ENDPOINT = re.compile(r"^https?://[^/\s]+$")
BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
DEFAULT_REGION = "us-east-1"
# The keys of the credentials Secret, and the variables the store's client reads them from.
CREDENTIAL_KEYS = (
    ("AWS_ACCESS_KEY_ID", "accessKeyId"),
    ("AWS_SECRET_ACCESS_KEY", "secretAccessKey"),
)
CA_VOLUME = "s3-ca"


class StoreSpecError(ValueError):
    """A store the spec names that cannot be used; `field` is the spec's field to blame."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def aws_host(endpoint: str) -> bool:
    """Whether the endpoint is AWS's own, which wants virtual-host style addressing."""
    host = endpoint.split("://", 1)[-1].split(":", 1)[0]
    return host == "amazonaws.com" or host.endswith(".amazonaws.com")


def store(s3: Any, field: str) -> dict[str, Any]:
    """The store at `field` of a spec, as the snapshot modules take it (endpoint, bucket,
    region, path_style) with the Secrets it names. Raises StoreSpecError naming the field."""
    s3 = s3 if isinstance(s3, dict) else {}
    endpoint, bucket = s3.get("endpoint"), s3.get("bucket")
    if not isinstance(endpoint, str) or not ENDPOINT.match(endpoint):
        raise StoreSpecError(
            f"{field}.endpoint",
            f"{field}.endpoint must be http(s)://host[:port] without a path, not {endpoint!r}",
        )
    if not isinstance(bucket, str) or not BUCKET.match(bucket):
        raise StoreSpecError(
            f"{field}.bucket", f"{field}.bucket must be an S3 bucket name, not {bucket!r}"
        )
    secret = s3.get("credentialsSecret")
    if not isinstance(secret, str) or not _NAME.match(secret):
        raise StoreSpecError(
            f"{field}.credentialsSecret",
            f"{field}.credentialsSecret must name a Secret, not {secret!r}",
        )
    path_style = s3.get("pathStyle")
    return {
        "endpoint": endpoint,
        "bucket": bucket,
        "region": str(s3.get("region") or DEFAULT_REGION),
        # Unset: virtual-host style only where AWS wants it; every self-hosted store takes paths.
        "path_style": bool(path_style) if isinstance(path_style, bool) else not aws_host(endpoint),
        "credentials_secret": secret,
        "ca_secret": str(s3.get("caSecret") or ""),
    }


def credentials_env(secret: str) -> list[dict[str, Any]]:
    """The Job's environment entries that read the store's credentials from their Secret."""
    return [
        {"name": variable, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
        for variable, key in CREDENTIAL_KEYS
    ]


def ca_volume(ca_secret: str) -> dict[str, Any]:
    """The Job's volume of the store's CA certificate (the Secret's `ca.crt` only)."""
    return {
        "name": CA_VOLUME,
        "secret": {"secretName": ca_secret, "items": [{"key": "ca.crt", "path": "ca.crt"}]},
    }


def ca_mount(directory: str) -> dict[str, Any]:
    return {"name": CA_VOLUME, "mountPath": directory, "readOnly": True}
