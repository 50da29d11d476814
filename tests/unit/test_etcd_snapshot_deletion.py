"""Which stored objects a retention may delete (etcd_runbook/rules/etcd_snapshot_deletion.py).
The module that deletes, on a real store and volume: tests/modules/test_etcd_snapshot_s3.py,
tests/modules/test_etcd_snapshot_dir.py."""

from __future__ import annotations

from typing import Any

import pytest

from etcd_runbook.rules.etcd_snapshot_deletion import (
    deletion_diff,
    deletion_refusal,
    doomed_objects,
    keys_outside,
)

OWNER = {"name": "nightly", "uid": "u-1", "cluster_id": "c1"}
MINE = {"namespace": "ns", "name": "nightly", "uid": "u-1"}


def snap(key: str, **changes: Any) -> dict[str, Any]:
    """A listed snapshot that OWNER wrote, verified, as SnapshotCatalog.snapshots lists it."""
    return {"key": key, "verified": True, "sha256": "a" * 64, "backup": MINE, "clusterID": "c1"} | (
        changes
    )


# Newest first, as listed.
LISTING = {
    "snapshots": [
        snap("p/4.db", verified=False, sha256=""),  # newer, but not verified: not the newest
        snap("p/3.db"),  # OWNER's newest verified
        snap("p/2.db", backup={**MINE, "uid": "u-2"}),  # a re-created EtcdBackup's
        snap("p/1.db", clusterID="c0"),  # the old cluster's
        snap("p/0.db"),
    ],
    "orphans": ["p/gone.db.json"],
}


@pytest.mark.parametrize(
    ("keys", "outside"),
    [
        ([], []),
        (["p/0.db", "p/x"], []),
        (["q/0.db", "p/0.db", "/p/1.db"], ["q/0.db", "/p/1.db"]),
    ],
)
def test_keys_outside(keys, outside):
    assert keys_outside(keys, "p/") == outside


@pytest.mark.parametrize(
    ("keys", "refusal"),
    [
        ([], ""),
        (["p/0.db"], ""),
        (["p/0.db", "p/never-listed.db"], ""),  # gone already: nothing to refuse
        (["p/3.db"], "refusing to delete p/3.db: it is the newest verified snapshot"),
        (["p/0.db", "p/3.db"], "refusing to delete p/3.db"),
        (["p/4.db"], "p/4.db: no manifest that verifies it"),
        (["p/2.db"], "p/2.db: written by EtcdBackup nightly (uid u-2)"),
        (["p/1.db"], "p/1.db: taken from etcd cluster c0, not this cluster's"),
        # every foreign key is named, in order, and nothing is deleted
        (["p/2.db", "p/1.db", "p/0.db"], "(p/1.db: taken from etcd cluster c0, not this"),
    ],
)
def test_deletion_refusal(keys, refusal):
    found = deletion_refusal(LISTING, keys, "p/", OWNER)
    assert (found == "") if refusal == "" else (refusal in found), found
    assert not found or found.endswith("nothing was deleted")


def test_the_refusal_of_foreign_keys_names_the_owner_and_each_key():
    found = deletion_refusal(LISTING, ["p/2.db", "p/1.db"], "p/", OWNER)
    assert found.startswith("refusing to delete what EtcdBackup nightly did not write for this")
    assert found.index("p/1.db:") < found.index("p/2.db:")


def test_with_no_verified_snapshot_of_its_own_nothing_is_the_newest():
    listing = {"snapshots": [snap("p/1.db", clusterID="c0")], "orphans": []}
    other = {**OWNER, "cluster_id": "c0"}
    assert deletion_refusal(listing, ["p/1.db"], "p/", other).startswith(
        "refusing to delete p/1.db: it is the newest"
    )
    assert "not this cluster's" in deletion_refusal(listing, ["p/1.db"], "p/", OWNER)


@pytest.mark.parametrize(
    ("keys", "doomed"),
    [
        ([], []),
        (["p/0.db"], ["p/0.db.json", "p/0.db"]),
        (["p/0.db", "p/0.db"], ["p/0.db.json", "p/0.db"]),
        (["p/never-listed.db"], []),
        (["p/1.db", "p/0.db"], ["p/1.db.json", "p/1.db", "p/0.db.json", "p/0.db"]),
    ],
)
def test_doomed_objects_manifest_first(keys, doomed):
    assert doomed_objects(LISTING, keys) == doomed


@pytest.mark.parametrize(
    ("listing", "doomed", "before", "after"),
    [
        (LISTING, [], "p/0.db\np/1.db\np/2.db\np/3.db\np/4.db\np/gone.db.json\n", None),
        (
            LISTING,
            ["p/0.db.json", "p/0.db"],
            "p/0.db\np/1.db\np/2.db\np/3.db\np/4.db\np/gone.db.json\n",
            "p/1.db\np/2.db\np/3.db\np/4.db\np/gone.db.json\n",
        ),
        ({"snapshots": [snap("p/0.db")], "orphans": []}, ["p/0.db.json", "p/0.db"], "p/0.db\n", ""),
        ({"snapshots": [], "orphans": []}, [], "", ""),
    ],
)
def test_deletion_diff(listing, doomed, before, after):
    diff = deletion_diff(listing, doomed, "s3://b/p/ at https://s3")
    assert diff == {
        "before": before,
        "after": before if after is None else after,
        "before_header": "s3://b/p/ at https://s3",
        "after_header": "s3://b/p/ at https://s3",
    }
