"""List-then-watch informer over raw dicts, in the manner of client-go's reflector.

List, then watch from the list's resourceVersion; a 410 Gone (as an HTTP status or as an ERROR
event) drops the resourceVersion so the next round lists again; any other failure reconnects
after an exponential backoff with jitter. The loop only ends when asked to stop.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import Any

from .kube import ApiException, Kube, Resource

log = logging.getLogger(__name__)

ObjKey = tuple[str, str]
Handler = Callable[[str, dict[str, Any]], None]


def obj_key(obj: dict[str, Any]) -> ObjKey:
    meta = obj.get("metadata", {})
    return (meta.get("namespace") or "", meta["name"])


class WatchGone(Exception):
    """The server no longer has the resourceVersion we watch from."""


class Informer:
    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        handler: Handler,
        namespace: str | None = None,
        label_selector: str = "",
        on_restart: Callable[[str], None] | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        watch_timeout: int = 300,
        initial_resource_version: str | None = None,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.handler = handler
        self.namespace = namespace
        self.label_selector = label_selector
        self.on_restart = on_restart or (lambda reason: None)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.watch_timeout = watch_timeout
        self.synced = threading.Event()
        self.resource_version: str | None = initial_resource_version
        self.lists = 0
        self._cache: dict[ObjKey, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.name = f"{resource.plural}@{namespace or '*'}"

    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._cache.values())

    def get(self, key: ObjKey) -> dict[str, Any] | None:
        with self._lock:
            return self._cache.get(key)

    def _list(self) -> None:
        query = {"labelSelector": self.label_selector}
        data = self.kube.get(self.resource.path(self.namespace), query)
        self.lists += 1
        fresh = {obj_key(o): o for o in data.get("items", [])}
        with self._lock:
            gone = [o for k, o in self._cache.items() if k not in fresh]
            self._cache = fresh
        for obj in gone:
            self.handler("DELETED", obj)
        for obj in fresh.values():
            self.handler("ADDED", obj)
        self.resource_version = data.get("metadata", {}).get("resourceVersion")
        self.synced.set()

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise WatchGone(obj.get("message", "resource version too old"))
            raise RuntimeError(f"watch error: {obj.get('message', obj)}")
        rv = obj.get("metadata", {}).get("resourceVersion")
        if kind == "BOOKMARK":
            self.resource_version = rv
            return
        key = obj_key(obj)
        with self._lock:
            if kind == "DELETED":
                self._cache.pop(key, None)
            else:
                self._cache[key] = obj
        self.resource_version = rv
        self.handler(str(kind), obj)

    def run(self, stop: threading.Event) -> None:
        failures = 0
        while not stop.is_set():
            try:
                if self.resource_version is None:
                    self._list()
                query = {
                    "labelSelector": self.label_selector,
                    "resourceVersion": self.resource_version,
                }
                for event in self.kube.watch(
                    self.resource.path(self.namespace), query, self.watch_timeout
                ):
                    # Stopped (a namespace withdrawn) while waiting: the event is no longer ours.
                    if stop.is_set():
                        return
                    self._apply(event)
                    failures = 0
                # The server closed the stream after its timeout: resume from where we are.
                self.on_restart("closed")
                failures = 0
                continue
            except WatchGone as exc:
                log.info("%s: watch expired (%s); listing again", self.name, exc)
                reason = "gone"
            except ApiException as exc:
                reason = "gone" if exc.status == 410 else "error"
                if exc.status == 403:
                    log.warning(
                        "%s: forbidden: this account may not list and watch %s there "
                        "(docs/install.md says what each install grants)",
                        self.name,
                        self.resource.plural,
                    )
                elif exc.status != 410:
                    log.warning("%s: API error %s: %s", self.name, exc.status, exc.reason)
            except Exception as exc:
                log.warning("%s: watch failed: %s", self.name, exc)
                reason = "error"
            self.on_restart(reason)
            if reason == "gone":
                self.resource_version = None
                # A 410 is routine (compaction); relist at once, but not in a tight loop.
                failures = min(failures, 1)
            failures += 1
            delay = min(self.backoff_max, self.backoff_base * 2 ** (failures - 1))
            stop.wait(delay * random.uniform(0.5, 1.0))

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(
            target=self.run, args=(stop,), name=f"informer-{self.name}", daemon=True
        )
        thread.start()
        return thread
