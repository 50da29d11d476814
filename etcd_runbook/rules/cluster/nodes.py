"""Members no node runs: a node gone, silent or not Ready, and whether a member's volume can go
to another node (moved on its own volume, else replaced after spec.nodeLossTimeout)."""

from __future__ import annotations

from typing import Any

from etcd_runbook.rules.cluster.common import _deleting, _meta, _refusal
from etcd_runbook.rules.cluster.observed import Decided, _Observed
from etcd_runbook.rules.etcd_pods import seconds_between, unschedulable

# A kubelet renews its node's Lease every 10 s: this long without a renewal is a silent node
# (watches.yaml nodeSilence runs the cluster then).
NODE_SILENCE = 15


def _unschedulable_refusal(name: str, why: str) -> dict[str, str]:
    field = "spec.pod.antiAffinity" if "anti-affinity" in why else "spec.pod"
    return _refusal(
        "MemberUnschedulable",
        field,
        f"{name}'s Pod cannot be scheduled ({why}); no other member is added or promoted "
        f"until it runs: give it a node, or change {field}",
    )


def node_state(node: dict[str, Any]) -> tuple[bool, float | None, str]:
    """(lost, seconds lost, how) of a node as the observe module saw it: gone (None: nothing
    to wait for), silent (its kubelet has not renewed its Lease for NODE_SILENCE seconds,
    counted on the API server's clock: Kubernetes counts it Ready for 35 s more), or not Ready.
    A not-Ready node whose kubelet still renews (it says so itself) counts from its Ready
    condition's change to its latest renewal, both on the kubelet's clock. No duration is ever
    one machine's clock against another's: a skewed kubelet would look silent, or never."""
    if not node.get("found"):
        return True, None, "no longer exists"
    ready = node.get("ready") == "True"
    silent = node.get("silent_for")
    if silent is not None and silent > NODE_SILENCE:
        state = "has stopped renewing its Lease" if ready else "is not Ready"
        return True, float(silent), f"{state} ({int(silent)} s without word from its kubelet)"
    if ready:
        return False, 0.0, ""
    since = str(node.get("ready_since") or "")
    if silent is not None:
        kubelet = seconds_between(since, str(node.get("renewed") or ""))
        seconds = None if kubelet is None else kubelet + silent
    else:
        # No Lease to count on: from the condition's change (its writer's clock) to the API
        # server's answer.
        seconds = seconds_between(since, str(node.get("read_at") or ""))
    # Unmeasurable: lost, but never due (a replacement is not made on a guess).
    return True, max(0.0, seconds or 0.0), "is not Ready"


def _usable(o: _Observed, name: str) -> bool:
    node = (o.nodes or {}).get(name)
    return node is not None and not node_state(node)[0]


def volume_can_go(o: _Observed, volume: dict[str, Any] | None, but: str = "") -> bool | None:
    """Whether a member's volume (the observe module's `volumes` entry) can be mounted on a
    usable node other than `but`: a volume any node can mount can, one bound to no volume yet
    goes where its class puts it, one whose PersistentVolume is gone cannot. None when
    unknown (PersistentVolumes not readable)."""
    if volume is None:
        return None
    if not volume.get("bound") or volume.get("anywhere"):
        return True
    if not volume.get("found"):
        return False
    return any(_usable(o, n) for n in volume.get("nodes") or [] if n != but)


def node_losses(o: _Observed) -> dict[str, dict[str, Any]]:
    """Members etcd does not count healthy that no node runs, by name: {node, seconds (lost
    for; None when there is nothing to wait for), why, movable}.

    A member whose Pod is placed is lost when that node is gone, silent or not Ready
    (node_state); `movable` then says whether its volume can be mounted on another node that
    is usable (a volume any node can mount, or one whose affinity admits such a node). A member
    whose Pod is gone, or not placed, is lost only when its volume can be mounted on no
    usable node: judged by the bound PersistentVolume's node affinity, never by the node the
    claim was first scheduled to (`volume.kubernetes.io/selected-node`, which nothing updates
    once a node is rotated out). A node Ready and heard from lately is not lost, whatever etcd
    says; nor is a member whose volume nobody could read judged by its volume."""
    if o.nodes is None or not o.known:
        return {}
    losses: dict[str, dict[str, Any]] = {}
    for name in sorted(set(o.pods) | set(o.live_claims)):
        if o.healthy(name):
            continue
        claim = o.live_claims.get(name)
        volume = (
            None
            if o.volumes is None or claim is None
            else o.volumes.get(str(_meta(claim).get("name") or ""))
        )
        placed = str(((o.pods.get(name) or {}).get("spec") or {}).get("nodeName") or "")
        if placed:
            node = o.nodes.get(placed)
            if node is None:
                continue
            lost, seconds, how = node_state(node)
            if lost:
                losses[name] = {
                    "node": placed,
                    "seconds": seconds,
                    "why": f"its node {placed} {how}",
                    "movable": bool(volume_can_go(o, volume, but=placed)),
                }
            continue
        if volume is None or volume_can_go(o, volume) is not False:
            continue
        admitted = list(volume.get("nodes") or [])
        if not admitted:
            pinned = list(volume.get("pinned") or [])
            losses[name] = {
                "node": pinned[0] if pinned else "",
                "seconds": None,
                "why": f"its node {pinned[0]} no longer exists"
                if len(pinned) == 1
                else f"no node its volume {volume.get('pv') or ''} can be mounted on exists",
                "movable": False,
            }
            continue
        states = [(n, node_state(o.nodes.get(n) or {})) for n in admitted]
        known = [s[1] for _, s in states if s[1] is not None]
        first, (_, _, how) = states[0]
        losses[name] = {
            "node": first,
            "seconds": min(known) if known else None,
            "why": f"its volume's node {first} {how}"
            if len(admitted) == 1
            else f"no node its volume can be mounted on is usable ({first} {how})",
            "movable": False,
        }
    return losses


def _node_loss_due(loss: dict[str, Any], timeout: int) -> bool:
    """Whether a lost node has been gone long enough to give up on its member."""
    if timeout <= 0:
        return False
    return loss["seconds"] is None or loss["seconds"] >= timeout


# --- the steps of a plan ---------------------------------------------------------------------


def plan_node_loss(o: _Observed, d: Decided) -> Decided:
    """Members no node runs: a Pod on a lost node is not waited for (no kubelet would confirm
    it gone). Once the node has been lost for spec.nodeLossTimeout, a member whose volume
    another node can mount is moved: its Pod deleted at once and made again on its own claim
    (the same member: no membership change, so no quorum needed); else it is replaced. With
    a timeout of 0 none is moved or replaced, and a member without a Pod gets it back, to
    wait on its own volume for its node (heal in place)."""
    node_lost = node_losses(o)
    timeout = o.spec["node_loss_timeout"]
    moved = sorted(
        n
        for n, loss in node_lost.items()
        if loss["movable"]
        and _node_loss_due(loss, timeout)
        and n in o.pods
        and n in o.live_claims
        and n not in o.restoring
    )
    return {"node_lost": node_lost, "moved": moved}


def node_loss_due(o: _Observed, node_lost: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    """The members lost with their node that are due for replacement, by name, each with why
    (the caller replaces one at a time)."""
    timeout = o.spec["node_loss_timeout"]
    return [
        {
            "name": n,
            "reason": loss["why"]
            + (
                f", past spec.nodeLossTimeout ({timeout} s)"
                if loss["seconds"] is not None
                else ": there is no node left to wait for"
            ),
        }
        for n, loss in sorted(node_lost.items())
        if n in o.by_name and not loss["movable"] and _node_loss_due(loss, timeout)
    ]


def plan_unschedulable(o: _Observed, d: Decided) -> Decided:
    """A member Pod no node takes: said first, and nothing joins or votes behind it. It is
    scheduled as soon as a node fits (a new node, one uncordoned, a relaxed spec). A Pod being
    deleted on a node that is gone or not Ready never finishes going (no kubelet confirms
    it): it is not waited for (`leaving`)."""
    node_lost = d["node_lost"]
    stuck = {
        n: why
        for n, p in o.pods.items()
        if not _deleting(p) and n not in node_lost and (why := unschedulable(p))
    }
    return {
        "leaving": sorted(n for n, p in o.pods.items() if _deleting(p) and n not in node_lost),
        "stuck": stuck,
        "refusals": [
            _unschedulable_refusal(n, why)
            for n, why in sorted(stuck.items())
            if n not in d["halted"]
        ],
    }
