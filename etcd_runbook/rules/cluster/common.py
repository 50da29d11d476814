"""The small words of the cluster runbook's plan: quantities, versions, member names and URLs,
and reading an object's metadata."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from etcd_runbook.names import LABEL_MEMBER

MAX_INDEX = 9
_UNITS = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")


class PlanError(ValueError):
    """A value the plan cannot read."""


def parse_quantity(value: Any) -> int:
    """A Kubernetes quantity of bytes ("1Gi", "500M", 1024) as an int."""
    if isinstance(value, bool):
        raise PlanError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return value
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise PlanError(f"not a quantity: {value!r}")
    number, unit = match.groups()
    return int(float(number) * _UNITS[unit or ""])


def format_bytes(value: int) -> str:
    """Bytes in the largest binary unit that divides them ("320Mi"), else plain bytes."""
    for unit in ("Ti", "Gi", "Mi", "Ki"):
        if value and value % _UNITS[unit] == 0:
            return f"{value // _UNITS[unit]}{unit}"
    return str(value)


def quorum_of(voters: int) -> int:
    return voters // 2 + 1


def version_tuple(version: str) -> tuple[int, int, int]:
    major, minor, patch = (int(x) for x in version.split("."))
    return major, minor, patch


def member_index(name: str) -> int:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else MAX_INDEX + 1


PEER_PORT = 2380
CLIENT_PORT = 2379


def member_url(cluster: str, namespace: str, domain: str, tls: bool, member: str, port: int) -> str:
    """A member's URL on its DNS name, as etcd_manifests makes it: the whole of it (scheme,
    host with namespace and cluster domain, port) is who the member is."""
    scheme = "https" if tls else "http"
    return f"{scheme}://{member}.{cluster}.{namespace}.svc.{domain}:{port}"


def url_key(url: str) -> str:
    """A URL as compared: no trailing slash or spaces, scheme and host in lower case."""
    return url.strip().rstrip("/").lower()


def stable_hash(doc: Any) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def annotations_of(obj: dict[str, Any] | None) -> dict[str, str]:
    return _meta(obj or {}).get("annotations") or {}


def labels_of(obj: dict[str, Any] | None) -> dict[str, str]:
    return _meta(obj or {}).get("labels") or {}


def _deleting(obj: dict[str, Any]) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def _member_of(obj: dict[str, Any]) -> str:
    return labels_of(obj).get(LABEL_MEMBER) or str(_meta(obj).get("name", "")).removesuffix("-data")


def _refusal(reason: str, field: str, message: str) -> dict[str, str]:
    return {"reason": reason, "field": field, "message": message}


def _event(type_: str, reason: str, message: str) -> dict[str, str]:
    return {"type": type_, "reason": reason, "message": message}
