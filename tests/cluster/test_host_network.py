"""What the cluster exposes on the host: listeners only on loopback or the node bridge, and
its filter chain first in INPUT and FORWARD."""

from __future__ import annotations

import re
import subprocess

import pytest

pytestmark = pytest.mark.cluster

ALLOWED = re.compile(r"^(127\.0\.0\.1|10\.244\.\d+\.1|\[::1\]):\d+$")


def test_cluster_daemons_listen_only_on_loopback_or_bridge(k8s_cluster):
    # The daemons hack/cluster started (its pid files), not other tests' etcd processes.
    run = k8s_cluster.kubeconfig.parent / "run"
    pids = {f.read_text().strip() for f in run.glob("*.pid")}
    assert len(pids) >= 9, f"pid files in {run}: {sorted(p.name for p in run.glob('*.pid'))}"
    out = subprocess.run(["ss", "-Hltunp"], capture_output=True, text=True, check=True).stdout
    ours = [
        line.split() for line in out.splitlines() if set(re.findall(r"pid=(\d+),", line)) & pids
    ]
    assert len(ours) >= 8, f"listeners of the cluster's daemons: {ours}"
    wide = [f"{fields[4]} {fields[-1]}" for fields in ours if not ALLOWED.match(fields[4])]
    assert wide == []


@pytest.mark.parametrize("hook", ["INPUT", "FORWARD"])
def test_filter_chain_is_first(k8s_cluster, hook):
    rules = subprocess.run(
        ["iptables", "-w", "-S", hook], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert next(r for r in rules if r.startswith("-A")) == f"-A {hook} -j EROP-FILTER"
