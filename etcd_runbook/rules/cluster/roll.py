"""A roll of member Pods to the spec, one member at a time, the leader last: how the members on
their new Pod fare (halted, failing, settling for spec.minReadySeconds) and which spec fields
to name when one cannot run."""

from __future__ import annotations

from typing import Any

from etcd_runbook.names import ANN_HEALTHY_RUN, ANN_HEALTHY_SINCE, ANN_POD_HASH, LABEL_VERSION
from etcd_runbook.rules.cluster.common import _deleting, _meta, _refusal, annotations_of, labels_of
from etcd_runbook.rules.cluster.observed import Decided, _Observed, _phase, pod_ready
from etcd_runbook.rules.cluster.spec import pod_hash
from etcd_runbook.rules.cluster.upgrade import member_version
from etcd_runbook.rules.etcd_pods import (
    container_spec,
    container_trouble,
    healthy_run,
    restart_trouble,
    seconds_between,
    unschedulable,
)


def _quota_arg(container: dict[str, Any]) -> str:
    return next(
        (str(a) for a in container.get("args") or [] if str(a).startswith("--quota-backend")), ""
    )


# The flags spec.etcd sets (etcd_manifests.settings_args).
_SETTINGS_FLAGS = (
    "--auto-compaction-",
    "--heartbeat-interval",
    "--election-timeout",
    "--snapshot-count",
    "--max-request-bytes",
    "--max-txn-ops",
    "--log-level",
    "--feature-gates",
    "--experimental-",
)


def _settings_of(container: dict[str, Any]) -> list[str]:
    return sorted(str(a) for a in container.get("args") or [] if str(a).startswith(_SETTINGS_FLAGS))


def changed_fields(new: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
    """The spec fields a member Pod made from the spec now differs in from `old`, another
    member's Pod made from the spec before, as far as the Pods show them."""
    if not old:
        return []
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    new_c, old_c = container_spec(new), container_spec(old)
    new_repo, new_tag, new_digest = _image_parts(new_c)
    old_repo, old_tag, old_digest = _image_parts(old_c)
    new_aff, old_aff = new_spec.get("affinity") or {}, old_spec.get("affinity") or {}
    compared = [
        ("spec.repository", new_repo, old_repo),
        ("spec.version", new_tag, old_tag),
        ("spec.imageDigests", new_digest, old_digest),
        (
            "spec.pod.imagePullSecrets",
            new_spec.get("imagePullSecrets"),
            old_spec.get("imagePullSecrets"),
        ),
        ("spec.pod.resources", new_c.get("resources") or {}, old_c.get("resources") or {}),
        ("spec.pod.nodeSelector", new_spec.get("nodeSelector"), old_spec.get("nodeSelector")),
        (
            "spec.pod.antiAffinity",
            new_aff.get("podAntiAffinity"),
            old_aff.get("podAntiAffinity"),
        ),
        (
            "spec.pod.affinity",
            {k: v for k, v in new_aff.items() if k != "podAntiAffinity"},
            {k: v for k, v in old_aff.items() if k != "podAntiAffinity"},
        ),
        ("spec.pod.tolerations", new_spec.get("tolerations"), old_spec.get("tolerations")),
        (
            "spec.pod.priorityClassName",
            new_spec.get("priorityClassName"),
            old_spec.get("priorityClassName"),
        ),
        (
            "spec.pod.topologySpreadConstraints",
            new_spec.get("topologySpreadConstraints"),
            old_spec.get("topologySpreadConstraints"),
        ),
        (
            "spec.pod.securityContext",
            new_spec.get("securityContext"),
            old_spec.get("securityContext"),
        ),
        ("spec.storage", _quota_arg(new_c), _quota_arg(old_c)),
        ("spec.etcd", _settings_of(new_c), _settings_of(old_c)),
    ]
    return [field for field, now, before in compared if now != before]


def _image_parts(container: dict[str, Any]) -> tuple[str, str, str]:
    """Repository, tag and digest of a container's image (`repo:tag@sha256:...`): the digest
    first, since it holds a colon of its own."""
    name, _, digest = str(container.get("image") or "").partition("@")
    repository, _, tag = name.rpartition(":")
    return repository, tag, digest


# The fields that can make a Pod that passed the schema fail to run, by how it fails.
_FIELDS_BY_CAUSE = {
    "image": ("spec.repository", "spec.version", "spec.imageDigests", "spec.pod.imagePullSecrets"),
    "memory": ("spec.pod.resources",),
    "schedule": (
        "spec.pod.nodeSelector",
        "spec.pod.affinity",
        "spec.pod.antiAffinity",
        "spec.pod.tolerations",
        "spec.pod.priorityClassName",
        "spec.pod.topologySpreadConstraints",
        "spec.pod.resources",
    ),
}


def _scheduler_fields(why: str) -> list[str]:
    """The fields the scheduler's words point at, when no Pod before tells what changed."""
    found = [
        field
        for words, field in (
            ("anti-affinity", "spec.pod.antiAffinity"),
            ("node affinity/selector", "spec.pod.nodeSelector"),
            ("node affinity/selector", "spec.pod.affinity"),
            ("Insufficient", "spec.pod.resources"),
            ("untolerated taint", "spec.pod.tolerations"),
        )
        if words in why
    ]
    return found or ["spec.pod"]


def trouble_fields(trouble: dict[str, str], changed: list[str]) -> list[str]:
    """The spec fields to name for a Pod that cannot run: of the fields its cause points at,
    those the roll changed; else all that cause points at (none for a crash of no known
    cause, nor for a member that runs but is never healthy: it may be etcd's data or its
    node, not the spec)."""
    cause = trouble["cause"]
    if cause in ("crash", "unhealthy"):
        return changed
    if cause == "memory":
        return ["spec.pod.resources"]
    if cause == "schedule":
        return [f for f in changed if f in _FIELDS_BY_CAUSE[cause]] or _scheduler_fields(
            trouble["why"]
        )
    return [f for f in changed if f in _FIELDS_BY_CAUSE[cause]] or list(_FIELDS_BY_CAUSE[cause])


# How long a member the roll made may run on its new Pod before etcd counts it healthy: it
# catches up with the log first, and a new minor may migrate its data. On this test bed that
# takes seconds, a database of several GiB minutes. One not healthy after this halts the roll:
# a spec etcd starts under but cannot serve with (memory for little more than starting, flags
# that keep it from its peers) would otherwise hold the roll "not healthy yet" for ever. As
# long as the learner's bound (members.LEARNER_CATCH_UP), and a Deployment's default
# progressDeadlineSeconds.
ROLL_HEALTHY_WITHIN = 600


def never_healthy(o: _Observed, name: str, healthy: bool) -> dict[str, str]:
    """Why member `name`, running on a Pod made ROLL_HEALTHY_WITHIN s ago or more, is still
    not to be waited for ({cause, reason, why}); {} while healthy or within the bound. The
    Pod's age is the API server's time against the runbook's, as a learner's: a skew of
    seconds against a bound of minutes."""
    age = seconds_between(pod_created(o.pods[name]), o.observed_at)
    if healthy or age is None or age < ROLL_HEALTHY_WITHIN:
        return {}
    return {
        "cause": "unhealthy",
        "reason": "NotHealthy",
        "why": f"etcd has not counted it healthy {int(age)} s after its Pod was made "
        f"(bound {ROLL_HEALTHY_WITHIN} s)",
    }


def roll_order(names: list[str], leader: str) -> list[str]:
    return sorted(n for n in names if n != leader) + [n for n in names if n == leader]


def pod_created(pod: dict[str, Any]) -> str:
    return str(_meta(pod).get("creationTimestamp") or "")


def _rolled(o: _Observed, renewed: list[str], before: list[dict[str, Any]]) -> dict[str, Any]:
    """How the members on a Pod of the spec fare while other members are still on Pods of an
    earlier one (`before`). `halted`: those the roll made that cannot run, or run and are
    not healthy within ROLL_HEALTHY_WITHIN, by name ({cause, reason, why, fields});
    `failing`: those it did not make that cannot run (a roll set back finds the others on
    the spec again, made long before: their troubles are their own);
    `settling`: those not yet healthy for spec.minReadySeconds (seconds so far; None while
    not healthy at all); `settled`; `marks`: the Pods to mark healthy since this look.
    Healthy: the Pod Ready, its container not restarted since (or settled again after), etcd
    counting the member healthy. The time is the runbook's own, written on the Pod the first
    time a look sees that run of it healthy, so a run that ends, or an operator that
    restarts, takes it up where it was. The roll made a Pod if it is newer than a Pod from
    before (the API server's times, compared with each other only)."""
    needed = o.spec["min_ready_seconds"]
    oldest = min((pod_created(p) for p in before), default="")
    out: dict[str, Any] = {"halted": {}, "failing": {}, "settling": {}, "settled": [], "marks": []}
    for name in renewed:
        pod = o.pods[name]
        made = pod_created(pod) > oldest
        no_node = unschedulable(pod)
        trouble = (
            {"cause": "schedule", "reason": "Unschedulable", "why": f"no node takes it ({no_node})"}
            if no_node and made
            else container_trouble(pod)
        )
        run = healthy_run(pod)
        healthy = bool(run) and o.healthy(name)
        marked = annotations_of(pod)
        since = (
            seconds_between(marked.get(ANN_HEALTHY_SINCE, ""), o.observed_at)
            if marked.get(ANN_HEALTHY_RUN) == run
            else None
        )
        settled = healthy and (needed == 0 or (since is not None and since >= needed))
        if not trouble and not settled and made:
            trouble = restart_trouble(pod) or never_healthy(o, name, healthy)
        if trouble and made:
            out["halted"][name] = {
                **trouble,
                "fields": trouble_fields(trouble, changed_fields(pod, before[0])),
            }
        elif trouble:
            out["failing"][name] = trouble
        elif settled:
            out["settled"].append(name)
        elif healthy and (since is None or since < 0) and o.observed_at:
            out["marks"].append({"name": name, "since": o.observed_at, "run": run})
            out["settling"][name] = 0.0
        else:
            out["settling"][name] = since if healthy else None
    return out


def _roll_halted_refusal(name: str, trouble: dict[str, Any], others: list[str]) -> dict[str, str]:
    fields = trouble["fields"]
    named = ", ".join(fields) or "the change"
    return _refusal(
        "RollHalted",
        ", ".join(fields),
        f"The roll halted at {name}: its new Pod cannot run: {trouble['why']}. Changed: "
        f"{named}. No other member is restarted"
        + (f" ({', '.join(others)} keep running as they are)" if others else "")
        + f"; set {named} back, or to what etcd runs with, and {name} is made again from it, "
        "on its own data",
    )


def _cannot_run_refusal(name: str, trouble: dict[str, Any]) -> dict[str, str]:
    fields = trouble_fields(trouble, [])
    return _refusal(
        "MemberCannotRun",
        ", ".join(fields),
        f"{name}'s Pod cannot run: {trouble['why']}"
        + (f"; look at {', '.join(fields)}" if fields else ""),
    )


# --- the steps of a plan ---------------------------------------------------------------------


def plan_standing(o: _Observed, d: Decided) -> Decided:
    """The member Pods that stand (not going, not lost with their node or their data): made
    from the spec as it is now (`renewed`), or from an earlier one (`outdated`: a roll not
    over, or not begun)."""
    standing = [
        n
        for n, p in sorted(o.pods.items())
        if not _deleting(p)
        and n in o.live_claims
        and n not in d["lost_data"]
        and n not in o.restoring
        and n not in d["node_lost"]
    ]
    renewed = [n for n in standing if not pod_differs(o, d, n)]
    return {
        "standing": standing,
        "renewed": renewed,
        "outdated": [n for n in standing if n not in renewed],
    }


def pod_differs(o: _Observed, d: Decided, name: str) -> bool:
    """Whether member `name`'s Pod is made from another spec or version than it should run."""
    pod = o.pods[name]
    version = member_version(o, d, name)
    return (
        annotations_of(pod).get(ANN_POD_HASH) != pod_hash(o.spec, version)
        or labels_of(pod).get(LABEL_VERSION) != version
    )


def plan_rolled(o: _Observed, d: Decided) -> Decided:
    """While a roll is not over, the members on their new Pod are watched: one that cannot run
    halts it, one not yet healthy for spec.minReadySeconds holds it."""
    rolled = (
        _rolled(o, d["renewed"], [o.pods[n] for n in d["outdated"]])
        if d["outdated"] and d["spec_ok"]
        else {"halted": {}, "failing": {}, "settling": {}, "settled": [], "marks": []}
    )
    return {
        "rolled": rolled,
        "halted": rolled["halted"],
        "settling": rolled["settling"],
        "settle_marks": rolled["marks"],
    }


def plan_roll_troubles(o: _Observed, d: Decided) -> Decided:
    """A halted roll is said, and, outside a roll, a member Pod made from the spec that cannot
    run, naming what to look at (a Pod no node takes is said by `plan_unschedulable`)."""
    halted = d["halted"]
    failing = {
        n: trouble
        for n in d["renewed"]
        if not d["outdated"] and _phase(o.pods[n]) not in ("Failed", "Succeeded")
        if (trouble := container_trouble(o.pods[n]))
    } | d["rolled"]["failing"]
    return {
        "refusals": [
            _roll_halted_refusal(n, trouble, [m for m in d["standing"] if m != n])
            for n, trouble in sorted(halted.items())
        ]
        + [_cannot_run_refusal(n, trouble) for n, trouble in sorted(failing.items())]
    }


def plan_roll(o: _Observed, d: Decided) -> Decided:
    """The members whose Pod differs from the spec, in roll order (`roll_pending`), and the one
    that restarts now (`roll`): only on a trusted quorum, with no membership change to make,
    every member healthy, and the member rolled last settled; never past a halted one."""
    if not o.trusted:
        return {"roll": [], "roll_pending": []}
    differs = [
        n
        for n in o.live_claims
        if n in o.pods
        and n in o.by_name
        and not _deleting(o.pods[n])
        and n not in d["remove"]
        and pod_differs(o, d, n)
    ]
    changing = any(d[k] for k in ("add", "remove", "replace", "lost", "promote"))
    if not differs or not d["spec_ok"] or changing:
        return {"roll": [], "roll_pending": []}
    pending = roll_order(differs, o.leader)
    # Each member Pod Ready and etcd counting each member healthy: a roll takes one down.
    unhealthy = sorted(
        {m["name"] for m in o.members if not m.get("healthy")}
        | {n for n in o.by_name if n in o.pods and not pod_ready(o.pods[n])}
    )
    if d["halted"] or d["settling"]:
        # Halted (said already): no further until the spec is set back. Settling: the member
        # rolled last is not yet trusted to stay up.
        return {"roll": [], "roll_pending": pending}
    if unhealthy:
        refusal = _refusal(
            "RollBlocked",
            "",
            f"Not rolling {', '.join(sorted(differs))}: not every member is healthy "
            f"({', '.join(unhealthy)}); the roll goes on once they are",
        )
        return {"roll": [], "roll_pending": pending, "refusals": [refusal]}
    # One member a run: the next only once this one has stayed healthy.
    return {"roll": pending[:1], "roll_pending": pending}


def plan_transferee(o: _Observed, d: Decided) -> Decided:
    """Leadership goes first to a member already rolled (and settled), else to another healthy
    voter."""
    if not o.trusted:
        return {"transferee": ""}
    others = [m["name"] for m in o.voters if m.get("healthy") and m["name"] != o.leader]
    settled = d["rolled"]["settled"]
    return {"transferee": next((n for n in settled if n in others), others[0] if others else "")}
