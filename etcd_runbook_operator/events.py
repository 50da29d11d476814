"""Kubernetes Events for every operation, aggregated like client-go's event correlator.

An identical event (same object, type, reason and message) within `window` seconds bumps the
existing Event's count and lastTimestamp instead of creating a new object.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .kube import EVENTS, ApiException, Kube

log = logging.getLogger(__name__)

COMPONENT = "etcd-runbook-operator"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(
        self,
        kube: Kube,
        window: float = 600.0,
        max_entries: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.window = window
        self.max_entries = max_entries
        self.clock = clock
        self._seen: OrderedDict[tuple[str, ...], tuple[str, int, float]] = OrderedDict()
        self._lock = threading.Lock()

    def emit(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace") or "default"
        type_ = type_ if type_ in ("Normal", "Warning") else "Normal"
        message = message[:1024]
        key = (meta.get("uid", ""), type_, reason, message)
        now = self.clock()
        with self._lock:
            seen = self._seen.get(key)
        try:
            if seen and now - seen[2] < self.window:
                name, count, _ = seen
                self.kube.merge_patch(
                    EVENTS.path(namespace, name), {"count": count + 1, "lastTimestamp": _now()}
                )
                self._remember(key, name, count + 1, now)
                return
            name = f"{meta.get('name')}.{uuid.uuid4().hex[:16]}"
            stamp = _now()
            self.kube.create(
                EVENTS.path(namespace),
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": name, "namespace": namespace},
                    "involvedObject": {
                        "apiVersion": obj.get("apiVersion"),
                        "kind": obj.get("kind"),
                        "name": meta.get("name"),
                        "namespace": namespace,
                        "uid": meta.get("uid"),
                        "resourceVersion": meta.get("resourceVersion"),
                    },
                    "type": type_,
                    "reason": reason,
                    "message": message,
                    "source": {"component": COMPONENT},
                    "reportingComponent": COMPONENT,
                    "firstTimestamp": stamp,
                    "lastTimestamp": stamp,
                    "count": 1,
                },
            )
            self._remember(key, name, 1, now)
        except ApiException as exc:
            if seen and exc.status == 404:
                with self._lock:
                    self._seen.pop(key, None)
                self.emit(obj, type_, reason, message)
                return
            log.warning("could not record event %s/%s: %s", reason, message, exc.reason)

    def _remember(self, key: tuple[str, ...], name: str, count: int, now: float) -> None:
        with self._lock:
            self._seen[key] = (name, count, now)
            self._seen.move_to_end(key)
            while len(self._seen) > self.max_entries:
                self._seen.popitem(last=False)
