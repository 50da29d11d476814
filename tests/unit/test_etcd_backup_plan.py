"""The backup runbook's decisions (plugins/filter/etcd_backup_plan.py), table-driven.

The safety cases first: a backup prunes only what its own manifests name for the cluster as
it is now, and reports the rest; nothing pruned without a successful snapshot; the newest
own snapshot never pruned; two EtcdBackups never share a listing."""

from __future__ import annotations

import re
from typing import Any

import pytest

from etcd_runbook.rules import etcd_backup_plan as bp
from tests.filters import load_filter

NOW = "2026-05-10T12:00:00Z"
UID = "0d4c5f0e-uid-nightly"
CID = "cafe1234"
OWNER = {"name": "nightly", "uid": UID, "cluster_id": CID}
MINE = {"namespace": "ns", "name": "nightly", "uid": UID}


def snap(
    name: str,
    time: str,
    verified: bool = True,
    revision: int | None = None,
    backup: Any = MINE,
    cluster_id: str = CID,
) -> dict:
    entry: dict[str, Any] = {
        "location": f"b/ns/e/nightly/{name}.db",
        "time": time,
        "sha256": ("ab" * 32) if verified else "",
        "verified": verified,
        "clusterID": cluster_id,
    }
    if backup is not None:
        entry["backup"] = backup
    if revision is not None:
        entry["revision"] = revision
    return entry


def names(entries: list[dict[str, Any]]) -> list[str]:
    return [e["location"].rsplit("/", 1)[1].removesuffix(".db") for e in entries]


def at(name: str) -> str:
    return f"b/ns/e/nightly/{name}.db"


# Daily snapshots, d1 the oldest (9 days before NOW) to d9 (1 day before).
DAILY = [snap(f"d{i}", f"2026-05-{i:02d}T12:00:00Z") for i in range(1, 10)]


@pytest.mark.parametrize(
    ("case", "snapshots", "spec", "newest", "pruned"),
    [
        ("keep 3", DAILY, {"keep": 3}, "d9", ["d6", "d5", "d4", "d3", "d2", "d1"]),
        ("keep more than there are", DAILY, {"keep": 20}, "d9", []),
        ("keep 1 keeps only the newest", DAILY, {"keep": 1}, "d9", names(DAILY[-2::-1])),
        ("maxAge 72h", DAILY, {"maxAge": "72h"}, "d9", names(DAILY[-4::-1])),
        ("maxAge 3d is 72h", DAILY, {"maxAge": "3d"}, "d9", names(DAILY[-4::-1])),
        ("maxAge 1w", DAILY, {"maxAge": "1w"}, "d9", ["d2", "d1"]),
        (
            "keep and maxAge: either rule prunes",
            DAILY,
            {"keep": 5, "maxAge": "72h"},
            "d9",
            names(DAILY[-4::-1]),
        ),
        (
            "keep and maxAge: keep the tighter",
            DAILY,
            {"keep": 2, "maxAge": "7d"},
            "d9",
            names(DAILY[-3::-1]),
        ),
        ("no rules keep every verified snapshot", DAILY, {}, "d9", []),
        ("no retention at all", DAILY, None, "d9", []),
        (
            "maxAge 1h past every snapshot still keeps the newest",
            DAILY,
            {"maxAge": "1h"},
            "d9",
            names(DAILY[-2::-1]),
        ),
        ("empty maxAge is no rule", DAILY, {"maxAge": ""}, "d9", []),
    ],
)
def test_retention_rules(case, snapshots, spec, newest, pruned):
    plan = bp.prune_plan(snapshots, spec, NOW, at(newest), OWNER)
    assert names(plan["prune"]) == pruned, case
    assert len(plan["prune"]) + len(plan["retained"]) == len(snapshots)
    assert "d9" in names(plan["retained"]), "the newest verified snapshot is never pruned"
    assert all(p["reason"] for p in plan["prune"])
    assert plan["foreign"] == []


# --- ownership: what a backup may prune ---------------------------------------------------

OTHER = {"namespace": "ns", "name": "before-migration", "uid": "uid-other"}


@pytest.mark.parametrize(
    ("case", "entry", "why"),
    [
        ("its own, of this cluster", snap("a", NOW), ""),
        ("no manifest", snap("a", NOW, verified=False), "no manifest that verifies it"),
        (
            "a manifest that does not verify it (truncated, replaced)",
            {**snap("a", NOW), "verified": False},
            "no manifest that verifies it",
        ),
        (
            "written before snapshots were owned (no backup in its manifest)",
            snap("a", NOW, backup=None),
            "its manifest names no EtcdBackup",
        ),
        (
            "another EtcdBackup's",
            snap("a", NOW, backup=OTHER),
            "written by EtcdBackup before-migration (uid uid-other)",
        ),
        (
            "an EtcdBackup of the same name deleted and created again (another uid)",
            snap("a", NOW, backup={**MINE, "uid": "uid-before"}),
            "written by EtcdBackup nightly (uid uid-before)",
        ),
        (
            "by hand, without an EtcdBackup",
            snap("a", NOW, backup={"namespace": "ns", "name": bp.BY_HAND, "uid": ""}),
            "written by EtcdBackup _by-hand (uid none)",
        ),
        (
            "the cluster was created again: the old data's",
            snap("a", NOW, cluster_id="0ld"),
            "taken from etcd cluster 0ld, not this cluster's",
        ),
        ("no cluster ID", snap("a", NOW, cluster_id=""), "taken from etcd cluster ?"),
        (
            "a backup that is no mapping",
            {**snap("a", NOW), "backup": "nightly"},
            "its manifest names no",
        ),
    ],
)
def test_ownership(case, entry, why):
    found = bp.ownership(entry, OWNER)
    assert (found == "") if not why else found.startswith(why), (case, found)


def test_only_own_snapshots_are_pruned_everything_else_is_reported():
    # The failure seen: a one-off EtcdBackup's only snapshot, beside a schedule's with keep 1.
    one_off = snap("one-off", "2026-05-01T00:00:00Z", backup=OTHER)
    no_manifest = snap("notes", "2026-05-02T00:00:00Z", verified=False, backup=None)
    old_cluster = snap("old-cluster", "2026-05-03T00:00:00Z", cluster_id="0ld")
    legacy = snap("legacy", "2026-05-04T00:00:00Z", backup=None)
    half_written = snap("in-flight", "2026-05-11T00:00:00Z", verified=False, backup=None)
    mine = [snap("m1", "2026-05-05T00:00:00Z"), snap("m2", "2026-05-06T00:00:00Z")]
    listing = [one_off, no_manifest, old_cluster, legacy, half_written, *mine]
    plan = bp.prune_plan(listing, {"keep": 1, "maxAge": "1h"}, NOW, at("m2"), OWNER)
    assert names(plan["prune"]) == ["m1"]
    assert names(plan["retained"]) == ["m2"]
    assert names(plan["foreign"]) == ["in-flight", "legacy", "old-cluster", "notes", "one-off"]
    assert all(f["why"] for f in plan["foreign"])
    assert "5 other objects left alone" in plan["msg"]


@pytest.mark.parametrize(
    "owner",
    [None, {}, {"name": "nightly", "uid": UID}, {"uid": UID, "cluster_id": CID}, "nightly"],
)
def test_no_prune_without_an_owner_and_a_cluster_id(owner):
    with pytest.raises(bp.BackupPlanError, match="owner must name the EtcdBackup"):
        bp.prune_plan(DAILY, {"keep": 1}, NOW, at("d9"), owner)


@pytest.mark.parametrize("newest", [None, "", at("nope"), at("u"), at("theirs")])
def test_nothing_is_pruned_without_a_successful_snapshot(newest):
    snapshots = [
        *DAILY,
        snap("u", "2026-05-10T11:00:00Z", verified=False),
        snap("theirs", "2026-05-10T11:30:00Z", backup=OTHER),
    ]
    plan = bp.prune_plan(snapshots, {"keep": 1, "maxAge": "1h"}, NOW, newest, OWNER)
    assert plan["prune"] == []
    assert "nothing is pruned" in plan["msg"]
    assert names([plan["newest_verified"]]) == ["d9"]


def test_unverified_entries_are_never_pruned_nor_counted():
    snapshots = [
        snap("old-partial", "2026-05-01T00:00:00Z", verified=False),
        snap("v1", "2026-05-02T00:00:00Z"),
        snap("mid-partial", "2026-05-03T00:00:00Z", verified=False),
        snap("v2", "2026-05-04T00:00:00Z"),
        snap("in-flight", "2026-05-05T00:00:00Z", verified=False),
    ]
    plan = bp.prune_plan(snapshots, {"keep": 2}, NOW, at("v2"), OWNER)
    assert plan["prune"] == []
    assert names(plan["foreign"]) == ["in-flight", "mid-partial", "old-partial"]
    assert names(plan["retained"]) == ["v2", "v1"]


def test_verified_needs_a_sha256():
    no_hash = {**snap("v3", "2026-05-09T00:00:00Z"), "sha256": ""}
    plan = bp.prune_plan([snap("v1", "2026-05-01T00:00:00Z"), no_hash], {}, NOW, at("v1"), OWNER)
    assert names([plan["newest_verified"]]) == ["v1"]
    assert plan["prune"] == []


def test_the_snapshot_just_saved_is_kept_even_when_another_looks_newer():
    # A clock step back: the run's own snapshot carries an older time than an earlier one.
    snapshots = [snap("earlier", "2026-05-09T00:00:00Z"), snap("mine", "2026-05-08T00:00:00Z")]
    plan = bp.prune_plan(snapshots, {"keep": 1}, NOW, at("mine"), OWNER)
    assert plan["prune"] == []


def test_same_second_ties_go_to_the_higher_revision():
    snapshots = [
        snap("r5", "2026-05-09T00:00:00Z", revision=5),
        snap("r9", "2026-05-09T00:00:00Z", revision=9),
    ]
    plan = bp.prune_plan(snapshots, {"keep": 1}, NOW, at("r9"), OWNER)
    assert names(plan["prune"]) == ["r5"]


def test_keys_are_accepted_in_place_of_locations_and_offsets_are_read():
    mine = {"sha256": "x", "verified": True, "backup": MINE, "clusterID": CID}
    snapshots = [
        {"key": "a.db", "time": "2026-05-09T02:00:00+02:00", **mine},
        {"key": "b.db", "time": "2026-05-09T01:00:00Z", **mine},
    ]
    plan = bp.prune_plan(snapshots, {"keep": 1}, NOW, "b.db", OWNER)
    assert [p["key"] for p in plan["prune"]] == ["a.db"], "02:00+02:00 is 00:00Z, the older"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"keep": 0}, "spec.retention.keep"),
        ({"keep": -1}, "spec.retention.keep"),
        ({"keep": "3"}, "spec.retention.keep"),
        ({"keep": True}, "spec.retention.keep"),
        ({"keep": 1.5}, "spec.retention.keep"),
        ({"maxAge": "3 days"}, "spec.retention.maxAge"),
        ({"maxAge": "72"}, "spec.retention.maxAge"),
        ({"maxAge": "1.5h"}, "spec.retention.maxAge"),
        ({"maxAge": "-1h"}, "spec.retention.maxAge"),
        ({"maxAge": "0h"}, "spec.retention.maxAge"),
        ({"maxAge": 72}, "spec.retention.maxAge"),
        ({"maxAge": "1y"}, "spec.retention.maxAge"),
        ("keep 3", "spec.retention"),
    ],
)
def test_bad_retention_names_the_field(spec, field):
    with pytest.raises(bp.BackupPlanError, match="^" + re.escape(field) + " "):
        bp.prune_plan(DAILY, spec, NOW, at("d9"), OWNER)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("30m", 1800),
        ("72h", 259200),
        ("7d", 604800),
        ("1w", 604800),
        ("1h30m", 5400),
        ("1d12h", 129600),
        (" 2h ", 7200),
    ],
)
def test_durations(text, seconds):
    assert bp.parse_duration(text).total_seconds() == seconds
    assert bp.retention({"maxAge": text})["max_age_seconds"] == seconds


@pytest.mark.parametrize(
    ("snapshots", "message"),
    [
        ([{"time": NOW, "verified": True}], "snapshots[0] has no location"),
        ([{"location": "a", "time": "yesterday"}], "snapshots[0].time (a) is not an RFC 3339"),
        ([{"location": "a", "time": "2026-05-01T00:00:00"}], "snapshots[0].time (a) has no time"),
        ([{"location": "a", "time": NOW}, {"location": "a", "time": NOW}], "listed twice"),
        ("a", "snapshots must be a list"),
        (["a"], "snapshots[0] must be a mapping"),
    ],
)
def test_bad_listing_is_explained(snapshots, message):
    with pytest.raises(bp.BackupPlanError, match=re.escape(message)):
        bp.prune_plan(snapshots, {"keep": 1}, NOW, "a", OWNER)


# --- keys: each EtcdBackup its own prefix ------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "backup", "time", "revision", "key"),
    [
        (
            "backups",
            "nightly",
            "2026-05-01T03:00:00Z",
            42,
            "backups/ns/e/nightly/20260501T030000Z-rev42.db",
        ),
        (
            "/a/b/",
            "nightly",
            "2026-05-01T03:00:00Z",
            0,
            "a/b/ns/e/nightly/20260501T030000Z-rev0.db",
        ),
        ("", "x.y", "2026-05-01T05:00:09+02:00", 7, "ns/e/x.y/20260501T030009Z-rev7.db"),
        (None, bp.BY_HAND, "2026-12-31T23:59:59.900Z", 1, "ns/e/_by-hand/20261231T235959Z-rev1.db"),
    ],
)
def test_snapshot_key_round_trip(prefix, backup, time, revision, key):
    assert bp.snapshot_key(prefix, "ns", "e", backup, time, revision) == key
    parsed = bp.parse_snapshot_key(key)
    assert parsed is not None
    assert parsed["revision"] == revision
    assert parsed["time"] == bp.format_time(bp.parse_time(time).replace(microsecond=0))
    assert parsed["directory"] + "/" == bp.backup_prefix(prefix, "ns", "e", backup)
    assert key.startswith(bp.backup_prefix(prefix, "ns", "e", backup))


def test_keys_sort_by_time():
    times = ["2026-01-02T00:00:00Z", "2025-12-31T23:59:59Z", "2026-01-01T10:00:00Z"]
    revisions = [5, 999999, 12]
    keys = [
        bp.snapshot_key("p", "ns", "e", "b", t, r) for t, r in zip(times, revisions, strict=True)
    ]
    assert sorted(keys) == [keys[1], keys[2], keys[0]]


def _listed_by(listing_prefix: str, key: str) -> bool:
    """Whether a listing of `listing_prefix` without recursion (as the runbook lists) shows
    `key`."""
    return key.startswith(listing_prefix) and "/" not in key[len(listing_prefix) :]


# Two EtcdBackups whose destinations overlap (the same bucket and prefix, the same claim and
# path, or one's prefix inside the other's) never list each other's snapshots.
@pytest.mark.parametrize(
    ("case", "mine", "theirs"),
    [
        (
            "same prefix, same cluster",
            ("p", "ns", "e", "hourly"),
            ("p", "ns", "e", "before-migration"),
        ),
        ("empty prefixes", ("", "ns", "e", "hourly"), ("", "ns", "e", "nightly")),
        (
            "the before-upgrade one-off",
            ("p", "ns", "e", "hourly"),
            ("p/before-upgrade", "ns", "e", "e-before-3-6"),
        ),
        ("by hand beside an EtcdBackup", ("p", "ns", "e", "hourly"), ("p", "ns", "e", bp.BY_HAND)),
        (
            "another namespace's of the same name",
            ("p", "ns", "e", "hourly"),
            ("p", "other", "e", "hourly"),
        ),
        ("another cluster's", ("p", "ns", "e", "hourly"), ("p", "ns", "f", "hourly")),
        ("theirs inside mine", ("p", "ns", "e", "hourly"), ("p/ns/e/hourly", "ns", "e", "x")),
        ("mine inside theirs", ("p/ns/e/hourly", "ns", "e", "x"), ("p", "ns", "e", "hourly")),
        ("a prefix that is a namespace", ("", "ns", "e", "hourly"), ("ns", "e", "hourly", "y")),
    ],
)
def test_two_backups_never_list_each_others_snapshots(case, mine, theirs):
    their_key = bp.snapshot_key(theirs[0], theirs[1], theirs[2], theirs[3], NOW, 1)
    my_key = bp.snapshot_key(mine[0], mine[1], mine[2], mine[3], NOW, 1)
    assert not _listed_by(bp.backup_prefix(*mine), their_key), case
    assert not _listed_by(bp.backup_prefix(*theirs), my_key), case
    assert _listed_by(bp.backup_prefix(*mine), my_key)


def test_snapshots_of_the_layout_before_backups_owned_them_are_never_listed():
    # <prefix>/<namespace>/<cluster>/<file>: one level above every backup's own prefix.
    legacy = "p/ns/e/20260501T030000Z-rev42.db"
    assert (bp.parse_snapshot_key(legacy) or {}).get("revision") == 42
    for backup in ("hourly", "nightly", bp.BY_HAND):
        assert not _listed_by(bp.backup_prefix("p", "ns", "e", backup), legacy)


@pytest.mark.parametrize(
    "key",
    [
        "p/ns/e/b/20260501T030000Z-rev42.db.json",
        "p/ns/e/b/20260501T030000Z.db",
        "p/ns/e/b/latest.db",
        "20260501T030000Z-rev42",
    ],
)
def test_foreign_keys_are_not_snapshots(key):
    assert bp.parse_snapshot_key(key) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("p", "NS", "e", "b", NOW, 1), "namespace 'NS' is not a Kubernetes name"),
        (("p", "ns", "a/b", "b", NOW, 1), "cluster 'a/b' is not a Kubernetes name"),
        (("p", "ns", "e", "a/b", NOW, 1), "backup 'a/b' is not the name of an EtcdBackup"),
        (("p", "ns", "e", "_other", NOW, 1), "backup '_other' is not the name"),
        (("p", "ns", "e", "", NOW, 1), "backup '' is not the name"),
        (("p", "ns", "e", "b", NOW, -1), "revision must be"),
        (("p", "ns", "e", "b", "now", 1), "time is not an RFC 3339"),
    ],
)
def test_bad_key_input(args, message):
    with pytest.raises(bp.BackupPlanError, match=message):
        bp.snapshot_key(*args)


# --- status --------------------------------------------------------------------------------


def test_retained_status_is_bounded_verified_and_newest_first():
    many = [
        {**snap(f"s{i:02d}", f"2026-04-{i:02d}T00:00:00Z", revision=i), "size": 1000 + i}
        for i in range(1, 30)
    ]
    many.append(snap("partial", "2026-04-30T00:00:00Z", verified=False))
    listed = bp.retained_status(many)
    assert len(listed) == bp.STATUS_LIMIT == 20
    assert listed[0] == {
        "location": "b/ns/e/nightly/s29.db",
        "time": "2026-04-29T00:00:00Z",
        "sha256": "ab" * 32,
        "revision": 29,
        "size": 1029,
    }
    assert [e["revision"] for e in listed] == list(range(29, 9, -1))
    assert bp.retained_status(many, 3)[-1]["revision"] == 27
    assert bp.retained_status([]) == []


def test_newest_verified():
    snapshots = [*DAILY, snap("later-partial", "2026-05-10T00:00:00Z", verified=False)]
    assert names([bp.newest_verified(snapshots)]) == ["d9"]
    with pytest.raises(bp.BackupPlanError, match="no verified snapshot among the 1 listed"):
        bp.newest_verified([snap("p", NOW, verified=False)])


def test_filters_are_exported():
    filters = load_filter("etcd_backup_plan").FilterModule().filters()
    assert filters["etcd_backup_prune"] is bp.prune_plan
    assert set(filters) == {
        "etcd_backup_retention",
        "etcd_backup_prune",
        "etcd_backup_key",
        "etcd_backup_prefix",
        "etcd_backup_parse_key",
        "etcd_backup_newest_verified",
        "etcd_backup_retained_status",
        "etcd_backup_source",
        "etcd_backup_target",
        "etcd_backup_record",
        "etcd_backup_check_key",
        "etcd_backup_check_record",
        "etcd_backup_check_failed",
    }


def member(name: str, healthy: bool = True, learner: bool = False, index: int = 10) -> dict:
    # `index` goes into the info's per-endpoint `status`, as cluster_info reports it.
    return {
        "id": f"id-{name}",
        "name": name,
        "healthy": healthy,
        "is_learner": learner,
        "_index": index,
    }


def info_of(members: list, leader: str) -> dict:
    return {
        "members": [{k: v for k, v in m.items() if k != "_index"} for m in members],
        "status": [
            {
                "member_id": m["id"],
                "healthy": m["healthy"],
                "raft_index": m["_index"] + 1,
                "raft_applied_index": m["_index"],
            }
            for m in members
        ],
        "leader": {"id": f"id-{leader}"} if leader else None,
    }


@pytest.mark.parametrize(
    ("case", "members", "leader", "chosen", "is_leader"),
    [
        ("a follower, not the leader", [member("a"), member("b"), member("c")], "a", "b", False),
        (
            "the follower furthest along",
            [member("a"), member("b", index=5), member("c", index=9)],
            "a",
            "c",
            False,
        ),
        (
            "a down follower is skipped",
            [member("a"), member("b", healthy=False), member("c")],
            "a",
            "c",
            False,
        ),
        ("never a learner", [member("a"), member("b", learner=True, index=99)], "a", "a", True),
        ("the leader when alone", [member("a"), member("b", healthy=False)], "a", "a", True),
        ("no leader known: any healthy voter", [member("b"), member("a")], "", "a", False),
        (
            "a member not started yet (no name) is skipped",
            [member("a"), {**member(""), "name": ""}],
            "a",
            "a",
            True,
        ),
    ],
)
def test_snapshot_source(case, members, leader, chosen, is_leader):
    source = bp.snapshot_source(info_of(members, leader))
    assert (source["name"], source["leader"]) == (chosen, is_leader), case


@pytest.mark.parametrize(
    "info",
    [
        {},
        info_of([member("a", healthy=False)], "a"),
        info_of([member("a", learner=True)], ""),
        "not a mapping",
    ],
)
def test_no_snapshot_without_a_healthy_voter(info):
    with pytest.raises(bp.BackupPlanError, match="no healthy voting member"):
        bp.snapshot_source(info)


def s3_spec(**s3: Any) -> dict:
    base = {
        "endpoint": "http://s3.object-store.svc:9000",
        "bucket": "etcd",
        "credentialsSecret": "creds",
    }
    return {
        "clusterName": "example",
        "destination": {"s3": {**base, **s3}},
        "retention": {"keep": 3},
    }


NIGHTLY = {"name": "nightly", "uid": UID, "namespace": "prod"}


def test_target_of_an_s3_destination():
    target = bp.backup_target(s3_spec(prefix="/nightly/"), "prod", backup=NIGHTLY)
    assert target == {
        "cluster": "example",
        "retention": {"keep": 3},
        "owner": {"namespace": "prod", "name": "nightly", "uid": UID},
        "kind": "s3",
        "s3": {
            "endpoint": "http://s3.object-store.svc:9000",
            "bucket": "etcd",
            "region": "us-east-1",
            "path_style": True,
        },
        "prefix": "nightly/prod/example/nightly/",
        "root": "s3://etcd/",
        "location": "s3://etcd/nightly/prod/example/nightly/",
        "credentials_secret": "creds",
        "ca_secret": "",
    }


@pytest.mark.parametrize(
    ("backup", "owner"),
    [
        (NIGHTLY, {"namespace": "prod", "name": "nightly", "uid": UID}),
        # By hand with a spec only: a series of its own, no uid.
        (None, {"namespace": "prod", "name": bp.BY_HAND, "uid": ""}),
        ({}, {"namespace": "prod", "name": bp.BY_HAND, "uid": ""}),
    ],
)
def test_who_a_run_saves_for(backup, owner):
    assert bp.backup_target(s3_spec(), "prod", backup=backup)["owner"] == owner
    assert bp.backup_target(s3_spec(), "prod", backup=backup)["prefix"].endswith(
        f"/{owner['name']}/"
    )


@pytest.mark.parametrize(
    ("backup", "match"),
    [
        ({"name": "nightly"}, "EtcdBackup nightly has no uid"),
        ({"name": "nightly", "uid": ""}, "has no uid"),
        ({"name": "Bad/Name", "uid": "u"}, "metadata.name 'Bad/Name' is not the name"),
    ],
)
def test_a_backup_without_identity_is_refused(backup, match):
    with pytest.raises(bp.BackupPlanError, match=match):
        bp.backup_target(s3_spec(), "prod", backup=backup)


@pytest.mark.parametrize(
    ("s3", "ca_dir", "path_style", "ca_file"),
    [
        ({"endpoint": "https://s3.eu-west-1.amazonaws.com"}, "", False, None),
        ({"endpoint": "https://s3.eu-west-1.amazonaws.com", "pathStyle": True}, "", True, None),
        ({"endpoint": "https://minio.local:9000", "pathStyle": False}, "", False, None),
        ({"caSecret": "store-ca"}, "/etc/ca/", True, "/etc/ca/ca.crt"),
        ({"caSecret": "store-ca"}, "", True, None),  # by hand: the CA is not mounted
    ],
)
def test_target_addressing_and_ca(s3, ca_dir, path_style, ca_file):
    option = bp.backup_target(s3_spec(**s3), "prod", ca_dir)["s3"]
    assert option["path_style"] is path_style
    assert option.get("ca_file") == ca_file


def volume_spec(path: str | None = "etcd") -> dict:
    volume = {"claimName": "backups", **({"path": path} if path is not None else {})}
    return {"clusterName": "example", "destination": {"volume": volume}}


@pytest.mark.parametrize(
    ("path", "volume_dir", "prefix"),
    [
        ("etcd", "/backup", "etcd/prod/example/nightly/"),
        ("/nightly/etcd/", "/backup", "nightly/etcd/prod/example/nightly/"),
        (None, "/backup", "prod/example/nightly/"),
        # Where the claim is not mounted (the operator's side, or by hand): no directory,
        # and the run refuses.
        ("etcd", "", "etcd/prod/example/nightly/"),
    ],
)
def test_target_of_a_volume_destination(path, volume_dir, prefix):
    target = bp.backup_target(volume_spec(path), "prod", "", volume_dir, backup=NIGHTLY)
    assert target == {
        "cluster": "example",
        "retention": {},
        "owner": {"namespace": "prod", "name": "nightly", "uid": UID},
        "kind": "volume",
        "claim": "backups",
        "directory": volume_dir,
        "prefix": prefix,
        "root": "pvc://backups/",
        "location": f"pvc://backups/{prefix}",
    }


@pytest.mark.parametrize("spec", [s3_spec(), volume_spec(), {"clusterName": "example"}])
def test_a_local_directory_by_hand_replaces_any_other_destination(spec):
    target = bp.backup_target(spec, "prod", "", "/backup", "/var/backups/etcd/", NIGHTLY)
    assert (target["kind"], target["directory"], target["prefix"]) == (
        "local",
        "/var/backups/etcd/",
        "prod/example/nightly/",
    )
    assert target["location"] == "/var/backups/etcd/prod/example/nightly/"
    assert "s3" not in target and "credentials_secret" not in target


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({}, "spec.clusterName"),
        ({**s3_spec(), "clusterName": "Bad_Name"}, "spec.clusterName"),
        ({"clusterName": "example", "destination": {}}, "exactly one of volume or s3"),
        (
            {
                "clusterName": "example",
                "destination": {**s3_spec()["destination"], "volume": {"claimName": "x"}},
            },
            "exactly one of volume or s3",
        ),
        (s3_spec(endpoint="http://s3/path"), r"spec.destination.s3.endpoint"),
        (s3_spec(endpoint="ftp://s3"), r"spec.destination.s3.endpoint"),
        (s3_spec(bucket="UPPER"), r"spec.destination.s3.bucket"),
        (s3_spec(credentialsSecret=""), r"spec.destination.s3.credentialsSecret"),
        ({"clusterName": "example", "destination": {"volume": {"path": "/x"}}}, "claimName"),
        (volume_spec("a/../../etc"), r"spec.destination.volume.path"),
        (volume_spec("./x"), r"spec.destination.volume.path"),
        (volume_spec(".hidden"), r"spec.destination.volume.path"),
        ({**s3_spec(), "retention": {"keep": 0}}, "spec.retention.keep"),
    ],
)
def test_target_refuses_what_it_cannot_use(spec, match):
    with pytest.raises(bp.BackupPlanError, match=match):
        bp.backup_target(spec, "prod")


def test_the_filters_report_a_refusal_instead_of_raising():
    filters = load_filter("etcd_backup_plan").FilterModule().filters()
    assert filters["etcd_backup_target"]({}, "prod") == {
        "refused": "spec.clusterName must be the name of an EtcdCluster, not None"
    }
    assert filters["etcd_backup_target"](s3_spec(), "prod")["refused"] == ""
    assert "no healthy voting member" in filters["etcd_backup_source"]({})["refused"]


MANIFEST = {
    "sha256": "a" * 64,
    "size": 4096,
    "revision": 42,
    "etcdVersion": "3.6.5",
    "clusterID": "cafe",
    "member": {"name": "example-1", "id": "8e9e05c52164694d"},
    "time": "2026-11-24T03:00:00Z",
    "duration": 1.234,
    "backup": {"namespace": "prod", "name": "nightly", "uid": UID},
}
SAVED = {"key": "prod/example/nightly/20261124T030000Z-rev42.db", "manifest": MANIFEST}
# SAVED as a listing shows it once verified.
LISTED = {
    "key": SAVED["key"],
    "time": MANIFEST["time"],
    "sha256": "a" * 64,
    "verified": True,
    "revision": 42,
    "size": 4096,
    "clusterID": "cafe",
    "backup": MANIFEST["backup"],
}
PARTIAL = {
    "key": "prod/example/nightly/20261123T030000Z-rev40.db",
    "time": "2026-11-23T03:00:00Z",
    "sha256": "",
    "verified": False,
}
LATER = "2026-11-24T03:00:05Z"


def test_record_of_a_saved_snapshot_what_is_retained_and_what_is_left_alone():
    target = bp.backup_target(s3_spec(), "prod", backup=NIGHTLY)
    theirs = {**LISTED, "key": "prod/example/nightly/x.db", "backup": {**NIGHTLY, "uid": "old"}}
    listing = {
        "snapshots": [LISTED, PARTIAL, theirs],
        "orphans": ["prod/example/nightly/g.db.json"],
    }
    record = bp.backup_record(SAVED, listing, target, LATER, "asked-1")
    assert record["lastSnapshot"] == {
        "location": "s3://etcd/prod/example/nightly/20261124T030000Z-rev42.db",
        "time": "2026-11-24T03:00:00Z",
        "revision": 42,
        "size": 4096,
        "sha256": "a" * 64,
        "etcdVersion": "3.6.5",
        "clusterID": "cafe",
        "member": "example-1",
        "duration": "1.23s",
    }
    assert [r["location"] for r in record["retainedSnapshots"]] == [
        record["lastSnapshot"]["location"]
    ]
    assert record["foreignObjects"] == {
        "count": 3,
        "location": "s3://etcd/prod/example/nightly/",
        "examples": [
            {"key": PARTIAL["key"], "why": "no manifest that verifies it"},
            {"key": theirs["key"], "why": "written by EtcdBackup nightly (uid old)"},
            {"key": "prod/example/nightly/g.db.json", "why": "a manifest whose snapshot is gone"},
        ],
    }
    assert record["lastCheck"] == {
        "time": LATER,
        "location": record["lastSnapshot"]["location"],
        "result": "Found",
        "message": "listed with its manifest after the snapshot was saved",
        "request": "asked-1",
    }


def test_nothing_foreign_removes_the_field_and_a_snapshot_not_listed_is_missing():
    target = bp.backup_target(s3_spec(), "prod", backup=NIGHTLY)
    record = bp.backup_record(SAVED, {"snapshots": [], "orphans": []}, target, LATER)
    assert record["foreignObjects"] is None
    assert record["lastCheck"]["result"] == "Missing"
    assert record["retainedSnapshots"] == []


def test_foreign_objects_name_at_most_five():
    many = [{"key": f"k{i}", "why": "no manifest that verifies it"} for i in range(8)]
    report = bp.foreign_objects(many, ["m.json"], "s3://b/p/")
    assert report is not None
    assert report["count"] == 9 and len(report["examples"]) == bp.FOREIGN_EXAMPLES == 5


def test_a_record_on_a_volume_is_located_on_its_claim():
    target = bp.backup_target(volume_spec("etcd"), "prod", "", "/backup", backup=NIGHTLY)
    saved = {**SAVED, "key": f"etcd/{SAVED['key']}"}
    listing = {"snapshots": [{**LISTED, "key": saved["key"]}], "orphans": []}
    record = bp.backup_record(saved, listing, target, LATER)
    location = "pvc://backups/etcd/prod/example/nightly/20261124T030000Z-rev42.db"
    assert record["lastSnapshot"]["location"] == location
    assert [r["location"] for r in record["retainedSnapshots"]] == [location]


def test_no_record_without_a_manifest():
    with pytest.raises(bp.BackupPlanError, match="not verified"):
        bp.backup_record({"key": "k"}, {}, {}, LATER)


def test_the_record_is_what_the_crd_accepts_as_status():
    from tests import crd_schema as cs

    schema = cs.schema_of(cs.load("etcdbackups"))["properties"]["status"]
    target = bp.backup_target(s3_spec(), "prod", backup=NIGHTLY)
    listing = {"snapshots": [LISTED, PARTIAL], "orphans": []}
    record = bp.backup_record(SAVED, listing, target, LATER)
    assert cs.validate(schema, record) == []
    checked = bp.check_record(
        {"verified": False, "why": "gone"}, record["lastSnapshot"], target, LATER
    )
    assert cs.validate(schema, {"lastCheck": checked}) == []


# --- is status.lastSnapshot still there -------------------------------------------------------

LAST = {"location": "s3://etcd/prod/example/nightly/20261124T030000Z-rev42.db", "sha256": "a" * 64}
S3_TARGET = {"root": "s3://etcd/"}


@pytest.mark.parametrize(
    ("last", "target", "key"),
    [
        (LAST, S3_TARGET, "prod/example/nightly/20261124T030000Z-rev42.db"),
        # Written before backups owned their snapshots: checked where it is.
        ({"location": "s3://etcd/prod/example/x.db"}, S3_TARGET, "prod/example/x.db"),
        ({"location": "pvc://backups/e/x.db"}, {"root": "pvc://backups/"}, "e/x.db"),
        # The destination changed since: not here to check.
        (LAST, {"root": "s3://other/"}, ""),
        (LAST, {"root": "pvc://backups/"}, ""),
        ({}, S3_TARGET, ""),
        (None, S3_TARGET, ""),
        (LAST, {"refused": "spec.clusterName ..."}, ""),
    ],
)
def test_which_key_a_check_looks_at(last, target, key):
    assert bp.check_key(last, target) == key


@pytest.mark.parametrize(
    ("checked", "target", "result", "said"),
    [
        ({"found": True, "verified": True, "sha256": "a" * 64}, S3_TARGET, "Found", "are there"),
        (
            {"found": False, "verified": False, "why": "the snapshot is gone"},
            S3_TARGET,
            "Missing",
            "the snapshot is gone",
        ),
        (
            {"found": True, "verified": False, "why": "its manifest is gone"},
            S3_TARGET,
            "Missing",
            "its manifest is gone",
        ),
        (
            {"found": True, "verified": True, "sha256": "b" * 64},
            S3_TARGET,
            "Missing",
            "was replaced",
        ),
        ({}, {"root": "s3://other/"}, "Failed", "not in spec.destination"),
    ],
)
def test_what_a_check_records(checked, target, result, said):
    record = bp.check_record(checked, LAST, target, LATER, "r")
    assert record["result"] == result and said in record["message"], record
    assert (record["time"], record["location"], record["request"]) == (LATER, LAST["location"], "r")


def test_a_check_that_could_not_be_made_records_one_short_line():
    record = bp.check_failed(LAST, LATER, "Check | x: S3Unreachable:\n" + "y" * 900)
    assert record["result"] == "Failed" and "\n" not in record["message"]
    assert len(record["message"]) <= 300
