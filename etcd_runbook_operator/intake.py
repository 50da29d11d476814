"""Intake: events from the informers become keys in the work queue.

A primary object's event queues it; a dependent's (a kind listed under `dependents` in
watches.yaml) queues its owner. A dependent of a kind marked `preemptOnLoss` (for etcd: a member
Pod) that is deleted by someone else while its owner's run is in flight preempts that run: it
stops at its next task boundary (or between the attempts of an interruptible wait) and the
object is reconciled again at once, so a lost member is brought back in seconds instead of
after whatever the run was doing. The runbook marks what it deletes itself with the annotation
named by `preemptionOptOutAnnotation`; those never preempt. A new generation of the object (its
spec changed) preempts the same way: a run waiting for a learner that never starts gives way
at once to the run that cancels it (a lower spec.size).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

from .config import Dependent, Watch
from .fingerprint import Seen
from .inflight import InFlight
from .informer import Informer, ObjKey, obj_key
from .kube import ApiException, Kube, Resource
from .metrics import Metrics
from .nodes import LEASES, NODE_LEASE_NAMESPACE, NodeSilence, pods_on
from .workqueue import WorkQueue

log = logging.getLogger(__name__)

# UIDs of lost dependents already acted on, so the later events of one deletion do not preempt
# again.
_SEEN_DELETIONS = 1024


def owner_key(obj: dict[str, Any], watch: Watch, dependent: Dependent) -> ObjKey | None:
    """The primary object a dependent belongs to, in the dependent's namespace: the controller
    ownerReference to the watched kind, else the `ownerLabel` label, else the dependent's
    `ownerField`. What the runbook sets on its own objects comes first; the field is for
    objects people make, which name their owner in their spec and carry neither."""
    found = owner_match(obj, watch, dependent)
    return found[0] if found else None


def owner_match(
    obj: dict[str, Any], watch: Watch, dependent: Dependent
) -> tuple[ObjKey, bool] | None:
    """The owner (as owner_key finds it) and whether only the `ownerField` named it."""
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace") or ""
    for ref in meta.get("ownerReferences") or []:
        group = str(ref.get("apiVersion", "")).split("/")[0]
        if ref.get("controller") and ref.get("kind") == watch.kind and group == watch.group:
            return (namespace, ref["name"]), False
    owner = (meta.get("labels") or {}).get(watch.owner_label) if watch.owner_label else None
    if owner:
        return (namespace, owner), False
    owner = _field_name(obj, dependent.owner_field) if dependent.owner_field else None
    return ((namespace, owner), True) if owner else None


def counts_by_spec(obj: dict[str, Any], watch: Watch, by_field: bool) -> bool:
    """Whether the skip rule counts a dependent only by its spec (fingerprint.Seen): one that
    only its ownerField maps, and that carries no label under the watched group's prefix.
    Such an object is a person's, which the runbook reads by its spec; a label of the group
    (for etcd: etcd.runbook.io/before-upgrade on a person's backup, whose status.lastSnapshot
    the cluster's runbook reads) says the runbook also reads what happens to it, so it counts
    in full, as the runbook's own objects (ownerReference, ownerLabel) do."""
    if not by_field:
        return False
    prefix = f"{watch.group}/"
    return not any(k.startswith(prefix) for k in (obj.get("metadata", {}).get("labels") or {}))


def _field_name(obj: dict[str, Any], path: tuple[str, ...]) -> str | None:
    """The string at `path`, when it can be an object's name. The name becomes a segment of
    the owner's API path, so "a/status" or ".." (which a person may write; the watcher does
    not know the owner's schema) would address something else: those name no owner."""
    value: Any = obj
    for name in path:
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    if not isinstance(value, str) or value in ("", ".", "..") or "/" in value or "%" in value:
        return None
    return value


class Intake:
    def __init__(
        self,
        kube: Kube,
        watch: Watch,
        resource: Resource,
        queue: WorkQueue,
        metrics: Metrics,
        in_flight: InFlight,
        namespaces: list[str | None],
    ) -> None:
        self.kube = kube
        self.watch = watch
        self.queue = queue
        self.metrics = metrics
        self.in_flight = in_flight
        # Set by the controller: what makes the next run of a key skip-proof.
        self.urgent: Callable[[ObjKey], None] = lambda key: None
        self._lock = threading.Lock()
        self._deletions_seen: deque[str] = deque(maxlen=_SEEN_DELETIONS)
        # The newest generation seen of each object: a higher one is a spec change, urgent.
        self._generations: dict[ObjKey, int] = {}
        self.resource = resource
        self.primary: list[Informer] = []
        self._dependents: list[tuple[Dependent, Informer]] = []
        for ns in namespaces:
            primary, dependents = self._informers_of(ns)
            self.primary += primary
            self._dependents += dependents
        # No namespace given: the labelled-namespaces mode (enrolment.py), where namespaces
        # are enrolled and withdrawn while the operator runs; here are the informers of each.
        # The lists above are then replaced, never changed in place, so the threads that
        # iterate them (resync, node silence, the skip rule) need no lock.
        self.enrolled: dict[str, list[Informer]] | None = None if namespaces else {}

        # nodeSilence: node Leases, watched outside `informers` (a namespaced install may not
        # read them, and the operator must still become ready; see start_node_silence).
        self.silence = NodeSilence(watch.node_silence) if watch.node_silence else None
        self.leases = (
            Informer(
                kube,
                LEASES,
                self.on_lease,
                NODE_LEASE_NAMESPACE,
                on_restart=self._restart_counter(LEASES),
            )
            if self.silence and watch.watch_dependent_resources
            else None
        )

    def _informers_of(
        self, ns: str | None
    ) -> tuple[list[Informer], list[tuple[Dependent, Informer]]]:
        """The primary informer of one namespace (None: all), and one per dependent kind
        (config.py refuses a kind listed twice), each with its Dependent, whose ownerField
        maps its objects to their owner."""
        watch = self.watch
        primary = Informer(
            self.kube,
            self.resource,
            self.on_primary,
            ns,
            watch.selector,
            on_restart=self._restart_counter(self.resource),
        )
        dependents = [
            (
                dep,
                Informer(
                    self.kube,
                    res,
                    partial(self.on_losable if dep.preempt_on_loss else self.on_dependent, dep),
                    ns,
                    watch.selector_of(dep),
                    on_restart=self._restart_counter(res),
                ),
            )
            for dep in (watch.dependents if watch.watch_dependent_resources else ())
            for res in [Resource(dep.group, dep.version, dep.plural, dep.kind)]
        ]
        return [primary], dependents

    def enroll(self, namespace: str) -> list[Informer]:
        """Informers for one more namespace, for the caller to start; none when it is watched
        already."""
        with self._lock:
            if self.enrolled is None or namespace in self.enrolled:
                return []
            primary, dependents = self._informers_of(namespace)
            self.primary = [*self.primary, *primary]
            self._dependents = [*self._dependents, *dependents]
            self.enrolled[namespace] = [*primary, *(inf for _, inf in dependents)]
            return self.enrolled[namespace]

    def withdraw(self, namespace: str) -> list[Informer]:
        """Forget a namespace: its informers (returned, for the caller to stop) leave the
        lists, so its objects are neither resynced nor counted as anyone's dependents."""
        with self._lock:
            gone = (self.enrolled or {}).pop(namespace, [])
            self.primary = [inf for inf in self.primary if inf not in gone]
            self._dependents = [(d, inf) for d, inf in self._dependents if inf not in gone]
            self._generations = {k: g for k, g in self._generations.items() if k[0] != namespace}
        return gone

    def covers(self, namespace: str) -> bool:
        """Whether objects of `namespace` are this intake's to reconcile: always, unless the
        namespaces are enrolled by label and this one is not (or no longer)."""
        enrolled = self.enrolled
        return enrolled is None or namespace in enrolled

    def _restart_counter(self, resource: Resource) -> Any:
        counter = self.metrics.watch_restarts
        return lambda reason: counter.labels(resource.plural, reason).inc()

    @property
    def dependents(self) -> list[Informer]:
        return [inf for _, inf in self._dependents]

    @property
    def informers(self) -> list[Informer]:
        return self.primary + self.dependents

    def enqueue(self, key: ObjKey, urgent: bool = False) -> None:
        """`urgent`: ahead of the resyncs and dependents' churn already queued (WorkQueue)."""
        self.queue.add(key, urgent=urgent)
        self.metrics.queue_depth.labels(self.watch.kind).set(self.queue.depth())

    def on_primary(self, event: str, obj: dict[str, Any]) -> None:
        key = obj_key(obj)
        generation = int(obj.get("metadata", {}).get("generation") or 0)
        if self.in_flight.older_than(key, generation):
            self.in_flight.preempt(key, f"generation {generation} of the spec")
        with self._lock:
            if event == "DELETED":
                self._generations.pop(key, None)
                newer = False
            else:
                newer = generation > self._generations.get(key, 0)
                self._generations[key] = max(generation, self._generations.get(key, 0))
        self.enqueue(key, urgent=newer)

    def on_dependent(self, dependent: Dependent, event: str, obj: dict[str, Any]) -> None:
        key = owner_key(obj, self.watch, dependent)
        if key:
            self.enqueue(key)

    def on_losable(self, dependent: Dependent, event: str, obj: dict[str, Any]) -> None:
        key = owner_key(obj, self.watch, dependent)
        if key and self._lost_by_outside_hand(event, obj):
            what = f"{obj.get('kind', 'dependent')} {obj['metadata'].get('name')}"
            self.in_flight.preempt(key, f"{what} deleted")
            # Past the skip rule: the loss can bring the inputs back to what they were when
            # the last run began (a member the run made, deleted again), and that run's
            # fingerprint would then skip the run that must replace it.
            self.urgent(key)
            self.enqueue(key, urgent=True)
            return
        self.on_dependent(dependent, event, obj)

    def _lost_by_outside_hand(self, event: str, obj: dict[str, Any]) -> bool:
        """First sight of a deletion of this dependent that the runbook did not make itself."""
        meta = obj.get("metadata", {})
        if event != "DELETED" and not meta.get("deletionTimestamp"):
            return False
        if self.watch.preemption_opt_out_annotation in (meta.get("annotations") or {}):
            return False
        uid = str(meta.get("uid") or meta.get("name"))
        with self._lock:
            if uid in self._deletions_seen:
                return False
            self._deletions_seen.append(uid)
        return True

    def on_lease(self, event: str, lease: dict[str, Any]) -> None:
        if self.silence is not None and self.silence.seen(event, lease):
            node = str(lease.get("metadata", {}).get("name") or "")
            gone = event == "DELETED"
            self.run_owners_on(node, "is gone" if gone else "renews its Lease again", preempt=gone)

    def start_node_silence(self, stop: threading.Event) -> list[threading.Thread]:
        """The Lease informer and the thread that finds silent nodes; none when the entry has
        no nodeSilence or the operator may not list node Leases (said once, then off)."""
        if self.leases is None or self.silence is None:
            return []
        try:
            self.kube.get(LEASES.path(NODE_LEASE_NAMESPACE), {"limit": "1"})
        except ApiException as exc:
            log.warning(
                "%s: nodeSilence is off: node Leases cannot be listed (%s %s); a lost node is "
                "noticed when Kubernetes marks it NotReady",
                self.watch.kind,
                exc.status,
                exc.reason,
            )
            return []
        checker = threading.Thread(
            target=self._find_silent_nodes, args=(stop,), name="node-silence", daemon=True
        )
        checker.start()
        return [self.leases.start(stop), checker]

    def _find_silent_nodes(self, stop: threading.Event) -> None:
        assert self.silence is not None
        why = f"has not renewed its Lease for {self.silence.threshold:.0f}s"
        while not stop.wait(1.0):
            for node in self.silence.newly_silent():
                self.run_owners_on(node, why, preempt=True)

    def run_owners_on(self, node: str, why: str, preempt: bool = False) -> None:
        """Queue, past the skip rule, the owners of the Pods on `node`. `preempt` (the node
        went silent or is gone): a run in flight stops at its next task boundary, as for a
        member Pod lost, so the next run sees the node lost at once instead of after the
        run in flight (which, on a loaded machine, held the report past 30 s)."""
        keys: set[ObjKey] = set()
        for dep, inf in self._dependents:
            if (dep.group, dep.kind) != ("", "Pod"):
                continue
            for pod in pods_on(inf.items(), node):
                key = owner_key(pod, self.watch, dep)
                if key:
                    keys.add(key)
        for key in sorted(keys):
            log.info("%s %s/%s: node %s %s", self.watch.kind, *key, node, why)
            if preempt:
                self.in_flight.preempt(key, f"node {node} {why}")
            self.urgent(key)
            self.enqueue(key, urgent=True)

    def resync(self, stop: threading.Event) -> None:
        """Queue every primary object each reconcilePeriod (the skip rule answers most)."""
        while not stop.wait(self.watch.reconcile_period):
            for inf in self.primary:
                for obj in inf.items():
                    self.enqueue(obj_key(obj))

    def dependents_of(self, key: ObjKey) -> list[Seen]:
        """The dependents of `key` in the informer caches, each as the skip rule counts it."""
        seen = []
        for dep, inf in self._dependents:
            for d in inf.items():
                found = owner_match(d, self.watch, dep)
                if found and found[0] == key:
                    seen.append(Seen(d, counts_by_spec(d, self.watch, found[1])))
        return seen
