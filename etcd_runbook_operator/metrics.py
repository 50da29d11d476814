"""Prometheus metrics of the watcher (names documented in docs/operator.md)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        prefix = "etcd_runbook_operator"
        self.reconcile_total = Counter(
            f"{prefix}_reconcile_total",
            "Reconciles by kind and result (success, failure, skipped, stopped, preempted)",
            ["kind", "result"],
            registry=self.registry,
        )
        self.reconcile_skipped = Counter(
            f"{prefix}_reconcile_skipped_total",
            "Reconciles that did not start ansible-runner because nothing changed",
            ["kind"],
            registry=self.registry,
        )
        self.playbook_duration = Histogram(
            f"{prefix}_playbook_duration_seconds",
            "Wall time of ansible-runner runs",
            ["kind", "result"],
            buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800),
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            f"{prefix}_workqueue_depth",
            "Objects waiting for a worker",
            ["kind"],
            registry=self.registry,
        )
        self.leader = Gauge(
            f"{prefix}_leader",
            "1 while this process holds the leader Lease (or runs without election)",
            registry=self.registry,
        )
        self.watch_restarts = Counter(
            f"{prefix}_watch_restarts_total",
            "Watch streams re-opened, by resource and reason (closed, gone, error)",
            ["resource", "reason"],
            registry=self.registry,
        )

    def serve(self, host: str, port: int) -> None:
        start_http_server(port, addr=host, registry=self.registry)
