"""The space rules (etcd_runbook/rules/cluster/space.py): which members are worth
defragmenting, in which order, when none may be, NOSPACE recovered or said full, CORRUPT
halting every runbook; and the records and Events of a run."""

from __future__ import annotations

from typing import Any

import pytest

from etcd_runbook.names import ANN_DEFRAGMENTED, ANN_SPACE_FULL
from etcd_runbook.rules import etcd_manifests as em
from etcd_runbook.rules import etcd_plan as ep
from etcd_runbook.rules.cluster.space import (
    defrag_events,
    defrag_order,
    defrag_records,
    nospace_verdict,
    space_by_hand,
    space_verdict,
    window_wait,
    worth_defragmenting,
)
from etcd_runbook.rules.cluster.spec import MAX_DEFRAG_MEMBER_TIMEOUT, normalize_spec
from tests.unit.test_etcd_plan import claim, healthy3, mid, obj

MiB = 1024**2
POLICY = {"enabled": True, "free_percent": 50, "min_reclaim": 64 * MiB, "member_timeout": 600}


def sized(name: str, size: int | None, in_use: int | None, learner: bool = False) -> dict:
    return {"name": name, "learner": learner, "db_size": size, "db_size_in_use": in_use}


@pytest.mark.parametrize(
    ("sizes", "chosen", "skipped"),
    [
        # Half free and 100Mi: chosen.
        ([sized("e-0", 200 * MiB, 100 * MiB)], ["e-0"], []),
        # 40% free: not fragmented enough, and nothing said.
        ([sized("e-0", 250 * MiB, 150 * MiB)], [], []),
        # 90% free but only 9Mi: the trap of a rewrite that frees nothing worth it; said.
        ([sized("e-0", 10 * MiB, 1 * MiB)], [], ["e-0 is 90% free but would reclaim only"]),
        # A learner is never defragmented; a member that did not answer is not judged.
        ([sized("e-3", 400 * MiB, 10 * MiB, learner=True), sized("e-1", None, None)], [], []),
        # Exactly at both thresholds: chosen.
        ([sized("e-2", 128 * MiB, 64 * MiB)], ["e-2"], []),
    ],
)
def test_worth_defragmenting(sizes: list, chosen: list, skipped: list) -> None:
    got_chosen, got_skipped = worth_defragmenting(sizes, POLICY)
    assert got_chosen == chosen
    assert len(got_skipped) == len(skipped)
    for got, want in zip(got_skipped, skipped, strict=True):
        assert got.startswith(want), got


@pytest.mark.parametrize(
    ("names", "leader", "order"),
    [
        (["e-0", "e-1", "e-2"], "e-0", ["e-1", "e-2", "e-0"]),
        (["e-10", "e-2", "e-1"], "e-2", ["e-1", "e-10", "e-2"]),
        (["e-1"], "e-0", ["e-1"]),  # the leader not among them
        (["e-0"], "e-0", ["e-0"]),
    ],
)
def test_defrag_order_followers_by_index_leader_last(names: list, leader: str, order: list) -> None:
    assert defrag_order(names, leader) == order


@pytest.mark.parametrize(
    ("sizes", "quota", "volume", "disarm", "words"),
    [
        ([{"name": "e-0", "db_size": 10 * MiB}], 320 * MiB, 1024 * MiB, True, []),
        # 90% of the quota is the line: at it, full.
        (
            [{"name": "e-0", "db_size": 288 * MiB}],
            320 * MiB,
            1024 * MiB,
            False,
            ["e-0's database is 288Mi of its 320Mi quota"],
        ),
        # A quota below what the volume holds: raising it is offered, with the figure.
        (
            [{"name": "e-1", "db_size": 60 * MiB}, {"name": "e-2", "db_size": 62 * MiB}],
            64 * MiB,
            1024 * MiB,
            False,
            ["e-2's database", "quotaBackendBytes up to 320Mi"],
        ),
        # At the volume's limit already: only a larger volume (or deletions) helps.
        (
            [{"name": "e-0", "db_size": 300 * MiB}],
            320 * MiB,
            1024 * MiB,
            False,
            ["or grow spec.storage.size"],
        ),
    ],
)
def test_space_verdict(sizes: list, quota: int, volume: int, disarm: bool, words: list) -> None:
    verdict = space_verdict(sizes, quota, volume, revision=77)
    assert verdict["disarm"] is disarm
    for word in words:
        assert word in verdict["message"], verdict["message"]
    assert verdict["record"].startswith("77 ") is not disarm
    if quota == 320 * MiB and not disarm:
        assert "quotaBackendBytes up to" not in verdict["message"]


def sizes_of(facts: dict, sizes: dict[int, tuple[int, int]], revision: int = 500) -> dict:
    for status in facts["info"]["status"]:
        n = int(status["member_id"][1:])
        status["db_size"], status["db_size_in_use"] = sizes[n]
        status["revision"] = revision
    return facts


FRAGMENTED = {0: (300 * MiB, 20 * MiB), 1: (300 * MiB, 20 * MiB), 2: (300 * MiB, 20 * MiB)}


def nospace(facts: dict, *members: int, kind: str = "NOSPACE") -> dict:
    facts["info"]["alarms"] = [{"member_id": mid(n), "alarm": kind} for n in members]
    return facts


def test_policy_defragments_followers_then_the_leader() -> None:
    p = ep.plan(sizes_of(healthy3(), FRAGMENTED))
    assert p["space"]["action"] == "defragment"
    assert p["space"]["members"] == ["e-1", "e-2", "e-0"]  # e-0 leads (info's default)
    assert p["busy"]


@pytest.mark.parametrize(
    ("change", "waits_for"),
    [
        (lambda f: f["info"]["members"][1].update(healthy=False), "e-1 is not healthy"),
        (lambda f: f.update(pods=f["pods"][:2]), "a member's Pod is being made again"),
        (lambda f: f["object"]["spec"].update(size=4), "a member is being added"),
        (lambda f: f["object"]["spec"].update(version="3.6.17"), "a member is being rolled"),
        (
            lambda f: f.update(
                backups=[
                    {
                        "metadata": {"name": "nightly"},
                        "spec": {"clusterName": "e"},
                        "status": {"phase": "Running"},
                    }
                ]
            ),
            "EtcdBackup nightly is taking a snapshot",
        ),
    ],
)
def test_defragmentation_waits_while_unhealthy_or_another_runbook_acts(
    change: Any, waits_for: str
) -> None:
    facts = sizes_of(healthy3(), FRAGMENTED)
    change(facts)
    p = ep.plan(facts)
    assert p["space"]["action"] == ""
    assert waits_for in p["space"]["why"], p["space"]["why"]


def test_policy_off_or_nothing_worth_it_does_nothing() -> None:
    off = sizes_of(healthy3(defragmentation={"enabled": False}), FRAGMENTED)
    assert ep.plan(off)["space"]["action"] == ""
    small = sizes_of(healthy3(), {n: (10 * MiB, 1 * MiB) for n in range(3)})
    p = ep.plan(small)
    assert (
        p["space"]["action"] == ""
        and "under spec.defragmentation.minReclaim" in (p["space"]["why"])
    )
    assert "under spec.defragmentation.minReclaim" in ep.report(small)["status"]["space"]["message"]


def test_nospace_compacts_and_defragments_every_member_and_is_announced() -> None:
    full = {n: (320 * MiB, 319 * MiB) for n in range(3)}
    facts = nospace(sizes_of(healthy3(), full), 0, 1)
    p = ep.plan(facts)
    assert p["space"]["action"] == "nospace"
    assert p["space"]["members"] == ["e-1", "e-2", "e-0"] and p["space"]["revision"] == 500
    report = ep.report(facts)
    assert [e["reason"] for e in report["events"]] == ["NoSpace"]
    assert report["conditions"]["Progressing"]["reason"] == "RecoveringSpace"
    assert report["status"]["alarms"] == [
        {"member": "e-0", "alarm": "NOSPACE"},
        {"member": "e-1", "alarm": "NOSPACE"},
    ]


def test_nospace_full_at_the_recorded_revision_is_said_not_retried() -> None:
    facts = nospace(sizes_of(healthy3(), FRAGMENTED), 0)
    record: dict[str, Any] = {ANN_SPACE_FULL: f"500 e-2 {300 * MiB}"}
    facts["claims"] = [claim(i, **record) for i in range(3)]
    p = ep.plan(facts)
    assert p["space"]["action"] == ""
    assert p["refusals"][0]["reason"] == "DatabaseFull"
    assert "e-2's database is 300Mi of its 320Mi quota" in p["refusals"][0]["message"]
    report = ep.report(facts)
    assert report["failed"] and report["conditions"]["Degraded"]["reason"] == "DatabaseFull"
    assert "NoSpace" not in [e["reason"] for e in report["events"]]
    # A deletion moved the revision: tried again.
    moved = nospace(sizes_of(healthy3(), FRAGMENTED, 501), 0)
    moved["claims"] = facts["claims"]
    assert ep.plan(moved)["space"]["action"] == "nospace"


def test_corrupt_alarm_halts_every_runbook() -> None:
    facts = nospace(sizes_of(healthy3(size=4), FRAGMENTED), 2, kind="CORRUPT")
    facts["pods"] = facts["pods"][:2]
    p = ep.plan(facts)
    assert p["corrupt"] == ["e-2"]
    assert not (p["add"] or p["heal"] or p["roll"] or p["space"]["action"])
    assert p["refusals"][-1]["reason"] == "CorruptAlarm"
    assert "e-2" in p["refusals"][-1]["message"]
    assert ep.report(facts)["failed"]


def test_invalid_policy_fields_are_named() -> None:
    spec = normalize_spec(
        obj(defragmentation={"freePercent": 0, "minReclaim": "lots", "memberTimeout": "0s"}), {}
    )
    fields = [p["field"] for p in spec["problems"]]
    assert fields == [
        "spec.defragmentation.freePercent",
        "spec.defragmentation.minReclaim",
        "spec.defragmentation.memberTimeout",
    ]
    assert "such as 64Mi" in spec["problems"][1]["message"]
    assert spec["defragmentation"]["member_timeout"] == 600


@pytest.mark.parametrize(
    ("timeout", "seconds", "refused"),
    [
        ("90s", 90, False),
        ("10m", 600, False),
        # Longer than the kubelet's patience with a member that does not answer /livez.
        ("11m", 600, True),
        ("1h", 600, True),
    ],
)
def test_a_member_s_defragmentation_is_given_ten_minutes_at_most(timeout, seconds, refused):
    spec = normalize_spec(obj(defragmentation={"memberTimeout": timeout}), {})
    assert spec["defragmentation"]["member_timeout"] == seconds
    messages = [p["message"] for p in spec["problems"]]
    assert bool(messages) == refused
    if refused:
        assert "memberTimeout must be at most 10m" in messages[0] and "/livez" in messages[0]


def test_the_kubelet_never_restarts_a_member_within_its_defragmentation() -> None:
    patience = em.LIVENESS_PERIOD * em.LIVENESS_FAILURES
    assert patience > MAX_DEFRAG_MEMBER_TIMEOUT


RESULTS = [
    {
        "item": "e-1",
        "members": [
            {
                "name": "e-1",
                "db_size_before": 300 * MiB,
                "db_size_in_use_before": 20 * MiB,
                "db_size_after": 21 * MiB,
                "started_at": 1795759240.0,
                "finished_at": 1795759242.5,
                "leader_moved_to": None,
            }
        ],
    },
    {
        "item": "e-0",
        "members": [
            {
                "name": "e-0",
                "db_size_before": 300 * MiB,
                "db_size_in_use_before": 20 * MiB,
                "db_size_after": 62 * MiB,
                "started_at": 1795759250.0,
                "finished_at": 1795759251.0,
                "leader_moved_to": "e-1",
            }
        ],
    },
]


def test_records_and_events_of_a_run() -> None:
    records = defrag_records(RESULTS, "ns")
    assert [r["metadata"]["name"] for r in records] == ["e-1-data", "e-0-data"]
    assert records[0]["metadata"]["annotations"] == {
        ANN_DEFRAGMENTED: f"2026-11-27T06:00:42Z {300 * MiB} {21 * MiB}"
    }
    messages = [e["message"] for e in defrag_events(RESULTS)]
    assert messages[0] == "e-1: database 300Mi to 21Mi (20Mi in use) in 2.5 s"
    assert messages[1].endswith("after leadership moved to e-1")
    spec = normalize_spec(obj(storage={"quotaBackendBytes": "64Mi"}), {})
    space = {"members": ["e-1", "e-0"], "revision": 9}
    verdict = nospace_verdict(RESULTS, space, spec, "ns")
    assert not verdict["disarm"] and "e-0's database is 62Mi" in verdict["message"]
    assert [r["metadata"]["annotations"][ANN_SPACE_FULL] for r in verdict["records"]] == [
        f"9 e-0 {62 * MiB}"
    ] * 2
    # Recovered (every member below the disarm line): a former record is removed.
    roomy = normalize_spec(obj(storage={"quotaBackendBytes": "128Mi"}), {})
    verdict = nospace_verdict(RESULTS, space, roomy, "ns")
    assert verdict["disarm"]
    assert [r["metadata"]["annotations"] for r in verdict["records"]] == [
        {ANN_SPACE_FULL: None}
    ] * 2
    record: dict[str, Any] = {ANN_DEFRAGMENTED: "2026-11-17T20:40:42Z 1 2"}
    claimed = [claim(0, **record)]
    facts = {**healthy3(), "claims": claimed + [claim(i) for i in (1, 2)]}
    members = ep.report(facts)["status"]["members"]
    assert members[0]["lastDefragmented"] == "2026-11-17T20:40:42Z"
    assert "lastDefragmented" not in members[1]


@pytest.mark.parametrize(
    ("sizes", "alarm", "recheck"),
    [
        # Far from the quota (320Mi for the default 1Gi volume): the full-run interval.
        ({n: (10 * MiB, 1 * MiB) for n in range(3)}, "", None),
        ({n: (79 * MiB, 1 * MiB) for n in range(3)}, "", None),
        # A quarter of it on one member: every two minutes.
        ({0: (10 * MiB, 1 * MiB), 1: (80 * MiB, 75 * MiB), 2: (1 * MiB, 1 * MiB)}, "", 120.0),
        # Half of it: often.
        ({0: (10 * MiB, 1 * MiB), 1: (160 * MiB, 150 * MiB), 2: (1 * MiB, 1 * MiB)}, "", 30.0),
        ({n: (10 * MiB, 1 * MiB) for n in range(3)}, "NOSPACE", 30.0),
    ],
)
def test_a_cluster_under_space_pressure_is_looked_at_again_soon(
    sizes: dict, alarm: str, recheck: float | None
) -> None:
    facts = sizes_of(healthy3(defragmentation={"enabled": False}), sizes)
    if alarm:
        nospace(facts, 0, kind=alarm)
    assert ep.report(facts)["requeue_after"] == recheck


@pytest.mark.parametrize(
    ("change", "asked", "least", "action", "members", "refused"),
    [
        # Every voting member, each with 280Mi to reclaim: followers first, the leader last.
        (None, [], "", "defragment", ["e-1", "e-2", "e-0"], ""),
        # The member asked only; one that would reclaim too little is skipped and said.
        (None, ["e-2", "e-0"], "", "defragment", ["e-2", "e-0"], ""),
        (None, [], "1Gi", "", [], ""),
        (None, ["e-7"], "", "", [], "e-7 is no voting member of e"),
        (None, [], "lots", "", [], "min_reclaim must be a quantity such as 64Mi"),
        (lambda f: nospace(f, 1), [], "", "nospace", ["e-1", "e-2", "e-0"], ""),
        (lambda f: nospace(f, 1, kind="CORRUPT"), [], "", "", [], "a CORRUPT alarm is raised"),
        (
            lambda f: f["info"]["members"][2].update(healthy=False),
            [],
            "",
            "",
            [],
            "not now: e-2 is not healthy",
        ),
    ],
)
def test_space_by_hand(
    change: Any, asked: list, least: str, action: str, members: list, refused: str
) -> None:
    facts = sizes_of(healthy3(defragmentation={"enabled": False}), FRAGMENTED)
    if change:
        change(facts)
    space = space_by_hand(ep.plan(facts), asked, least)
    assert space["action"] == action
    assert space["members"] == members
    assert space["refused"].startswith(refused) if refused else space["refused"] == ""
    if least == "1Gi":
        assert "e-0 would reclaim only 280Mi (min_reclaim 1Gi)" in space["why"]


# --- the schedule window -------------------------------------------------------------------


def windowed(schedule: str | None, window: int = 3600, zone: str = "UTC") -> dict:
    return {**POLICY, "schedule": schedule, "window": window, "time_zone": zone}


@pytest.mark.parametrize(
    ("policy", "now", "opens"),
    [
        # No schedule: the thresholds alone decide, at any time.
        (windowed(None), "2026-11-28T12:00:00Z", None),
        # An hour from 03:00: open from its first second to its last.
        (windowed("0 3 * * *"), "2026-11-28T03:00:00Z", None),
        (windowed("0 3 * * *"), "2026-11-28T03:59:59Z", None),
        (windowed("0 3 * * *"), "2026-11-28T04:00:00Z", "2026-11-29T03:00:00Z"),
        (windowed("0 3 * * *"), "2026-11-28T02:59:59Z", "2026-11-28T03:00:00Z"),
        # Two hours from 23:00 cross midnight.
        (windowed("0 23 * * *", 7200), "2026-11-29T00:30:00Z", None),
        (windowed("0 23 * * *", 7200), "2026-11-29T01:00:00Z", "2026-11-29T23:00:00Z"),
        # 03:00 in Berlin is 02:00 UTC in winter; the next opening is said in UTC.
        (windowed("0 3 * * *", zone="Europe/Berlin"), "2026-11-28T02:30:00Z", None),
        (
            windowed("0 3 * * *", zone="Europe/Berlin"),
            "2026-11-28T03:30:00Z",
            "2026-11-29T02:00:00Z",
        ),
        # Clocks forward on 29 March: 02:30 never happens that night, no window opens.
        (windowed("30 2 * * *", zone="Europe/Berlin"), "2026-03-28T01:45:00Z", None),
        (
            windowed("30 2 * * *", zone="Europe/Berlin"),
            "2026-03-29T01:00:00Z",
            "2026-03-30T00:30:00Z",
        ),
        # Clocks back on 25 October: 02:30 passes twice, the window opens at the first only.
        (windowed("30 2 * * *", zone="Europe/Berlin"), "2026-10-25T01:00:00Z", None),
        (
            windowed("30 2 * * *", zone="Europe/Berlin"),
            "2026-10-25T01:45:00Z",
            "2026-10-26T01:30:00Z",
        ),
        # The shortest window, every quarter hour.
        (windowed("*/15 * * * *", 60), "2026-11-28T03:00:59Z", None),
        (windowed("*/15 * * * *", 60), "2026-11-28T03:01:00Z", "2026-11-28T03:15:00Z"),
        # A weekend: two days from Saturday 00:00.
        (windowed("0 0 * * SAT", 48 * 3600), "2026-11-29T23:59:00Z", None),
        (windowed("0 0 * * SAT", 48 * 3600), "2026-11-30T00:00:00Z", "2026-12-05T00:00:00Z"),
        # No window is known to open: never outside one.
        (windowed("0 0 30 2 *"), "2026-11-28T00:30:00Z", ""),
        (windowed("0 3 * *"), "2026-11-28T03:30:00Z", ""),
        (windowed("0 3 * * *", zone="Mars/Olympus"), "2026-11-28T03:30:00Z", ""),
        (windowed("0 3 * * *"), "", ""),
    ],
)
def test_window_wait(policy: dict, now: str, opens: str | None) -> None:
    assert window_wait(policy, now) == opens


def scheduled(sizes: dict, now: str, alarm: str = "", **policy: Any) -> dict:
    facts = sizes_of(healthy3(defragmentation=policy), sizes)
    facts["observed_at"] = now
    if alarm:
        nospace(facts, 0, kind=alarm)
    return facts


def unhealthy(facts: dict, n: int) -> dict:
    facts["info"]["members"][n].update(healthy=False)
    return facts


NIGHTLY = {"schedule": "0 3 * * *"}
# Worth defragmenting (68Mi free each) and below every pressure step (a quarter of 320Mi).
LIGHT = {n: (78 * MiB, 10 * MiB) for n in range(3)}


@pytest.mark.parametrize(
    ("facts", "action", "why"),
    [
        # Outside the window: nothing, and said with the next opening.
        (
            scheduled(LIGHT, "2026-11-28T12:00:00Z", **NIGHTLY),
            "",
            "e-1, e-2, e-0 would free 204Mi: waiting for the defragmentation window "
            '(spec.defragmentation.schedule "0 3 * * *", next 2026-11-29T03:00:00Z)',
        ),
        (
            scheduled(LIGHT, "2026-11-28T12:00:00Z", **NIGHTLY, timeZone="Europe/Berlin"),
            "",
            "e-1, e-2, e-0 would free 204Mi: waiting for the defragmentation window "
            '(spec.defragmentation.schedule "0 3 * * *" in Europe/Berlin, '
            "next 2026-11-29T02:00:00Z)",
        ),
        # Inside it: the thresholds decide, as without a schedule.
        (
            scheduled(LIGHT, "2026-11-28T03:10:00Z", **NIGHTLY),
            "defragment",
            "defragmenting e-1, e-2, e-0 at least 50% free",
        ),
        (
            scheduled(
                {n: (10 * MiB, 1 * MiB) for n in range(3)}, "2026-11-28T03:10:00Z", **NIGHTLY
            ),
            "",
            "e-0 is 90% free but would reclaim only 9Mi",
        ),
        # Nothing worth it outside the window: the thresholds' word, not the window's.
        (
            scheduled(
                {n: (10 * MiB, 1 * MiB) for n in range(3)}, "2026-11-28T12:00:00Z", **NIGHTLY
            ),
            "",
            "e-0 is 90% free but would reclaim only 9Mi",
        ),
        # Outside the window and a member unhealthy: the window is the wait said (the longer).
        (
            unhealthy(scheduled(LIGHT, "2026-11-28T12:00:00Z", **NIGHTLY), 1),
            "",
            "e-1, e-2, e-0 would free 204Mi: waiting for the defragmentation window",
        ),
        (
            unhealthy(scheduled(LIGHT, "2026-11-28T03:10:00Z", **NIGHTLY), 1),
            "",
            "defragmentation of e-1, e-2, e-0 at least 50% free waits: e-1 is not healthy",
        ),
        # NOSPACE is an outage: recovered whatever the window.
        (
            scheduled(LIGHT, "2026-11-28T12:00:00Z", "NOSPACE", **NIGHTLY),
            "nospace",
            "NOSPACE on e-0: compacting every old revision",
        ),
        (
            scheduled(LIGHT, "2026-11-28T12:00:00Z", **NIGHTLY, enabled=False),
            "",
            "",
        ),
    ],
)
def test_the_policy_defragments_only_inside_its_window(facts: dict, action: str, why: str) -> None:
    p = ep.plan(facts)
    assert p["space"]["action"] == action
    assert p["space"]["why"].startswith(why), p["space"]["why"]
    if not action:
        assert ep.report(facts)["status"]["space"]["message"] == p["space"]["why"]


@pytest.mark.parametrize(
    ("sizes", "now", "alarm", "recheck"),
    [
        # Waiting for the window: looked at again when it opens.
        (LIGHT, "2026-11-29T02:59:50Z", "", 10.0),
        (LIGHT, "2026-11-28T12:00:00Z", "", 15 * 3600.0),
        # Under pressure too: whichever comes first.
        (FRAGMENTED, "2026-11-28T12:00:00Z", "", 30.0),
        (FRAGMENTED, "2026-11-29T02:59:50Z", "", 10.0),
        (LIGHT, "2026-11-29T02:59:59Z", "NOSPACE", 1.0),
        # Inside the window, or nothing worth defragmenting: no reason of the window's.
        (LIGHT, "2026-11-29T03:30:00Z", "", None),
        ({n: (10 * MiB, 1 * MiB) for n in range(3)}, "2026-11-28T12:00:00Z", "", None),
    ],
)
def test_a_cluster_waiting_for_its_window_is_looked_at_when_it_opens(
    sizes: dict, now: str, alarm: str, recheck: float | None
) -> None:
    facts = scheduled(sizes, now, alarm, **NIGHTLY)
    assert ep.report(facts)["requeue_after"] == recheck
    off = scheduled(sizes, now, alarm, **NIGHTLY, enabled=False)
    assert ep.report(off)["requeue_after"] == (30.0 if sizes is FRAGMENTED or alarm else None)


UNTIL_FIXED = "; the policy defragments no member until it is fixed"


@pytest.mark.parametrize(
    ("asked", "field", "message"),
    [
        (
            {"schedule": "0 3 * *"},
            "schedule",
            "spec.defragmentation.schedule '0 3 * *' is not a cron line (five fields, or a "
            "macro such as @daily)",
        ),
        (
            {"schedule": "0 3 * * 7"},
            "schedule",
            "spec.defragmentation.schedule '0 3 * * 7': the operator's cron lines take days of "
            "the week 0-6, as a CronJob does; write 0 or SUN for Sunday",
        ),
        ({"schedule": ""}, "schedule", "spec.defragmentation.schedule '' is not a cron line"),
        ({"schedule": 3}, "schedule", "spec.defragmentation.schedule '3' is not a cron line"),
        (
            {"window": "30s"},
            "window",
            "spec.defragmentation.window must be a duration from 1m to 168h such as 2h, got '30s'",
        ),
        ({"window": "168h1s"}, "window", "spec.defragmentation.window must be a duration from"),
        ({"window": "0"}, "window", "spec.defragmentation.window must be a duration from"),
        ({"window": "2 hours"}, "window", "spec.defragmentation.window must be a duration from"),
        (
            {"timeZone": "Mars/Olympus"},
            "timeZone",
            "spec.defragmentation.timeZone must be an IANA time zone such as Europe/Berlin, got "
            "'Mars/Olympus'",
        ),
        ({"timeZone": "../etc/passwd"}, "timeZone", "spec.defragmentation.timeZone must be an"),
        ({"timeZone": 1}, "timeZone", "spec.defragmentation.timeZone must be an IANA time zone"),
    ],
)
def test_a_window_that_cannot_be_read_is_refused_and_nothing_defragmented(
    asked: dict, field: str, message: str
) -> None:
    spec = normalize_spec(obj(defragmentation={**NIGHTLY, **asked}), {})
    (problem,) = spec["problems"]
    assert (problem["reason"], problem["field"]) == ("InvalidSpec", f"spec.defragmentation.{field}")
    assert problem["message"].startswith(message) and problem["message"].endswith(UNTIL_FIXED)
    # Inside the window the spec would open, and fragmented enough: still nothing.
    facts = scheduled(LIGHT, "2026-11-28T03:10:00Z", **{**NIGHTLY, **asked})
    assert ep.plan(facts)["space"]["action"] == ""
    # And what the reader keeps of an unreadable schedule or zone opens no window either.
    assert window_wait(spec["defragmentation"], "2026-11-28T03:10:00Z") == (
        None if field == "window" else ""
    )


@pytest.mark.parametrize(
    ("asked", "read"),
    [
        ({}, {"schedule": None, "window": 3600, "time_zone": "UTC"}),
        (
            {"schedule": "0 3 * * 1-5", "window": "2h30m", "timeZone": "Europe/Berlin"},
            {"schedule": "0 3 * * 1-5", "window": 9000, "time_zone": "Europe/Berlin"},
        ),
        ({"schedule": "@daily", "window": "1m"}, {"schedule": "@daily", "window": 60}),
        ({"window": "168h", "timeZone": ""}, {"window": 7 * 24 * 3600, "time_zone": "UTC"}),
    ],
)
def test_the_window_as_read(asked: dict, read: dict) -> None:
    spec = normalize_spec(obj(defragmentation=asked), {})
    assert spec["problems"] == []
    assert {k: spec["defragmentation"][k] for k in read} == read
