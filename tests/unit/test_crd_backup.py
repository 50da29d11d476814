"""The EtcdBackup and EtcdRestore CRDs: structural schemas whose defaults, patterns, CEL rules
and columns say what issue 10 and docs/backup-storage.md say. The CEL rules themselves run
only on an API server; here they are checked to exist, with a message naming the field."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml

from etcd_runbook.rules import etcd_backup_plan as bp
from tests import crd_schema as cs

BACKUP = cs.load("etcdbackups")
RESTORE = cs.load("etcdrestores")
BACKUP_SCHEMA = cs.schema_of(BACKUP)
RESTORE_SCHEMA = cs.schema_of(RESTORE)
CLUSTER = cs.load("etcdclusters")

S3 = {
    "endpoint": "http://s3.object-store.svc.cluster.local:9000",
    "bucket": "etcd-backups",
    "credentialsSecret": "s3-credentials",
}
SHA = "a" * 64


@pytest.mark.parametrize(
    ("crd", "kind", "plural"),
    [(BACKUP, "EtcdBackup", "etcdbackups"), (RESTORE, "EtcdRestore", "etcdrestores")],
)
def test_names_group_version_and_status(crd, kind, plural):
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{plural}.etcd.runbook.io"
    assert spec["group"] == CLUSTER["spec"]["group"] == "etcd.runbook.io"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == kind and spec["names"]["plural"] == plural
    assert [v["name"] for v in spec["versions"]] == ["v1alpha1"]
    version = spec["versions"][0]
    assert version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    schema = cs.schema_of(crd)
    assert cs.structural_problems(schema) == []
    assert schema["properties"]["metadata"] == {"type": "object"}
    # Conditions have the EtcdCluster's shape, so the watcher writes all three kinds alike.
    cluster_conditions = cs.schema_of(CLUSTER)["properties"]["status"]["properties"]["conditions"]
    assert schema["properties"]["status"]["properties"]["conditions"] == cluster_conditions


def test_kustomization_lists_every_crd():
    kustomization = yaml.safe_load((cs.ROOT / "config/crd/kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(
        f"bases/{p.name}" for p in cs.BASES.glob("*.yaml")
    )


@pytest.mark.parametrize(
    ("crd", "columns"),
    [
        (BACKUP, ["Cluster", "Schedule", "Phase", "Last Snapshot", "Revision", "Location", "Age"]),
        (RESTORE, ["Cluster", "Phase", "Revision", "Cluster ID", "Age"]),
    ],
)
def test_printer_columns_resolve(crd, columns):
    found = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in found] == columns
    schema = cs.schema_of(crd)
    for column in found:
        if column["jsonPath"] != ".metadata.creationTimestamp":
            assert cs.resolves(schema, column["jsonPath"]), column


def test_every_default_satisfies_its_own_schema():
    for schema in (BACKUP_SCHEMA, RESTORE_SCHEMA):
        for path, node in cs.walk(schema):
            if "default" in node:
                errors = list(jsonschema.Draft4Validator(node).iter_errors(node["default"]))
                assert errors == [], f"{path}: {errors}"


# --- EtcdBackup ---------------------------------------------------------------------------


def backup(**spec: Any) -> dict[str, Any]:
    return cs.apply_defaults(
        BACKUP_SCHEMA, {"spec": {"clusterName": "example", "destination": {"s3": S3}, **spec}}
    )


def test_backup_defaults():
    defaulted = backup(destination={"s3": S3}, retention={"keep": 3})
    assert defaulted["spec"]["suspend"] is False
    assert defaulted["spec"]["destination"]["s3"]["region"] == "us-east-1"
    assert defaulted["spec"]["destination"]["s3"]["prefix"] == ""
    volume = backup(destination={"volume": {"claimName": "backups"}})
    assert volume["spec"]["destination"]["volume"]["path"] == "/"


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"schedule": "*/5 * * * *"},
        {"schedule": "0 3 * * 1-5", "timeZone": "Europe/Berlin"},
        {"schedule": "@daily"},
        {"schedule": "0 0 1 JAN,JUL ?"},
        {"retention": {"keep": 1}},
        {"retention": {"maxAge": "72h"}},
        {"retention": {"keep": 7, "maxAge": "1w"}},
        {"retention": {"maxAge": "1h30m"}},
        {"suspend": True},
        {"destination": {"volume": {"claimName": "backups", "path": "/etcd/prod"}}},
        {"destination": {"s3": {**S3, "prefix": "a/b", "pathStyle": True, "caSecret": "ca"}}},
        {"destination": {"s3": {**S3, "endpoint": "https://s3.eu-west-1.amazonaws.com"}}},
    ],
)
def test_good_backups_are_accepted(spec):
    assert cs.validate(BACKUP_SCHEMA, backup(**spec)) == []


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"clusterName": "Example"}, "spec.clusterName: 'Example' does not match"),
        ({"clusterName": "a" * 51}, "spec.clusterName: "),
        ({"schedule": "every hour"}, "spec.schedule: 'every hour' does not match"),
        ({"schedule": "* * * *"}, "spec.schedule: '* * * *' does not match"),
        ({"schedule": "CRON_TZ=UTC 0 * * * *"}, "spec.schedule: "),
        ({"retention": {"keep": 0}}, "spec.retention.keep: 0 is less than the minimum of 1"),
        ({"retention": {"keep": "3"}}, "spec.retention.keep: '3' is not of type 'integer'"),
        ({"retention": {"maxAge": "3 days"}}, "spec.retention.maxAge: '3 days' does not match"),
        ({"retention": {"maxAge": "72"}}, "spec.retention.maxAge: '72' does not match"),
        ({"retention": {"maxAge": "1.5h"}}, "spec.retention.maxAge: '1.5h' does not match"),
        ({"destination": {"volume": {}}}, "spec.destination.volume: 'claimName' is a required"),
        (
            {"destination": {"volume": {"claimName": "b", "path": "rel"}}},
            "spec.destination.volume.path: 'rel' does not match",
        ),
        (
            {"destination": {"s3": {**S3, "endpoint": "s3.local:9000"}}},
            "spec.destination.s3.endpoint: 's3.local:9000' does not match",
        ),
        (
            {"destination": {"s3": {**S3, "endpoint": "http://s3.local/bucket"}}},
            "spec.destination.s3.endpoint: ",
        ),
        (
            {"destination": {"s3": {k: v for k, v in S3.items() if k != "credentialsSecret"}}},
            "spec.destination.s3: 'credentialsSecret' is a required",
        ),
        ({"destination": {"s3": {**S3, "bucket": "Backups"}}}, "spec.destination.s3.bucket: "),
        ({"suspend": "no"}, "spec.suspend: 'no' is not of type 'boolean'"),
    ],
)
def test_bad_backups_are_rejected_naming_the_field(spec, error):
    errors = cs.validate(BACKUP_SCHEMA, backup(**spec))
    assert len(errors) == 1, errors
    assert errors[0].startswith(error), errors


def test_what_the_schema_accepts_the_plan_reads_alike():
    """Every maxAge the pattern lets through parses in the plan (zero is refused by the CEL
    rule on the server and by the plan, both naming the field)."""
    pattern = BACKUP_SCHEMA["properties"]["spec"]["properties"]["retention"]["properties"]
    max_age = pattern["maxAge"]
    for text in ("30s", "30m", "72h", "7d", "1w", "1h30m", "1d12h"):
        assert cs.validate(max_age, text) == []
        assert bp.parse_duration(text).total_seconds() > 0
    assert ("self.matches('[1-9]')", "spec.retention.maxAge must be longer than zero") in (
        cs.cel_rules(BACKUP_SCHEMA)[".spec.retention.maxAge"]
    )
    with pytest.raises(bp.BackupPlanError, match=r"spec\.retention\.maxAge must be longer"):
        bp.parse_duration("0h")


def test_backup_cel_rules():
    rules = cs.cel_rules(BACKUP_SCHEMA)
    assert rules[".spec.destination"] == [
        (
            "has(self.volume) != has(self.s3)",
            "spec.destination must set exactly one of volume or s3",
        )
    ]
    assert any("'..'" in message for _rule, message in rules[".spec.destination.volume.path"])


def test_backup_status_carries_the_report():
    status = BACKUP_SCHEMA["properties"]["status"]["properties"]
    last = status["lastSnapshot"]["properties"]
    for key in ("location", "time", "revision", "size", "sha256", "etcdVersion", "clusterID"):
        assert key in last
    assert "duration" in last
    retained = status["retainedSnapshots"]
    assert retained["maxItems"] == bp.STATUS_LIMIT == 20
    # retained_status' entries fit the schema.
    entries = bp.retained_status(
        [
            {
                "location": f"p/ns/e/{i}.db",
                "time": f"2026-05-0{i}T00:00:00Z",
                "sha256": SHA,
                "verified": True,
                "revision": i,
                "size": 10,
            }
            for i in range(1, 4)
        ]
    )
    assert set(entries[0]) == set(retained["items"]["properties"])
    assert cs.validate(retained, entries) == []
    for key in ("phase", "observedGeneration", "conditions", "nextScheduleTime"):
        assert key in status


# --- EtcdRestore --------------------------------------------------------------------------


def restore(source: dict[str, Any], **cluster: Any) -> dict[str, Any]:
    return cs.apply_defaults(
        RESTORE_SCHEMA,
        {"spec": {"source": source, "cluster": {"name": "restored", **cluster}}},
    )


@pytest.mark.parametrize(
    "source",
    [
        {"backupName": "nightly"},
        {
            "volume": {"claimName": "backups", "path": "/ns/e/20260501T030000Z-rev7.db"},
            "sha256": SHA,
        },
        {"s3": {**S3, "key": "p/ns/e/20260501T030000Z-rev7.db"}, "sha256": SHA},
    ],
)
def test_good_restores_are_accepted(source):
    assert cs.validate(RESTORE_SCHEMA, restore(source, spec={"size": 3})) == []


@pytest.mark.parametrize(
    ("source", "cluster", "error"),
    [
        ({"backupName": "b", "sha256": "ABC"}, {}, "spec.source.sha256: 'ABC' does not match"),
        ({"volume": {"claimName": "c"}, "sha256": SHA}, {}, "spec.source.volume: 'path' is a"),
        (
            {"volume": {"claimName": "c", "path": "/d/"}, "sha256": SHA},
            {},
            "spec.source.volume.path: '/d/' does not match",
        ),
        ({"s3": S3, "sha256": SHA}, {}, "spec.source.s3: 'key' is a required property"),
        ({"backupName": "b"}, {"name": "Restored"}, "spec.cluster.name: 'Restored' does not"),
    ],
)
def test_bad_restores_are_rejected_naming_the_field(source, cluster, error):
    errors = cs.validate(RESTORE_SCHEMA, restore(source, **cluster))
    assert len(errors) == 1, errors
    assert errors[0].startswith(error), errors


def test_restore_cel_rules():
    rules = cs.cel_rules(RESTORE_SCHEMA)
    assert ".spec" not in rules, "no rule over the free-form cluster.spec (unbounded cost)"
    assert rules[".spec.cluster"] == [
        ("self.name == oldSelf.name", "spec.cluster.name is immutable: create a new EtcdRestore")
    ]
    messages = [m for _r, m in rules[".spec.source"]]
    assert messages == [
        "spec.source is immutable: a restore runs once; create a new EtcdRestore",
        "spec.source must set exactly one of backupName, volume, s3 or upload",
        "spec.source.sha256 is required with spec.source.volume, s3 or upload",
    ]


def test_restore_cluster_name_follows_the_etcdcluster_rules():
    name = RESTORE_SCHEMA["properties"]["spec"]["properties"]["cluster"]["properties"]["name"]
    cluster_rules = [r["rule"] for r in cs.schema_of(CLUSTER)["x-kubernetes-validations"]]
    assert "size(self.metadata.name) <= 50" in cluster_rules and name["maxLength"] == 50
    assert name["pattern"] == "^[a-z]([-a-z0-9]*[a-z0-9])?$"
    status = RESTORE_SCHEMA["properties"]["status"]["properties"]
    for key in ("phase", "conditions", "restoredRevision", "clusterID", "observedGeneration"):
        assert key in status
