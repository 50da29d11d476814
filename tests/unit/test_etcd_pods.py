"""etcd_runbook/rules/etcd_pods.py: what the kubelet and the scheduler say of a member Pod,
one reading for the plan and the look's waits."""

from __future__ import annotations

import pytest

from etcd_runbook.rules.etcd_pods import seconds_between, unschedulable


@pytest.mark.parametrize(
    ("earlier", "later", "seconds"),
    [
        ("2026-11-27T02:10:00Z", "2026-11-27T02:10:30Z", 30.0),
        ("2026-11-27T02:10:00.500000Z", "2026-11-27T02:10:00Z", -0.5),
        ("2026-11-27T02:10:00+00:00", "2026-11-27T03:10:00Z", 3600.0),
        ("", "2026-11-27T02:10:00Z", None),
        ("yesterday", "2026-11-27T02:10:00Z", None),
    ],
)
def test_seconds_between(earlier, later, seconds):
    assert seconds_between(earlier, later) == seconds


@pytest.mark.parametrize(
    ("conditions", "said"),
    [
        ([], ""),
        ([{"type": "PodScheduled", "status": "True"}], ""),
        ([{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}], ""),
        (
            [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
            "no node fits it",
        ),
        (
            [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": " m ",
                }
            ],
            "m",
        ),
    ],
)
def test_unschedulable_is_the_scheduler_s_word(conditions, said):
    assert unschedulable({"status": {"conditions": conditions}}) == said
