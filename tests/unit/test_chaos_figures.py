"""The chaos run's figures (tests/e2e/test_chaos.py, `figures`): seconds from each fault's end
until every member is Ready again and until the EtcdCluster says Available again, by kind."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_chaos import figures

# Samples (time, every member Ready, Available), one a second from t=10.
SAMPLES = [
    (11.0, False, True),
    (12.0, False, False),
    (13.0, False, False),
    (14.0, True, True),
    (15.0, True, True),
    (21.0, False, True),
    (22.0, True, True),
]


@pytest.mark.parametrize(
    "done, ready, available",
    [
        # Unavailable from 12 to 14: back 4 s after the fault ended; Ready at 14 as well.
        ([("pod-kill e-0", 10.0)], 4.0, 4.0),
        # Never unavailable before the next fault (at 20): Available throughout, counted 0.
        ([("pod-delete e-1", 14.5), ("partition e-2", 20.0)], 0.5, 0.0),
    ],
    ids=["unavailable-then-back", "available-throughout"],
)
def test_each_fault_is_timed_until_ready_and_available_again(
    done: list[tuple[str, float]], ready: float, available: float
) -> None:
    got = figures(done, SAMPLES, [])
    kind = done[0][0].split()[0]
    assert got["ready_again_s"][kind]["median"] == ready
    assert got["available_again_s"][kind]["median"] == available


def test_a_fault_never_seen_back_is_counted_unseen_and_operator_kills_are_not_timed() -> None:
    samples = [(11.0, False, False), (12.0, False, False)]
    got = figures([("data-destroy e-0", 10.0), ("operator-kill", 10.5)], samples, [])
    assert got["ready_again_s"] == {"data-destroy": {"n": 1, "unseen": 1}}
    assert got["available_again_s"] == {"data-destroy": {"n": 1, "unseen": 1}}


def test_the_longest_write_outage_is_the_widest_gap_between_acknowledged_puts() -> None:
    ops: list[dict[str, Any]] = [
        {"op": "put", "return": 1_000_000_000},
        {"op": "put", "return": 4_500_000_000},
        {"op": "put"},  # never acknowledged: no return
        {"op": "get", "return": 9_000_000_000},
        {"op": "put", "return": 5_000_000_000},
    ]
    assert figures([], [], ops)["longest_write_outage_s"] == 3.5
