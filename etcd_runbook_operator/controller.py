"""One controller per watches.yaml entry: its intake (informers to work queue keys,
intake.py) feeds workers that reconcile (reconcile.py); this file starts and stops them."""

from __future__ import annotations

import logging
import threading
import time

from .config import Watch
from .events import EventRecorder
from .inflight import InFlight
from .informer import ObjKey
from .intake import Intake
from .kube import Kube, Resource
from .metrics import Metrics
from .reconcile import Reconciler
from .runner import PlaybookRunner
from .workqueue import WorkQueue

log = logging.getLogger(__name__)


class Controller:
    def __init__(
        self,
        kube: Kube,
        watch: Watch,
        resource: Resource,
        runner: PlaybookRunner,
        recorder: EventRecorder,
        metrics: Metrics,
        namespaces: list[str | None],
        runner_timeout: float,
        workers: int,
        queue: WorkQueue | None = None,
    ) -> None:
        self.watch = watch
        self.metrics = metrics
        self.workers = workers
        self.queue = queue or WorkQueue()
        self.shutting_down = threading.Event()
        self._threads: list[threading.Thread] = []
        self._worker_threads: list[threading.Thread] = []
        # Each enrolled namespace's informers stop on their own event when it is withdrawn.
        self._scopes: dict[str, tuple[threading.Event, list[threading.Thread]]] = {}
        self._scopes_lock = threading.Lock()
        in_flight = InFlight(runner, watch.kind)
        self.intake = Intake(kube, watch, resource, self.queue, metrics, in_flight, namespaces)
        self.reconciler = Reconciler(
            kube,
            watch,
            resource,
            runner,
            recorder,
            metrics,
            self.queue,
            in_flight,
            self.intake.dependents_of,
            runner_timeout,
            self.shutting_down,
        )
        self.skips = self.reconciler.skips
        self.intake.urgent = self.skips.forget

    def reconcile(self, key: ObjKey) -> None:
        if not self.intake.covers(key[0]):
            # Queued before its namespace was withdrawn: no longer the operator's to act on.
            self.skips.forget(key)
            self.queue.forget(key)
            return
        self.reconciler.reconcile(key)

    # --- enrolled namespaces (enrolment.py) ---------------------------------------------------
    def enroll(self, namespace: str) -> None:
        """Watch one more namespace (its informers list it, then every object is queued)."""
        if self.shutting_down.is_set():
            return
        informers = self.intake.enroll(namespace)
        if not informers:
            return
        stop = threading.Event()
        threads = [inf.start(stop) for inf in informers]
        with self._scopes_lock:
            self._scopes[namespace] = (stop, threads)
        log.info("%s: watching namespace %s (enrolled)", self.watch.kind, namespace)

    def withdraw(self, namespace: str) -> None:
        """Stop watching a namespace; keys of it still queued are dropped (reconcile). A run in
        flight there goes on to its end."""
        self.intake.withdraw(namespace)
        with self._scopes_lock:
            scope = self._scopes.pop(namespace, None)
        if scope is not None:
            scope[0].set()
            log.info("%s: no longer watching namespace %s (withdrawn)", self.watch.kind, namespace)

    # --- lifecycle ----------------------------------------------------------------------------
    def synced(self) -> bool:
        """Every informer has listed once, but those of enrolled namespaces: one the operator
        may not read (labelled, but no RoleBinding there yet) must not hold up readiness, and
        with it the operator's rollout; its informers say so in the log."""
        enrolled = {id(inf) for infs in (self.intake.enrolled or {}).values() for inf in infs}
        return all(inf.synced.is_set() for inf in self.intake.informers if id(inf) not in enrolled)

    def healthy(self) -> bool:
        with self._scopes_lock:
            scoped = [t for _, threads in self._scopes.values() for t in threads]
        return all(t.is_alive() for t in [*self._threads, *scoped])

    def start(self, stop: threading.Event) -> None:
        for inf in self.intake.informers:
            self._threads.append(inf.start(stop))
        resync = threading.Thread(
            target=self.intake.resync, args=(stop,), name="resync", daemon=True
        )
        resync.start()
        self._threads.append(resync)
        self._threads.extend(self.intake.start_node_silence(stop))
        for i in range(self.workers):
            t = threading.Thread(
                target=self._work, name=f"worker-{self.watch.kind}-{i}", daemon=True
            )
            t.start()
            self._worker_threads.append(t)
        self._threads.extend(self._worker_threads)

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            try:
                self.reconcile(key)  # type: ignore[arg-type]
            except Exception:
                log.exception("%s %s: reconcile crashed", self.watch.kind, key)
                self.metrics.reconcile_total.labels(self.watch.kind, "failure").inc()
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)
                self.metrics.queue_depth.labels(self.watch.kind).set(self.queue.depth())

    def stop_intake(self) -> None:
        """Stop taking new work; runs in flight go on."""
        self.shutting_down.set()
        self.queue.shutdown()
        with self._scopes_lock:
            for stop, _ in self._scopes.values():
                stop.set()

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait for the workers to leave; the timeout bounds the whole wait, not each join."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._worker_threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._worker_threads)
