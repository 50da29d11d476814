"""Command-line flags (names follow operator-sdk / controller-runtime where they exist)."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def version() -> str:
    """The release version: VERSION in a checkout, the image's ETCD_RUNBOOK_OPERATOR_VERSION
    (both images set it from that file) where the file is not shipped."""
    path = REPO_ROOT / "VERSION"
    if path.is_file():
        return path.read_text().strip()
    return os.environ.get("ETCD_RUNBOOK_OPERATOR_VERSION", "unknown")


def _address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return (host or "0.0.0.0", int(port))


def _positive(value: str) -> float:
    number = float(value)
    if number <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return number


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="operator.py",
        description="etcd runbook operator: watches custom resources and runs the Ansible "
        "runbook that watches.yaml maps them to.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    p.add_argument(
        "--watches-file",
        type=Path,
        default=REPO_ROOT / "watches.yaml",
        help="watches file (default: watches.yaml next to operator.py)",
    )
    p.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)",
    )
    p.add_argument(
        "--namespace",
        action="append",
        default=[],
        dest="namespaces",
        help="namespace to watch; repeat for several (default: all)",
    )
    p.add_argument(
        "--namespace-selector",
        default="",
        help="watch the namespaces whose labels match this selector (e.g. "
        "etcd.runbook.io/enrolled=true), as they are labelled and unlabelled; not with "
        "--namespace (docs/install.md, labelled namespaces)",
    )
    p.add_argument(
        "--max-concurrent-reconciles",
        type=int,
        default=4,
        help="objects reconciled in parallel per watched kind (default: 4)",
    )
    p.add_argument(
        "--reconcile-period",
        type=_positive,
        default=None,
        help="resync period in seconds for every watch (default: each watch's reconcilePeriod)",
    )
    p.add_argument(
        "--artifacts-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "etcd-runbook-operator" / "artifacts",
        help="where ansible-runner artifacts are kept (maxRunnerArtifacts per object)",
    )
    p.add_argument(
        "--metrics-bind-address",
        type=_address,
        default=_address("127.0.0.1:8080"),
        help="HOST:PORT of the Prometheus endpoint (default: 127.0.0.1:8080)",
    )
    p.add_argument(
        "--health-probe-bind-address",
        type=_address,
        default=_address("127.0.0.1:8081"),
        help="HOST:PORT of /healthz and /readyz (default: 127.0.0.1:8081)",
    )
    p.add_argument(
        "--leader-elect",
        action="store_true",
        help="run only while holding the coordination.k8s.io Lease",
    )
    p.add_argument(
        "--leader-election-id",
        default="etcd-runbook-operator",
        help="name of the Lease (default: etcd-runbook-operator)",
    )
    p.add_argument(
        "--leader-election-namespace",
        help="namespace of the Lease (default: $POD_NAMESPACE, else the kubeconfig's namespace)",
    )
    p.add_argument(
        "--runner-timeout",
        type=_positive,
        default=1800.0,
        help="seconds a playbook run may take before it is stopped at a task "
        "boundary (default: 1800)",
    )
    p.add_argument(
        "--ansible-fork-server",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fork each playbook run from a process that has imported ansible-playbook "
        "once, instead of starting ansible-playbook afresh (default: on; docs/operator.md)",
    )
    p.add_argument(
        "--shutdown-grace-period",
        type=float,
        default=30.0,
        help="on SIGTERM, seconds to let runs in flight finish before asking them "
        "to stop at the next task boundary (default: 30)",
    )
    p.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="(default: INFO)",
    )
    return p
