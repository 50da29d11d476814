"""Which nodes have gone silent: a kubelet renews its node's Lease (namespace kube-node-lease)
every 10 s while it runs, and the node controller only marks the node NotReady once it has been
silent for its grace period (50 s by default). A watch entry with `nodeSilence` runs the owners
of the Pods on a node as soon as its Lease has not been renewed for that long, so the runbook
looks while the node is merely silent (docs/operator.md, "Node silence").

Time is counted on this process's clock from when a renewal was seen, never from the
renewTime the kubelet wrote: another machine's clock can be off by more than the threshold."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .kube import Resource

LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
NODE_LEASE_NAMESPACE = "kube-node-lease"


class NodeSilence:
    """Tracks the last renewal seen of each node's Lease; says which nodes turned silent (or
    came back) since it was last asked."""

    def __init__(self, threshold: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = threshold
        self.clock = clock
        self._renewed: dict[str, str] = {}
        self._heard: dict[str, float] = {}
        self._silent: set[str] = set()
        self._lock = threading.Lock()

    def seen(self, event: str, lease: dict[str, Any]) -> bool:
        """A Lease event; True when it ends a silence (the node is back), or when the Lease is
        gone (the Node was deleted: nothing will renew it)."""
        node = str((lease.get("metadata") or {}).get("name") or "")
        renewed = str((lease.get("spec") or {}).get("renewTime") or "")
        with self._lock:
            if event == "DELETED":
                self._renewed.pop(node, None)
                self._heard.pop(node, None)
                self._silent.add(node)
                return True
            if node in self._renewed and self._renewed[node] == renewed:
                return False
            self._renewed[node] = renewed
            self._heard[node] = self.clock()
            if node in self._silent:
                self._silent.discard(node)
                return True
            return False

    def newly_silent(self) -> list[str]:
        """Nodes whose last renewal seen is older than the threshold, each named once per
        silence."""
        now = self.clock()
        with self._lock:
            found = sorted(
                n
                for n, at in self._heard.items()
                if now - at > self.threshold and n not in self._silent
            )
            self._silent.update(found)
        return found


def pods_on(pods: list[dict[str, Any]], node: str) -> list[dict[str, Any]]:
    return [p for p in pods if (p.get("spec") or {}).get("nodeName") == node]
