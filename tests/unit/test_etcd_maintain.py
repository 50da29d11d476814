"""The etcd_maintenance module's one call (etcd_runbook/operations/etcd_maintenance_actions.py
`maintain`), etcd faked: the action named runs with the params and check mode, and its diff
goes back only when asked for. Each action on real etcd: tests/modules/test_etcd_maintenance.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from etcd_runbook.operations import etcd_maintenance_actions as actions


@pytest.fixture
def calls(monkeypatch):
    seen: list[tuple[str, bool]] = []

    class Client:
        def __init__(self, connection: Any):
            pass

        def __enter__(self) -> Client:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    def action(name: str):
        def run(client: Any, params: dict[str, Any], check: bool) -> dict[str, Any]:
            seen.append((name, check))
            return {"changed": True, "msg": name, "diff": {"before": "a\n", "after": "b\n"}}

        return run

    monkeypatch.setattr(actions, "EtcdClient", Client)
    monkeypatch.setattr(actions, "ConnectionParams", SimpleNamespace(from_module_params=repr))
    for name in actions.ACTIONS:
        monkeypatch.setitem(actions.ACTIONS, name, action(name))
    return seen


def test_every_action_of_the_module_is_one_of_the_operations():
    assert list(actions.ACTIONS) == [
        "defragment",
        "compact",
        "move_leader",
        "disarm_alarms",
        "downgrade",
    ]


@pytest.mark.parametrize("name", ["defragment", "compact", "move_leader", "disarm_alarms"])
@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize("diff", [False, True])
def test_the_action_named_runs_and_its_diff_only_when_asked(calls, name, check_mode, diff):
    result = actions.maintain({"action": name}, check_mode=check_mode, diff=diff)
    assert calls == [(name, check_mode)]
    assert result["msg"] == name
    assert ("diff" in result) is diff
