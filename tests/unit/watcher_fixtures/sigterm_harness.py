"""The watcher's real shutdown path around a real ansible-runner run, with a fake API server.

Usage: sigterm_harness.py MARKER_DIR GRACE_SECONDS ARTIFACTS_DIR FORKSERVER(True|False)
A Widget whose playbook (sleep.yml) writes markers is reconciled as soon as the process starts;
the test sends SIGTERM while the first task sleeps and reads the markers and exit code.
"""

import argparse
import logging
import sys
import threading
from pathlib import Path
from typing import Any

from etcd_runbook_operator.config import Target, Watch
from etcd_runbook_operator.controller import Controller
from etcd_runbook_operator.events import EventRecorder
from etcd_runbook_operator.kube import Resource
from etcd_runbook_operator.main import Operator, _install_signals
from etcd_runbook_operator.metrics import Metrics
from etcd_runbook_operator.runner import PlaybookRunner
from tests.unit.watcher_fakes import FakeKube

REPO = Path(__file__).resolve().parents[3]
WIDGETS = Resource("test.runbook.io", "v1", "widgets", "Widget")


def main() -> int:
    logging.basicConfig(level=logging.INFO)
    marker_dir, grace, artifacts = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3])
    forkserver = sys.argv[4] == "True"
    kube: Any = FakeKube()
    kube.put_object(
        WIDGETS.path("ns", "w"),
        {
            "apiVersion": "test.runbook.io/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": "ns", "uid": "u", "generation": 1},
            "spec": {},
        },
    )
    playbook = Path(__file__).resolve().parent / "sleep.yml"
    watch = Watch(
        group="test.runbook.io",
        version="v1",
        kind="Widget",
        target=Target(playbook=playbook, vars={"marker_dir": marker_dir}),
        watch_dependent_resources=False,
    )
    op = Operator.__new__(Operator)
    op.args = argparse.Namespace(
        shutdown_grace_period=grace,
        metrics_bind_address=("127.0.0.1", 0),
        health_probe_bind_address=("127.0.0.1", 0),
    )
    op.stop, op.started, op.metrics = threading.Event(), threading.Event(), Metrics()
    op.runner = PlaybookRunner(REPO, artifacts, forkserver=forkserver)
    op.controllers = [
        Controller(
            kube,
            watch,
            WIDGETS,
            op.runner,
            EventRecorder(kube),
            op.metrics,
            [None],
            runner_timeout=60,
            workers=2,
        )
    ]
    op.elector, op._elector_thread = None, None
    op.enrolment, op._enrolment_thread = None, None
    _install_signals(op)
    return op.run()


if __name__ == "__main__":
    sys.exit(main())
