"""Status computation, kept pure so the no-flapping rules are unit tested without a cluster.

Rules: a condition's lastTransitionTime changes only when its status changes; before a run the
status changes only when the spec changed (generation != observedGeneration), and then only
Progressing is set; while a run is in flight its latest `operator_progress` (the status and
conditions of its latest look) is merged and Progressing names its latest announced step, but
observedGeneration waits for the end; a run's set_stats `operator_status` /
`operator_conditions` are merged after it (a status field reported null is removed); a failure
without a role-provided Degraded condition gives Degraded=True with the failed task's message
and the failed module's reason word (NameTaken, Forbidden ...), else RunbookFailed, and without
a role-provided Available condition Available=Unknown: a run that failed before it could look
says nothing about availability, and the last value may be a lie by now. Messages are cut to
MESSAGE_LIMIT characters: a condition names a cause, it does not carry whole objects. Ready
sums the three up after every write, for the tools that read one condition (kstatus, Flux, Argo
CD): True only when the object is Available with nothing in progress and nothing degraded.
"""

from __future__ import annotations

import copy
from typing import Any

CONDITION_TYPES = ("Available", "Progressing", "Degraded")
READY = "Ready"
MESSAGE_LIMIT = 512


def short(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """At most `limit` characters, with an ellipsis when cut."""
    return message if len(message) <= limit else message[: limit - 1] + "\u2026"


def _status_str(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    text = str(value)
    return text if text in ("True", "False", "Unknown") else "Unknown"


def set_condition(
    status: dict[str, Any],
    type_: str,
    value: Any,
    reason: str,
    message: str,
    generation: int | None,
    now: str,
) -> None:
    """Set one condition in place, keeping lastTransitionTime unless the status flips."""
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    new: dict[str, Any] = {
        "type": type_,
        "status": _status_str(value),
        "reason": reason or "Unspecified",
        "message": short(message or ""),
    }
    if generation is not None:
        new["observedGeneration"] = generation
    for i, old in enumerate(conditions):
        if old.get("type") == type_:
            same = old.get("status") == new["status"] and old.get("lastTransitionTime")
            new["lastTransitionTime"] = old["lastTransitionTime"] if same else now
            conditions[i] = new
            return
    new["lastTransitionTime"] = now
    conditions.append(new)


def get_condition(status: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions", []) if c.get("type") == type_), None)


def set_ready(status: dict[str, Any], generation: int | None, now: str) -> dict[str, Any]:
    """Set Ready from the other three, in place: its reason and message are those of the
    condition that holds it back (Degraded first, then Progressing, then Available)."""
    available, progressing, degraded = (get_condition(status, t) or {} for t in CONDITION_TYPES)
    if available.get("status") == "True" and "True" not in (
        progressing.get("status"),
        degraded.get("status"),
    ):
        value, source = "True", available
    else:
        value = "Unknown" if not available or available.get("status") == "Unknown" else "False"
        source = next((c for c in (degraded, progressing) if c.get("status") == "True"), available)
        if source is not available:
            value = "False"
    set_condition(
        status,
        READY,
        value,
        str(source.get("reason") or "Unknown"),
        str(source.get("message") or "Nothing has been observed yet"),
        generation,
        now,
    )
    return status


def before_run(status: dict[str, Any] | None, generation: int, now: str) -> dict[str, Any] | None:
    """Status to write before a run, or None: only a new generation is news."""
    status = copy.deepcopy(status or {})
    if status.get("observedGeneration") == generation:
        return None
    set_condition(
        status,
        "Progressing",
        True,
        "NewGeneration",
        f"Reconciling generation {generation}",
        generation,
        now,
    )
    return set_ready(status, generation, now)


def during_run(
    status: dict[str, Any] | None,
    generation: int,
    progress: dict[str, Any],
    step: dict[str, Any] | None,
    now: str,
) -> dict[str, Any]:
    """Status while a run is in flight: `progress` (its latest look: `status` fields and
    `conditions`) merged, and Progressing=True naming `step` (the latest Event it announced).
    observedGeneration is left alone: the run has not finished with this generation. Nor does
    Progressing turn False: a look cannot tell that the run has no step left (the budget after
    a scale, say); only the end of the run can, so a run with nothing to do writes nothing."""
    status = copy.deepcopy(status or {})
    given = progress.get("conditions")
    if isinstance(given, dict):
        given = {
            type_: cond
            for type_, cond in given.items()
            if not (
                type_ == "Progressing"
                and _status_str(cond.get("status") if isinstance(cond, dict) else cond) == "False"
            )
        }
    _merge(status, progress.get("status"), given, generation, now)
    if step:
        set_condition(
            status,
            "Progressing",
            True,
            str(step.get("reason", "")),
            str(step.get("message", "")),
            generation,
            now,
        )
    return set_ready(status, generation, now)


def _merge(
    status: dict[str, Any], reported: Any, given: Any, generation: int, now: str
) -> dict[str, Any]:
    """Merge a run's status fields and conditions into `status`; returns the conditions given."""
    if isinstance(reported, dict):
        for key, value in reported.items():
            if key in ("conditions", "observedGeneration"):
                continue
            # Merging keeps what others wrote (a backup Job's fields), so a role takes out a
            # field that no longer holds by reporting it null.
            if value is None:
                status.pop(key, None)
            else:
                status[key] = value
    conds: dict[str, Any] = given if isinstance(given, dict) else {}
    for type_, cond in conds.items():
        cond = cond if isinstance(cond, dict) else {"status": cond}
        set_condition(
            status,
            str(type_),
            cond.get("status", "Unknown"),
            str(cond.get("reason", "")),
            str(cond.get("message", "")),
            generation,
            now,
        )
    return conds


def after_run(
    status: dict[str, Any] | None,
    generation: int,
    ok: bool,
    stats: dict[str, Any],
    failure: str,
    now: str,
    failure_reason: str = "RunbookFailed",
) -> dict[str, Any]:
    """Status after a run: set_stats merged, defaults for what the role did not say. A failed
    run the role said nothing of is Degraded with `failure_reason` (the failed module's own
    word, such as NameTaken, else RunbookFailed)."""
    status = copy.deepcopy(status or {})
    given = _merge(
        status, stats.get("operator_status"), stats.get("operator_conditions"), generation, now
    )
    if ok:
        defaults = {
            "Available": (True, "Reconciled", "The last reconcile succeeded"),
            "Progressing": (False, "Reconciled", "Nothing left to do"),
            "Degraded": (False, "Reconciled", "The last reconcile succeeded"),
        }
        for type_, (value, reason, message) in defaults.items():
            if type_ not in given:
                set_condition(status, type_, value, reason, message, generation, now)
    else:
        if "Degraded" not in given:
            set_condition(status, "Degraded", True, failure_reason, failure, generation, now)
        if "Available" not in given:
            set_condition(
                status,
                "Available",
                "Unknown",
                "RunbookFailed",
                "The last run failed before it could tell: " + failure,
                generation,
                now,
            )
    status["observedGeneration"] = generation
    return set_ready(status, generation, now)
