"""The skip rule's fingerprints: what of a dependent counts, by how it was matched to its owner.

A person's EtcdBackup names its cluster in spec.clusterName only (ownerField): its spec,
existence and deletion count, its status and resourceVersion do not. The cluster's own objects
(ownerReference, ownerLabel) and a person's object labelled with the group's prefix count in
full, status included.
"""

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from etcd_runbook_operator.config import Dependent, Target, Watch
from etcd_runbook_operator.fingerprint import Seen, fingerprint, urgent_fingerprint
from etcd_runbook_operator.intake import counts_by_spec, owner_match

GROUP = "etcd.runbook.io"
WATCH = Watch(
    group=GROUP,
    version="v1alpha1",
    kind="EtcdCluster",
    target=Target(playbook=Path("/pb.yml")),
    owner_label=f"{GROUP}/cluster",
)
POD = Dependent("", "v1", "Pod", "pods")
BACKUP = Dependent(
    GROUP, "v1alpha1", "EtcdBackup", "etcdbackups", owner_field=("spec", "clusterName")
)
KEY = ("prod", "example")
CLUSTER = {
    "metadata": {"namespace": "prod", "name": "example", "uid": "c", "generation": 3},
    "spec": {"size": 3, "version": "3.6.4"},
}


def backup(name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "EtcdBackup",
        "metadata": {
            "namespace": "prod",
            "name": name,
            "uid": f"uid-{name}",
            "generation": 1,
            "resourceVersion": "100",
            **meta,
        },
        "spec": {
            "clusterName": "example",
            "schedule": "0 * * * *",
            "destination": {"s3": {"bucket": "b", "prefix": "p"}},
        },
        "status": {"phase": "Scheduled"},
    }


def member_pod() -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "prod",
            "name": "example-0",
            "uid": "uid-pod",
            "resourceVersion": "7",
            "labels": {f"{GROUP}/cluster": "example"},
        },
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def base() -> dict[str, dict[str, Any]]:
    """A cluster's dependents: its member Pod, a person's scheduled backup (named by field
    only), the one-off before-upgrade backup the runbook made (owned), a person's backup with
    the owner label, and a person's backup labelled before-upgrade (field only)."""
    owned = backup(
        "example-before-3-6",
        labels={f"{GROUP}/cluster": "example", f"{GROUP}/before-upgrade": "3.6"},
        ownerReferences=[
            {
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": "EtcdCluster",
                "name": "example",
                "controller": True,
            }
        ],
    )
    owned["spec"] = {"clusterName": "example", "destination": {"s3": {"bucket": "b"}}}
    owned["status"] = {"phase": "Running"}
    return {
        "pod": member_pod(),
        "mine": backup("nightly"),
        "owned": owned,
        "labelled": backup("tagged", labels={f"{GROUP}/cluster": "example"}),
        "by-hand": backup("by-hand-3-6", labels={f"{GROUP}/before-upgrade": "3.6"}),
    }


def counted(objs: dict[str, dict[str, Any]]) -> list[Seen]:
    """What Intake.dependents_of hands the skip rule: the dependents of KEY, each counted as
    the way it was matched says."""
    seen = []
    for obj in objs.values():
        dep = POD if obj.get("kind") != "EtcdBackup" else BACKUP
        found = owner_match(obj, WATCH, dep)
        if found and found[0] == KEY:
            seen.append(Seen(obj, counts_by_spec(obj, WATCH, found[1])))
    return seen


def status_write(name: str, **status: Any) -> Callable[[dict[str, Any]], None]:
    def change(objs: dict[str, Any]) -> None:
        objs[name]["status"].update(status)
        objs[name]["metadata"]["resourceVersion"] = "101"

    return change


def meta_write(name: str, **meta: Any) -> Callable[[dict[str, Any]], None]:
    def change(objs: dict[str, Any]) -> None:
        objs[name]["metadata"].update(meta, resourceVersion="101")

    return change


def spec_write(name: str, generation: int | None = 2) -> Callable[[dict[str, Any]], None]:
    def change(objs: dict[str, Any]) -> None:
        objs[name]["spec"]["destination"] = {"volume": {"claimName": "snaps"}}
        objs[name]["metadata"]["resourceVersion"] = "101"
        if generation is None:
            objs[name]["metadata"].pop("generation")
        else:
            objs[name]["metadata"]["generation"] = generation

    return change


def create(objs: dict[str, Any]) -> None:
    objs["new"] = backup("weekly")


def delete(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda objs: objs.pop(name)


def rename_cluster(objs: dict[str, Any]) -> None:
    objs["mine"]["spec"]["clusterName"] = "other"
    objs["mine"]["metadata"].update(generation=2, resourceVersion="101")


SNAPSHOT = {"location": "s3://b/p/x", "sha256": "ab" * 32, "revision": 9}
DELETING = "2026-11-24T00:00:00Z"


@pytest.mark.parametrize(
    "change, changes_fingerprint, changes_urgent",
    [
        # A person's scheduled backup (ownerField only): its own runbook's writes count for
        # nothing, the three status writes of a snapshot included.
        pytest.param(status_write("mine", phase="Running"), False, False, id="mine-running"),
        pytest.param(status_write("mine", lastSnapshot=SNAPSHOT), False, False, id="mine-snapshot"),
        pytest.param(status_write("mine", phase="Failed"), False, False, id="mine-failed"),
        pytest.param(
            meta_write("mine", finalizers=[f"{GROUP}/finalizer"]), False, False, id="mine-finalizer"
        ),
        pytest.param(
            meta_write("mine", annotations={"note": "x"}), False, False, id="mine-annotation"
        ),
        pytest.param(
            meta_write("mine", labels={"team": "db"}), False, False, id="mine-other-label"
        ),
        # What the cluster's runbook decides on: its spec (destination), that it exists, whether
        # it is being deleted, which cluster it names.
        pytest.param(spec_write("mine"), True, True, id="mine-spec"),
        pytest.param(spec_write("mine", generation=None), True, True, id="spec-without-generation"),
        pytest.param(create, True, True, id="created"),
        pytest.param(delete("mine"), True, True, id="deleted"),
        pytest.param(
            meta_write("mine", deletionTimestamp=DELETING), True, True, id="being-deleted"
        ),
        pytest.param(rename_cluster, True, True, id="names-another-cluster"),
        # A label of the group says the runbook reads it in full (before-upgrade: its status).
        pytest.param(
            meta_write("mine", labels={f"{GROUP}/before-upgrade": "3.6"}),
            True,
            True,
            id="mine-labelled",
        ),
        pytest.param(
            status_write("by-hand", lastSnapshot=SNAPSHOT), True, False, id="by-hand-snapshot"
        ),
        pytest.param(status_write("by-hand", phase="Completed"), True, True, id="by-hand-phase"),
        # The runbook's own objects, matched by ownerReference or the owner label: as before.
        pytest.param(
            status_write("owned", lastSnapshot=SNAPSHOT), True, False, id="owned-snapshot"
        ),
        pytest.param(status_write("owned", phase="Failed"), True, True, id="owned-phase"),
        pytest.param(status_write("labelled", phase="Running"), True, True, id="owner-label-phase"),
        pytest.param(meta_write("pod"), True, False, id="pod-resource-version"),
        pytest.param(
            status_write("pod", conditions=[{"type": "Ready", "status": "False"}]),
            True,
            True,
            id="pod-not-ready",
        ),
    ],
)
def test_what_of_a_dependent_counts(change, changes_fingerprint, changes_urgent):
    prefixes = (f"{GROUP}/",)
    before = base()
    after = copy.deepcopy(before)
    change(after)
    fp = [fingerprint(CLUSTER, counted(o), prefixes) for o in (before, after)]
    urgent = [urgent_fingerprint(CLUSTER, counted(o), prefixes) for o in (before, after)]
    assert (fp[0] != fp[1], urgent[0] != urgent[1]) == (changes_fingerprint, changes_urgent)


@pytest.mark.parametrize(
    "name, by_spec",
    [("pod", False), ("mine", True), ("owned", False), ("labelled", False), ("by-hand", False)],
)
def test_how_each_dependent_is_counted(name, by_spec):
    objs = base()
    seen = {s.obj["metadata"]["name"]: s.by_spec for s in counted(objs)}
    assert seen[objs[name]["metadata"]["name"]] is by_spec


def test_a_dependent_of_another_group_is_not_counted_by_its_labels():
    # Only the watched group's own prefix marks an object the runbook reads in full.
    obj = backup("nightly", labels={"example.com/before-upgrade": "3.6"})
    assert counts_by_spec(obj, WATCH, by_field=True)
    assert not counts_by_spec(obj, WATCH, by_field=False)
