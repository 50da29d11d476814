"""Process wiring: config, API client, metrics/probes, leader election, controllers, signals."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from kubernetes import config as kube_config

from .cli import REPO_ROOT, build_parser
from .config import ConfigError, load_watches
from .controller import Controller
from .enrolment import Enrolment
from .events import EventRecorder
from .kube import ApiException, Kube, load_api_client
from .leader import LeaderElector
from .metrics import Metrics
from .probes import serve_probes
from .runner import PlaybookRunner

log = logging.getLogger("etcd_runbook_operator")

SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# With leadership lost, every run is over this long before another candidate may first take
# the Lease (time to kill, and for two clocks that run at slightly different rates).
KILL_MARGIN = 2.0


def _lease_namespace(flag: str | None, kubeconfig: str | None) -> str:
    if flag:
        return flag
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    if SA_NAMESPACE.exists():
        return SA_NAMESPACE.read_text().strip()
    try:
        _, active = kube_config.list_kube_config_contexts(config_file=kubeconfig)
        return str(active["context"].get("namespace") or "default")
    except (kube_config.ConfigException, OSError, KeyError, TypeError):
        return "default"


class Operator:
    def __init__(self, args: Any) -> None:
        self.args = args
        self.stop = threading.Event()
        self.started = threading.Event()
        self.metrics = Metrics()
        watches = load_watches(args.watches_file)
        if args.reconcile_period:
            watches = [
                dataclasses.replace(w, reconcile_period=args.reconcile_period) for w in watches
            ]
        # With a selector, no namespace is watched until it is enrolled (enrolment.py).
        namespaces: list[str | None] = list(args.namespaces) or (
            [] if args.namespace_selector else [None]
        )
        # Every informer holds a connection; enrolled namespaces are counted as eight.
        watched = len(namespaces) if not args.namespace_selector else 8
        pool = 3 * watched * len(watches) + args.max_concurrent_reconciles + 8
        self.kube = Kube(load_api_client(args.kubeconfig, pool))
        extra_env = {"KUBECONFIG": str(Path(args.kubeconfig).resolve())} if args.kubeconfig else {}
        self.runner = PlaybookRunner(
            REPO_ROOT,
            args.artifacts_dir.resolve(),
            extra_env,
            forkserver=args.ansible_fork_server,
        )
        recorder = EventRecorder(self.kube)
        self.controllers = [
            Controller(
                self.kube,
                w,
                self.kube.discover(w.group, w.version, w.kind),
                self.runner,
                recorder,
                self.metrics,
                namespaces,
                args.runner_timeout,
                args.max_concurrent_reconciles,
            )
            for w in watches
        ]
        self.enrolment = (
            Enrolment(self.kube, args.namespace_selector, self.controllers, self.metrics)
            if args.namespace_selector
            else None
        )
        self._enrolment_thread: threading.Thread | None = None
        self.elector: LeaderElector | None = None
        self._elector_thread: threading.Thread | None = None
        if args.leader_elect:
            identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
            self.elector = LeaderElector(
                self.kube,
                _lease_namespace(args.leader_election_namespace, args.kubeconfig),
                args.leader_election_id,
                identity,
            )

    def _start_controllers(self) -> None:
        self.metrics.leader.set(1)
        for c in self.controllers:
            c.start(self.stop)
        if self.enrolment:
            self._enrolment_thread = self.enrolment.start(self.stop)
        self.started.set()

    def healthy(self) -> bool:
        if self.started.is_set():
            enrolling = self._enrolment_thread is None or self._enrolment_thread.is_alive()
            return enrolling and all(c.healthy() for c in self.controllers)
        return self._elector_thread is not None and self._elector_thread.is_alive()

    def ready(self) -> bool:
        if self.started.is_set():
            enrolled = self.enrolment is None or self.enrolment.synced()
            return enrolled and all(c.synced() for c in self.controllers)
        # A standby that is campaigning is ready: it is doing its job.
        return self._elector_thread is not None and self._elector_thread.is_alive()

    def run(self) -> int:
        metrics_host, metrics_port = self.args.metrics_bind_address
        self.metrics.serve(metrics_host, metrics_port)
        probe_host, probe_port = self.args.health_probe_bind_address
        serve_probes(probe_host, probe_port, self.healthy, self.ready)
        if self.elector:
            self._elector_thread = threading.Thread(
                target=self.elector.run,
                args=(self.stop, self._start_controllers),
                name="leader-election",
                daemon=True,
            )
            self._elector_thread.start()
        else:
            self._start_controllers()
        lost = False
        while not self.stop.wait(0.5):
            if self.elector and self.elector.lost.is_set():
                lost = True
                break
            # Also when the renew loop is stuck in a request: the Lease runs out all the same.
            if self.elector and self.elector.overdue():
                log.error(
                    "lease not renewed for %.0fs: leadership lost", self.elector.renew_deadline
                )
                lost = True
                break
        self.shutdown(lost)
        return 1 if lost else 0

    def shutdown(self, lost: bool) -> None:
        """Stop intake, let runs finish (bounded), then ask them to stop at a task boundary.
        With leadership lost: write nothing more, and end every run before another candidate
        may take the Lease, killed if it has not stopped by then."""
        self.stop.set()
        self.metrics.leader.set(0)
        if lost:
            self.kube.fence("leadership lost")
        for c in self.controllers:
            c.stop_intake()
        if lost and self.elector is not None:
            # Another replica may lead soon: do not start another task, nor finish this one
            # once it could.
            self.runner.stop_all_at_task_boundary()
            deadline = self.elector.expires_at() - KILL_MARGIN
            for c in self.controllers:
                c.wait_idle(max(0.0, deadline - self.elector.clock()))
            if self.runner.in_flight():
                killed = self.runner.kill_all()
                log.error(
                    "leadership lost: runs still in flight killed (%d processes), %.1fs before "
                    "another replica may lead",
                    killed,
                    self.elector.expires_at() - self.elector.clock(),
                )
        else:
            grace = self.args.shutdown_grace_period
            log.info(
                "shutting down: waiting up to %.0fs for %d run(s) in flight",
                grace,
                self.runner.in_flight(),
            )
            if not all(c.wait_idle(grace) for c in self.controllers):
                asked = self.runner.stop_all_at_task_boundary()
                log.warning(
                    "grace period over: %d run(s) asked to stop at the next task boundary", asked
                )
        for c in self.controllers:
            c.wait_idle(None)
        self.runner.close()
        if self.elector and not lost:
            self.elector.release()
        log.info("stopped")


def _install_signals(op: Operator) -> None:
    def handler(signum: int, frame: object) -> None:
        if op.stop.is_set():
            log.error("second signal: killing runs in flight (mid-task)")
            op.runner.kill_all()
        else:
            log.info("signal %d: shutting down", signum)
            op.stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.namespaces and args.namespace_selector:
        parser.error("--namespace and --namespace-selector exclude each other")
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        op = Operator(args)
    except ConfigError as exc:
        log.error("invalid watches file: %s", exc)
        return 2
    except (LookupError, ApiException, kube_config.ConfigException) as exc:
        # e.g. the CRD is not installed yet, or no credentials: say so instead of a traceback.
        log.error("cannot start: %s", getattr(exc, "reason", None) or exc)
        return 1
    _install_signals(op)
    return op.run()
