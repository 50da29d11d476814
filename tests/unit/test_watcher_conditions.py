import pytest

from etcd_runbook_operator.conditions import (
    MESSAGE_LIMIT,
    after_run,
    before_run,
    during_run,
    get_condition,
    set_ready,
)

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"


def test_no_write_at_run_start_when_generation_was_observed():
    status = after_run(None, 1, True, {}, "", T0)
    assert before_run(status, 1, T1) is None


def test_new_generation_sets_only_progressing():
    status = after_run(None, 1, True, {}, "", T0)
    new = before_run(status, 2, T1)
    assert new is not None
    assert get_condition(new, "Progressing")["status"] == "True"
    assert get_condition(new, "Available") == get_condition(status, "Available")
    assert new["observedGeneration"] == 1


def test_success_defaults_and_last_transition_time_only_on_change():
    s1 = after_run(None, 1, True, {}, "", T0)
    assert {c["type"]: c["status"] for c in s1["conditions"]} == {
        "Available": "True",
        "Progressing": "False",
        "Degraded": "False",
        "Ready": "True",
    }
    s2 = after_run(s1, 1, True, {}, "", T1)
    assert s2 == s1, "an identical run changes nothing, so no status write"
    s3 = after_run(s2, 1, False, {}, "task 'x' failed: boom", T2)
    degraded = get_condition(s3, "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == "RunbookFailed"
    assert degraded["message"] == "task 'x' failed: boom"
    assert degraded["lastTransitionTime"] == T2
    available = get_condition(s3, "Available")
    assert (available["status"], available["reason"]) == ("Unknown", "RunbookFailed"), (
        "a failed run must not leave Available at its old value"
    )
    assert available["lastTransitionTime"] == T2
    assert "boom" in available["message"]


def test_role_available_on_a_failed_run_is_kept():
    stats = {"operator_conditions": {"Available": {"status": "False", "reason": "QuorumLost"}}}
    s = after_run(after_run(None, 1, True, {}, "", T0), 1, False, stats, "task failed", T1)
    available = get_condition(s, "Available")
    assert (available["status"], available["reason"]) == ("False", "QuorumLost")


def test_messages_are_bounded():
    s = after_run(None, 1, False, {}, "x" * 10_000, T0)
    message = get_condition(s, "Degraded")["message"]
    assert len(message) == MESSAGE_LIMIT and message.endswith("\u2026")


def test_role_status_and_conditions_are_merged():
    stats = {
        "operator_status": {"members": 3, "phase": "Running"},
        "operator_conditions": {
            "Available": {"status": False, "reason": "QuorumLost", "message": "1/3 ready"},
        },
    }
    s = after_run({"size": 3}, 4, True, stats, "", T0)
    assert s["members"] == 3 and s["phase"] == "Running" and s["size"] == 3
    assert s["observedGeneration"] == 4
    available = get_condition(s, "Available")
    assert (available["status"], available["reason"]) == ("False", "QuorumLost")
    assert available["observedGeneration"] == 4


def test_a_status_field_reported_null_is_removed_and_others_are_kept():
    before = {"nextScheduleTime": T1, "lastSnapshot": {"location": "s3://b/k"}}
    stats = {"operator_status": {"phase": "Suspended", "nextScheduleTime": None, "gone": None}}
    s = after_run(before, 2, True, stats, "", T0)
    assert "nextScheduleTime" not in s and "gone" not in s
    assert s["phase"] == "Suspended" and s["lastSnapshot"] == before["lastSnapshot"]


def test_failure_with_role_degraded_keeps_the_role_reason():
    stats = {
        "operator_conditions": {
            "Degraded": {
                "status": "True",
                "reason": "UnsafeScaleDown",
                "message": "never remove from 2 members",
            }
        }
    }
    s = after_run(None, 1, False, stats, "task failed", T0)
    assert get_condition(s, "Degraded")["reason"] == "UnsafeScaleDown"
    available = get_condition(s, "Available")
    assert available["status"] == "Unknown", "a failure does not invent availability"


ADDED = {"type": "Normal", "reason": "MemberAdded", "message": "Added w-1 as a learner"}


@pytest.mark.parametrize(
    ("progress", "step", "want_ready", "want_progressing"),
    [
        # The run's latest look: its status fields and conditions, nothing announced yet.
        (
            {
                "status": {"readyMembers": 2},
                "conditions": {
                    "Progressing": {"status": True, "reason": "Scaling", "message": "2 of 3"}
                },
            },
            None,
            2,
            ("True", "Scaling", "2 of 3"),
        ),
        # An announced step names what the run is doing now, over the look's Progressing.
        (
            {
                "status": {"readyMembers": 2},
                "conditions": {
                    "Progressing": {"status": True, "reason": "Scaling", "message": "2 of 3"}
                },
            },
            ADDED,
            2,
            ("True", "MemberAdded", "Added w-1 as a learner"),
        ),
        # Only a step: the status fields stay as they were.
        ({}, ADDED, 3, ("True", "MemberAdded", "Added w-1 as a learner")),
    ],
)
def test_during_a_run_the_latest_look_and_step_show(progress, step, want_ready, want_progressing):
    before = after_run(None, 1, True, {"operator_status": {"readyMembers": 3}}, "", T0)
    now = during_run(before, 2, progress, step, T1)
    assert now["readyMembers"] == want_ready
    got = get_condition(now, "Progressing")
    assert (got["status"], got["reason"], got["message"]) == want_progressing
    assert got["observedGeneration"] == 2 and got["lastTransitionTime"] == T1
    assert now["observedGeneration"] == 1, "observedGeneration waits for the end of the run"
    assert get_condition(now, "Available") == get_condition(before, "Available")


def test_the_in_flight_look_never_stands_for_the_end_of_a_failed_run():
    """A failed run that could not look again leaves Available Unknown, whatever it saw before."""
    seen = during_run(None, 1, {"conditions": {"Available": {"status": True}}}, None, T0)
    after = after_run(seen, 1, False, {}, "task 'x' failed: boom", T1)
    assert get_condition(after, "Available")["status"] == "Unknown"


def test_in_flight_progressing_never_turns_false_only_the_end_says_nothing_is_left():
    """A look mid-run may see the cluster sized (Progressing False) while the run still has
    steps to take (the budget after a scale): Progressing stays as it was until the end."""
    scaling = before_run(after_run(None, 1, True, {}, "", T0), 2, T1)
    done_look = {
        "conditions": {
            "Progressing": {"status": False, "reason": "Reconciled", "message": "5 members"}
        }
    }
    mid = during_run(scaling, 2, done_look, None, T1)
    assert get_condition(mid, "Progressing")["status"] == "True"
    idle = after_run(None, 1, True, {}, "", T0)
    assert during_run(idle, 1, done_look, None, T2) == idle, (
        "a run with nothing to do writes nothing"
    )
    end = after_run(mid, 2, True, {"operator_conditions": done_look["conditions"]}, "", T2)
    assert get_condition(end, "Progressing")["status"] == "False"


def test_a_failed_module_names_the_reason_of_degraded():
    """A module that fails with its own word (etcd_kube_object's NameTaken) gives that word;
    Available stays Unknown: the run did not look."""
    s = after_run(
        None, 1, False, {}, "task 'w' failed: NameTaken: Service ns/e ...", T0, "NameTaken"
    )
    assert get_condition(s, "Degraded")["reason"] == "NameTaken"
    assert get_condition(s, "Available")["reason"] == "RunbookFailed"


def _conds(available: str, progressing: str, degraded: str) -> dict:
    return {
        "conditions": [
            {"type": t, "status": v, "reason": f"{t}Why", "message": f"{t} says"}
            for t, v in (
                ("Available", available),
                ("Progressing", progressing),
                ("Degraded", degraded),
            )
            if v
        ]
    }


@pytest.mark.parametrize(
    "available, progressing, degraded, ready, reason",
    [
        ("True", "False", "False", "True", "AvailableWhy"),
        # Serving, but the spec is not met yet (a roll) or cannot be (a refused upgrade).
        ("True", "True", "False", "False", "ProgressingWhy"),
        ("True", "False", "True", "False", "DegradedWhy"),
        ("True", "True", "True", "False", "DegradedWhy"),
        ("False", "True", "False", "False", "ProgressingWhy"),
        ("False", "False", "False", "False", "AvailableWhy"),
        # Nothing known: a failed run that could not look, or nothing written yet.
        ("Unknown", "False", "False", "Unknown", "AvailableWhy"),
        ("Unknown", "False", "True", "False", "DegradedWhy"),
        ("", "", "", "Unknown", "Unknown"),
    ],
)
def test_ready_sums_up_the_three_for_tools_that_read_one(
    available, progressing, degraded, ready, reason
):
    got = get_condition(set_ready(_conds(available, progressing, degraded), 4, T0), "Ready")
    assert (got["status"], got["reason"], got["observedGeneration"]) == (ready, reason, 4)


def test_ready_is_written_with_every_status_and_keeps_its_transition_time():
    s1 = after_run(None, 1, True, {}, "", T0)
    s2 = before_run(s1, 2, T1)
    assert s2 is not None
    ready = get_condition(s2, "Ready")
    assert (ready["status"], ready["reason"], ready["lastTransitionTime"]) == (
        "False",
        "NewGeneration",
        T1,
    )
    s3 = after_run(s2, 2, True, {}, "", T2)
    assert get_condition(s3, "Ready")["status"] == "True"
    assert (
        get_condition(after_run(s3, 2, True, {}, "", "later"), "Ready")["lastTransitionTime"] == T2
    )
