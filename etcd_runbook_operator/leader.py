"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's timing rules.

A candidate takes the Lease when it is free or when its holder has not renewed it for
lease_duration, as measured on OUR clock from the moment we last saw the record change (so
clock skew between nodes does not matter). The leader renews every retry_period; if no renew
succeeded for renew_deadline it declares the lease lost: the caller must stop reconciling and
exit (another candidate may take over lease_duration after our last renew).

A renewal counts from the moment it was sent, not from its answer: whoever reads it read it
after then, and waits lease_duration from that read. So `expires_at` is a moment before which
no other candidate can lead, and the watcher ends every run before it (main.py). Each request
is bounded (REQUEST_TIMEOUT_SHARE of the renew deadline), so a hung API server cannot keep the
renew loop from noticing, and `overdue` says it from any thread even if it does.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from urllib3.exceptions import HTTPError

from .kube import LEASES, ApiException, Kube

log = logging.getLogger(__name__)
# A release that meets a renewal of our own in flight reads the Lease again; more than a few
# conflicts means someone else is writing it, and the Lease then simply expires.
RELEASE_ATTEMPTS = 3
# Each Lease request may take this share of the renew deadline.
REQUEST_TIMEOUT_SHARE = 0.25


def _now_micro() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.is_leader = threading.Event()
        self.lost = threading.Event()
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0

    @property
    def _timeout(self) -> float:
        return max(0.5, self.renew_deadline * REQUEST_TIMEOUT_SHARE)

    def expires_at(self) -> float:
        """When (on this clock) another candidate may first take the Lease: lease_duration
        after our last renewal was sent."""
        return self._last_renew + self.lease_duration

    def overdue(self) -> bool:
        """We lead, and no renewal has succeeded for renew_deadline: leadership is lost, even
        if the renew loop is stuck in a request."""
        return self.is_leader.is_set() and self.clock() - self._last_renew >= self.renew_deadline

    def _path(self, named: bool = True) -> str:
        return LEASES.path(self.namespace, self.name if named else None)

    def _body(self, current: dict[str, Any] | None) -> dict[str, Any]:
        spec = dict((current or {}).get("spec") or {})
        now = _now_micro()
        if spec.get("holderIdentity") != self.identity:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
                1 if current else 0
            )
            spec["acquireTime"] = now
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=int(self.lease_duration),
            renewTime=now,
        )
        meta = {"name": self.name, "namespace": self.namespace}
        if current:
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": spec,
        }

    def try_acquire_or_renew(self) -> bool:
        """One round of the election; True when we hold the lease after it."""
        sent = self.clock()
        try:
            current = self.kube.get(self._path(), timeout=self._timeout)
        except ApiException as exc:
            if exc.status != 404:
                log.warning("lease %s/%s: get failed: %s", self.namespace, self.name, exc.reason)
                return False
            try:
                self.kube.create(self._path(named=False), self._body(None), timeout=self._timeout)
            except ApiException as create_exc:
                log.info("lease create lost a race: %s", create_exc.reason)
                return False
            self._last_renew = sent
            return True
        except (OSError, HTTPError) as exc:  # no answer in time, a broken connection
            log.warning("lease %s/%s: get failed: %s", self.namespace, self.name, exc)
            return False
        spec = current.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        now = self.clock()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and now - self._observed_at < duration:
            return False
        try:
            self.kube.replace(self._path(), self._body(current), timeout=self._timeout)
        except ApiException as exc:
            log.info("lease update failed (%s): another candidate was faster", exc.status)
            return False
        except (OSError, HTTPError) as exc:
            log.warning("lease %s/%s: update failed: %s", self.namespace, self.name, exc)
            return False
        self._last_renew = sent
        return True

    def run(self, stop: threading.Event, on_started: Callable[[], None]) -> None:
        """Campaign until we lead, then renew; sets `lost` and returns if renewing fails."""
        while not stop.is_set():
            if self.try_acquire_or_renew():
                break
            stop.wait(self.retry_period)
        if stop.is_set():
            return
        log.info(
            "became leader (lease %s/%s, identity %s)", self.namespace, self.name, self.identity
        )
        self.is_leader.set()
        on_started()
        while not stop.wait(self.retry_period):
            if self.try_acquire_or_renew():
                continue
            if self.clock() - self._last_renew >= self.renew_deadline:
                log.error(
                    "failed to renew lease %s/%s within %.0fs: leadership lost",
                    self.namespace,
                    self.name,
                    self.renew_deadline,
                )
                self.is_leader.clear()
                self.lost.set()
                return

    def release(self) -> None:
        """Give the lease up on a clean shutdown so a standby takes over at once."""
        if not self.is_leader.is_set():
            return
        self.is_leader.clear()
        # A renewal already in flight when the stop came can land between our read and our
        # write (seen: 409 Conflict, and the standby waited out the whole lease): read again.
        for attempt in range(1, RELEASE_ATTEMPTS + 1):
            try:
                current = self.kube.get(self._path())
                if (current.get("spec") or {}).get("holderIdentity") != self.identity:
                    return
                current["spec"]["holderIdentity"] = None
                current["spec"]["leaseDurationSeconds"] = 1
                current["spec"]["renewTime"] = _now_micro()
                self.kube.replace(self._path(), current)
                log.info("released lease %s/%s", self.namespace, self.name)
                return
            except ApiException as exc:
                if exc.status != 409 or attempt == RELEASE_ATTEMPTS:
                    log.warning("could not release lease: %s", exc.reason)
                    return
