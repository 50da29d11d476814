"""The backup runbook's decisions (plugins/filter/etcd_backup_plan.py), table-driven.

The safety cases first: nothing pruned without a successful snapshot, the newest verified
snapshot never pruned, unverified leftovers pruned only when older than it."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.filters import load_filter

bp = load_filter("etcd_backup_plan")

NOW = "2026-05-10T12:00:00Z"


def snap(name: str, time: str, verified: bool = True, revision: int | None = None) -> dict:
    entry: dict[str, Any] = {
        "location": f"b/ns/e/{name}.db",
        "time": time,
        "sha256": ("ab" * 32) if verified else "",
        "verified": verified,
    }
    if revision is not None:
        entry["revision"] = revision
    return entry


def names(entries: list[dict[str, Any]]) -> list[str]:
    return [e["location"].rsplit("/", 1)[1].removesuffix(".db") for e in entries]


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
    plan = bp.prune_plan(snapshots, spec, NOW, f"b/ns/e/{newest}.db")
    assert names(plan["prune"]) == pruned, case
    assert len(plan["prune"]) + len(plan["retained"]) == len(snapshots)
    assert "d9" in names(plan["retained"]), "the newest verified snapshot is never pruned"
    assert all(p["reason"] for p in plan["prune"])


@pytest.mark.parametrize("newest", [None, "", "b/ns/e/nope.db", "b/ns/e/u.db"])
def test_nothing_is_pruned_without_a_successful_snapshot(newest):
    snapshots = [*DAILY, snap("u", "2026-05-10T11:00:00Z", verified=False)]
    plan = bp.prune_plan(snapshots, {"keep": 1, "maxAge": "1h"}, NOW, newest)
    assert plan["prune"] == []
    assert "nothing is pruned" in plan["msg"]
    assert names([plan["newest_verified"]]) == ["d9"]


def test_unverified_older_than_the_newest_verified_is_pruned_newer_is_left():
    snapshots = [
        snap("old-partial", "2026-05-01T00:00:00Z", verified=False),
        snap("v1", "2026-05-02T00:00:00Z"),
        snap("mid-partial", "2026-05-03T00:00:00Z", verified=False),
        snap("v2", "2026-05-04T00:00:00Z"),
        snap("in-flight", "2026-05-05T00:00:00Z", verified=False),
    ]
    plan = bp.prune_plan(snapshots, {}, NOW, "b/ns/e/v2.db")
    assert names(plan["prune"]) == ["mid-partial", "old-partial"]
    assert all(p["reason"].startswith("unverified") for p in plan["prune"])
    assert names(plan["retained"]) == ["in-flight", "v2", "v1"]


def test_verified_needs_a_sha256():
    no_hash = {**snap("v3", "2026-05-09T00:00:00Z"), "sha256": ""}
    plan = bp.prune_plan([snap("v1", "2026-05-01T00:00:00Z"), no_hash], {}, NOW, "b/ns/e/v1.db")
    assert names([plan["newest_verified"]]) == ["v1"]
    assert plan["prune"] == [], "an unverified entry newer than the newest verified one stays"


def test_unverified_entries_do_not_count_towards_keep():
    snapshots = [
        snap("v1", "2026-05-01T00:00:00Z"),
        snap("v2", "2026-05-02T00:00:00Z"),
        snap("p", "2026-05-03T00:00:00Z", verified=False),
        snap("v3", "2026-05-04T00:00:00Z"),
    ]
    plan = bp.prune_plan(snapshots, {"keep": 2}, NOW, "b/ns/e/v3.db")
    assert names(plan["prune"]) == ["p", "v1"]


def test_the_snapshot_just_saved_is_kept_even_when_another_looks_newer():
    # A clock step back: the run's own snapshot carries an older time than an earlier one.
    snapshots = [snap("earlier", "2026-05-09T00:00:00Z"), snap("mine", "2026-05-08T00:00:00Z")]
    plan = bp.prune_plan(snapshots, {"keep": 1}, NOW, "b/ns/e/mine.db")
    assert plan["prune"] == []


def test_same_second_ties_go_to_the_higher_revision():
    snapshots = [
        snap("r5", "2026-05-09T00:00:00Z", revision=5),
        snap("r9", "2026-05-09T00:00:00Z", revision=9),
    ]
    plan = bp.prune_plan(snapshots, {"keep": 1}, NOW, "b/ns/e/r9.db")
    assert names(plan["prune"]) == ["r5"]


def test_keys_are_accepted_in_place_of_locations_and_offsets_are_read():
    snapshots = [
        {"key": "a.db", "time": "2026-05-09T02:00:00+02:00", "sha256": "x", "verified": True},
        {"key": "b.db", "time": "2026-05-09T01:00:00Z", "sha256": "x", "verified": True},
    ]
    plan = bp.prune_plan(snapshots, {"keep": 1}, NOW, "b.db")
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
        bp.prune_plan(DAILY, spec, NOW, "b/ns/e/d9.db")


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
        bp.prune_plan(snapshots, {"keep": 1}, NOW, "a")


# --- keys ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "time", "revision", "key"),
    [
        ("backups", "2026-05-01T03:00:00Z", 42, "backups/ns/e/20260501T030000Z-rev42.db"),
        ("/a/b/", "2026-05-01T03:00:00Z", 0, "a/b/ns/e/20260501T030000Z-rev0.db"),
        ("", "2026-05-01T05:00:09+02:00", 7, "ns/e/20260501T030009Z-rev7.db"),
        (None, "2026-12-31T23:59:59.900Z", 1, "ns/e/20261231T235959Z-rev1.db"),
    ],
)
def test_snapshot_key_round_trip(prefix, time, revision, key):
    assert bp.snapshot_key(prefix, "ns", "e", time, revision) == key
    parsed = bp.parse_snapshot_key(key)
    assert parsed["namespace"] == "ns" and parsed["cluster"] == "e"
    assert parsed["revision"] == revision
    assert parsed["time"] == bp.format_time(bp.parse_time(time).replace(microsecond=0))
    assert parsed["prefix"] == "/".join(p for p in (prefix or "").split("/") if p)
    assert key.startswith(bp.cluster_prefix(prefix, "ns", "e"))


def test_keys_sort_by_time():
    times = ["2026-01-02T00:00:00Z", "2025-12-31T23:59:59Z", "2026-01-01T10:00:00Z"]
    revisions = [5, 999999, 12]
    keys = [bp.snapshot_key("p", "ns", "e", t, r) for t, r in zip(times, revisions, strict=True)]
    assert sorted(keys) == [keys[1], keys[2], keys[0]]


@pytest.mark.parametrize(
    "key",
    [
        "p/ns/e/20260501T030000Z-rev42.db.json",
        "p/ns/e/20260501T030000Z.db",
        "p/ns/e/latest.db",
        "20260501T030000Z-rev42.db",
        "e/20260501T030000Z-rev42.db",
    ],
)
def test_foreign_keys_are_not_snapshots(key):
    assert bp.parse_snapshot_key(key) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("p", "NS", "e", NOW, 1), "namespace 'NS' is not a Kubernetes name"),
        (("p", "ns", "a/b", NOW, 1), "cluster 'a/b' is not a Kubernetes name"),
        (("p", "ns", "e", NOW, -1), "revision must be"),
        (("p", "ns", "e", "now", 1), "time is not an RFC 3339"),
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
        "location": "b/ns/e/s29.db",
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
    filters = bp.FilterModule().filters()
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


def test_target_of_an_s3_destination():
    target = bp.backup_target(s3_spec(prefix="/nightly/"), "prod")
    assert target == {
        "cluster": "example",
        "retention": {"keep": 3},
        "kind": "s3",
        "s3": {
            "endpoint": "http://s3.object-store.svc:9000",
            "bucket": "etcd",
            "region": "us-east-1",
            "path_style": True,
        },
        "prefix": "nightly/prod/example/",
        "root": "s3://etcd/",
        "location": "s3://etcd/nightly/prod/example/",
        "credentials_secret": "creds",
        "ca_secret": "",
    }


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
        ("etcd", "/backup", "etcd/prod/example/"),
        ("/nightly/etcd/", "/backup", "nightly/etcd/prod/example/"),
        (None, "/backup", "prod/example/"),
        # Where the claim is not mounted (the operator's side, or by hand): no directory,
        # and the run refuses.
        ("etcd", "", "etcd/prod/example/"),
    ],
)
def test_target_of_a_volume_destination(path, volume_dir, prefix):
    target = bp.backup_target(volume_spec(path), "prod", "", volume_dir)
    assert target == {
        "cluster": "example",
        "retention": {},
        "kind": "volume",
        "claim": "backups",
        "directory": volume_dir,
        "prefix": prefix,
        "root": "pvc://backups/",
        "location": f"pvc://backups/{prefix}",
    }


@pytest.mark.parametrize("spec", [s3_spec(), volume_spec(), {"clusterName": "example"}])
def test_a_local_directory_by_hand_replaces_any_other_destination(spec):
    target = bp.backup_target(spec, "prod", "", "/backup", "/var/backups/etcd/")
    assert (target["kind"], target["directory"], target["prefix"]) == (
        "local",
        "/var/backups/etcd/",
        "prod/example/",
    )
    assert target["location"] == "/var/backups/etcd/prod/example/"
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
    filters = bp.FilterModule().filters()
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
}
SAVED = {"key": "prod/example/20261124T030000Z-rev42.db", "manifest": MANIFEST}
# SAVED as a listing shows it once verified.
LISTED = {
    "key": SAVED["key"],
    "time": MANIFEST["time"],
    "sha256": "a" * 64,
    "verified": True,
    "revision": 42,
    "size": 4096,
}


def test_record_of_a_saved_snapshot_and_what_is_retained():
    target = bp.backup_target(s3_spec(), "prod")
    saved = SAVED
    listed = [
        LISTED,
        {
            "key": "prod/example/20261123T030000Z-rev40.db",
            "time": "2026-11-23T03:00:00Z",
            "sha256": "",
            "verified": False,
        },
    ]
    record = bp.backup_record(saved, listed, target)
    assert record["lastSnapshot"] == {
        "location": "s3://etcd/prod/example/20261124T030000Z-rev42.db",
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


def test_a_record_on_a_volume_is_located_on_its_claim():
    target = bp.backup_target(volume_spec("etcd"), "prod", "", "/backup")
    saved = {**SAVED, "key": f"etcd/{SAVED['key']}"}
    record = bp.backup_record(saved, [{**LISTED, "key": saved["key"]}], target)
    location = "pvc://backups/etcd/prod/example/20261124T030000Z-rev42.db"
    assert record["lastSnapshot"]["location"] == location
    assert [r["location"] for r in record["retainedSnapshots"]] == [location]


def test_no_record_without_a_manifest():
    with pytest.raises(bp.BackupPlanError, match="not verified"):
        bp.backup_record({"key": "k"}, [], {})


def test_the_record_is_what_the_crd_accepts_as_status():
    from tests import crd_schema as cs

    schema = cs.schema_of(cs.load("etcdbackups"))["properties"]["status"]
    target = bp.backup_target(s3_spec(), "prod")
    saved = SAVED
    listed = [LISTED]
    assert cs.validate(schema, bp.backup_record(saved, listed, target)) == []
