"""`-e context=` on a break-glass playbook: every play of every playbook a person runs by hand
hands the context to its modules and port-forwards (K8S_AUTH_CONTEXT), and only when given
(an empty context would name none). The run on the local cluster: tests/e2e/test_etcdbackup.py,
a backup by hand through a kubeconfig whose current context leads nowhere."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from jinja2 import Environment

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
BY_HAND = [
    "etcd-backup.yml",
    "etcd-defrag.yml",
    "etcd-member-replace.yml",
    "etcd-recover-quorum.yml",
    "etcd-restore.yml",
    "etcd-status.yml",
    "etcdcluster.yml",
]


@pytest.mark.parametrize("playbook", BY_HAND)
@pytest.mark.parametrize(
    ("given", "env"),
    [({}, {}), ({"context": ""}, {}), ({"context": "prod"}, {"K8S_AUTH_CONTEXT": "prod"})],
)
def test_every_play_hands_the_context_on_only_when_given(playbook, given, env):
    plays = yaml.safe_load((PLAYBOOKS / playbook).read_text())
    for play in plays:
        expression = play["environment"].strip().removeprefix("{{").removesuffix("}}")
        assert Environment().compile_expression(expression)(**given) == env, play["name"]
