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


def _replace_fresh(
    kube: Kube,
    resource: Resource,
    namespace: str,
    name: str,
    what: str,
    subresource: str,
    mutate: Callable[[dict[str, Any]], bool],
) -> dict[str, Any] | None:
    """GET the object, let mutate() change it in place (False: nothing to write), PUT it with
    the resourceVersion just read; on 409 start over. None if the object is gone."""
    for _ in range(MAX_CONFLICT_RETRIES):
        try:
            obj = kube.get(resource.path(namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        if not mutate(obj):
            return obj
        try:
            return kube.replace(resource.path(namespace, name, subresource), obj)
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status != 409:
                raise
    raise RuntimeError(f"{what} of {namespace}/{name}: still conflicting after retries")


def update_status(
    kube: Kube,
    resource: Resource,
    namespace: str,
    name: str,
    compute: Callable[[dict[str, Any]], dict[str, Any] | None],
) -> dict[str, Any] | None:
    """Write compute(fresh object) as .status unless it is None or unchanged.

    Returns the object as last seen (None if it is gone)."""

    def mutate(obj: dict[str, Any]) -> bool:
        status = compute(obj)
        if status is None or status == obj.get("status"):
            return False
        obj["status"] = status
        return True

    return _replace_fresh(kube, resource, namespace, name, "status", "status", mutate)


def update_finalizers(
    kube: Kube,
    resource: Resource,
    namespace: str,
    name: str,
    change: Callable[[list[str]], list[str]],
) -> dict[str, Any] | None:
    """Apply change() to metadata.finalizers of the fresh object; None if the object is gone."""

    def mutate(obj: dict[str, Any]) -> bool:
        current = list(obj["metadata"].get("finalizers") or [])
        wanted = change(current)
        if wanted == current:
            return False
        obj["metadata"]["finalizers"] = wanted
        return True

    return _replace_fresh(kube, resource, namespace, name, "finalizers", "", mutate)
