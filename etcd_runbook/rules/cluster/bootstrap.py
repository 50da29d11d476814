"""A new cluster's members started at once, only with nothing to lose (docs/design-decisions.md,
"Bootstrap")."""

from __future__ import annotations

from etcd_runbook.names import (
    ANN_BOOTSTRAP_STARTED,
    ANN_INITIAL_CLUSTER,
    ANN_INITIAL_STATE,
    ANN_MEMBER_ID,
)
from etcd_runbook.rules.cluster.common import _refusal, annotations_of
from etcd_runbook.rules.cluster.observed import Decided, _Observed


def _bootstrap(o: _Observed, refused: bool) -> tuple[list[str], str]:
    """(members to start into a new cluster, the --initial-cluster their claims record; ''
    for one computed from the spec). Only for a cluster with nothing to lose: etcd does not
    answer, no cluster ID was ever recorded (so it was never reported Available), nothing is
    restored into it. With no claim and no Pod, every member of the spec. An interrupted
    bootstrap (every claim says `new`, with the same --initial-cluster, and none records a
    member yet) is finished, never started over: the members listed there that have no claim
    get one with that same record, and each Pod is made from its claim. Once the EtcdCluster
    records that the bootstrap started its Pods (ANN_BOOTSTRAP_STARTED), never again: the
    members may have formed a cluster the operator could not reach (`_unrecorded_bootstrap`)."""
    if o.known or o.hands_off or refused or o.restore or o.recorded_id:
        return [], ""
    # A cluster a quorum recovery acted on has data, wherever that recovery stands.
    if o.recovery_seed or o.recovery_fenced:
        return [], ""
    if ANN_BOOTSTRAP_STARTED in annotations_of(o.obj):
        return [], ""
    if not o.pods and not o.claims:
        return [f"{o.name}-{i}" for i in range(o.spec["size"])], ""
    claims = [annotations_of(c) for c in o.claims.values()]
    if any(a.get(ANN_INITIAL_STATE) != "new" or a.get(ANN_MEMBER_ID) for a in claims):
        return [], ""
    records = {a.get(ANN_INITIAL_CLUSTER) or "" for a in claims}
    if len(records) != 1 or not (record := next(iter(records))):
        return [], ""
    listed = [entry.split("=", 1)[0] for entry in record.split(",")]
    missing = [n for n in listed if n not in o.claims and n not in o.pods]
    return (missing, record) if missing else ([], "")


def _unrecorded_bootstrap(o: _Observed) -> dict[str, str] | None:
    """A refusal when members of a bootstrap that started (the EtcdCluster says so) lack their
    claim while no cluster ID was ever recorded (etcd has not answered the operator with an
    agreeing quorum): made again as `new`, such a member would start a cluster of its own
    beside the one the others formed, or come back under its old identity with none of its
    data. Once etcd answers, each is removed and replaced through a learner as usual."""
    started = annotations_of(o.obj).get(ANN_BOOTSTRAP_STARTED)
    if not started or o.known or o.recorded_id or o.restore or o.hands_off:
        return None
    # A quorum recovery starts the cluster again from its own first member: the bootstrap's
    # members are fenced or gone, and none is made again as `new`.
    if o.recovery_seed or o.recovery_fenced:
        return None
    listed = [entry.split("=", 1)[0] for entry in started.split(",") if "=" in entry]
    missing = [n for n in listed or sorted(o.claims) if n not in o.claims]
    if not missing:
        return None
    return _refusal(
        "BootstrapNotRecorded",
        f"metadata.annotations[{ANN_BOOTSTRAP_STARTED}]",
        f"{', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no claim, and the "
        f"cluster's members were started ({ANN_BOOTSTRAP_STARTED}) but etcd has not answered "
        "the operator with a quorum since, so no cluster ID was recorded: not made again as "
        "members of a new cluster, which could start a cluster of its own or come back under "
        "an old identity without its data. Once etcd answers, they are replaced through "
        "learners; a cluster that never held data can be deleted and created again",
    )


def plan_bootstrap(o: _Observed, d: Decided) -> Decided:
    """A brand-new cluster, with nothing to lose (no claim, no Pod, no answer from etcd), starts
    every member at once, as etcd's static bootstrap does. A cluster being restored gets its
    first member from the restore: empty members would be a cluster of their own, which the
    restored member could never join. Last: any refusal of the run stops a bootstrap."""
    unrecorded = _unrecorded_bootstrap(o)
    refusals = [unrecorded] if unrecorded else []
    bootstrap, record = _bootstrap(o, bool(d["refusals"] or refusals))
    return {"refusals": refusals, "bootstrap": bootstrap, "bootstrap_record": record}
