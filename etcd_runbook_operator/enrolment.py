"""The labelled-namespaces mode (--namespace-selector): the operator watches the namespaces
whose labels match the selector, as they are labelled and unlabelled, and no other.

Its rights in a namespace come from a RoleBinding made there when the namespace is enrolled
(config/rbac/enroll, docs/install.md), not from a ClusterRole: so it only ever lists, watches
and acts where it was let in. The label says where to look; the RoleBinding says what it may
do there; each without the other leaves the namespace alone (a label without the binding is
said in the log, as a watch refused with 403).

A namespace being deleted stays enrolled until it is gone: the finalizers of its objects need
the operator to run (docs/install.md says to delete the clusters before the namespace).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

from .informer import Informer
from .kube import Kube, Resource
from .metrics import Metrics

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)


class Enrollable(Protocol):
    def enroll(self, namespace: str) -> None: ...

    def withdraw(self, namespace: str) -> None: ...


class Enrolment:
    """One informer over the namespaces the selector matches; each one that appears in it is
    enrolled with every controller, each one that leaves it (label removed, or the namespace
    deleted) withdrawn. The API server sends a watch with a label selector a DELETED event for
    an object whose labels stop matching."""

    def __init__(
        self, kube: Kube, selector: str, controllers: Sequence[Enrollable], metrics: Metrics
    ) -> None:
        self.controllers = controllers
        restarts = metrics.watch_restarts
        self.informer = Informer(
            kube,
            NAMESPACES,
            self.on_namespace,
            None,
            selector,
            on_restart=lambda reason: restarts.labels(NAMESPACES.plural, reason).inc(),
        )

    def on_namespace(self, event: str, namespace: dict[str, Any]) -> None:
        name = str((namespace.get("metadata") or {}).get("name") or "")
        if not name:
            return
        for controller in self.controllers:
            if event == "DELETED":
                controller.withdraw(name)
            else:
                controller.enroll(name)

    def start(self, stop: threading.Event) -> threading.Thread:
        return self.informer.start(stop)

    def synced(self) -> bool:
        return self.informer.synced.is_set()
