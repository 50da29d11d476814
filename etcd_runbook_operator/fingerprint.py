"""The skip rule: do not start ansible-runner when none of a reconcile's inputs changed.

A fingerprint hashes what the watcher can see of an object's inputs: its generation, its spec,
the annotations that matter and the resourceVersions of its dependents. After a SUCCESSFUL run
the fingerprint taken at the start of that run is recorded; a later reconcile with the same
fingerprint is skipped while the last full run is younger than `max_age`. What the watcher
cannot see (etcd's own state) is why full runs still happen every `max_age`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any


def fingerprint(
    obj: dict[str, Any],
    dependents: Iterable[dict[str, Any]],
    annotation_prefixes: Iterable[str],
) -> str:
    meta = obj.get("metadata", {})
    prefixes = tuple(annotation_prefixes)
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(prefixes)
    }
    deps = sorted(
        (
            # List items carry no kind: the uid tells a Pod from a PVC of the same name.
            d.get("metadata", {}).get("uid", ""),
            d.get("metadata", {}).get("name", ""),
            d.get("metadata", {}).get("resourceVersion", ""),
        )
        for d in dependents
    )
    doc = {
        "generation": meta.get("generation"),
        "spec": obj.get("spec"),
        "annotations": annotations,
        "dependents": deps,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


class SkipTracker:
    def __init__(self, max_age: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age = max_age
        self.clock = clock
        self._last: dict[Hashable, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def should_skip(self, key: Hashable, fp: str) -> bool:
        with self._lock:
            last = self._last.get(key)
        return last is not None and last[0] == fp and self.clock() - last[1] < self.max_age

    def record_success(self, key: Hashable, fp: str) -> None:
        with self._lock:
            self._last[key] = (fp, self.clock())

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._last.pop(key, None)
