"""Optimistic-concurrency writes of status and finalizers: GET, compute, PUT with the
resourceVersion just read, and on 409 Conflict start over from a fresh GET."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from .kube import ApiException, Kube, Resource

MAX_CONFLICT_RETRIES = 5


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def update_status(
    kube: Kube,
    resource: Resource,
    namespace: str,
    name: str,
    compute: Callable[[dict[str, Any]], dict[str, Any] | None],
) -> dict[str, Any] | None:
    """Write compute(fresh object) as .status unless it is None or unchanged.

    Returns the object as last seen (None if it is gone)."""
    for _ in range(MAX_CONFLICT_RETRIES):
        try:
            obj = kube.get(resource.path(namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        status = compute(obj)
        if status is None or status == obj.get("status"):
            return obj
        obj["status"] = status
        try:
            return kube.replace(resource.path(namespace, name, "status"), obj)
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status != 409:
                raise
    raise RuntimeError(f"status of {namespace}/{name}: still conflicting after retries")


def update_finalizers(
    kube: Kube,
    resource: Resource,
    namespace: str,
    name: str,
    change: Callable[[list[str]], list[str]],
) -> dict[str, Any] | None:
    """Apply change() to metadata.finalizers of the fresh object; None if the object is gone."""
    for _ in range(MAX_CONFLICT_RETRIES):
        try:
            obj = kube.get(resource.path(namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        current = list(obj["metadata"].get("finalizers") or [])
        wanted = change(current)
        if wanted == current:
            return obj
        obj["metadata"]["finalizers"] = wanted
        try:
            return kube.replace(resource.path(namespace, name), obj)
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status != 409:
                raise
    raise RuntimeError(f"finalizers of {namespace}/{name}: still conflicting after retries")
