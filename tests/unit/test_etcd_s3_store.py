"""etcd_runbook/rules/etcd_s3_store.py: one reading of an S3 store for the backup and the
restore, and what their Jobs are given to reach it."""

from __future__ import annotations

import pytest

from etcd_runbook.rules import etcd_backup_plan as bp
from etcd_runbook.rules import etcd_restore_plan as rp
from etcd_runbook.rules.etcd_s3_store import (
    StoreSpecError,
    aws_host,
    ca_volume,
    credentials_env,
    store,
)

GOOD = {"endpoint": "http://s3:9000", "bucket": "etcd", "credentialsSecret": "creds"}


@pytest.mark.parametrize(
    ("endpoint", "aws"),
    [
        ("https://s3.amazonaws.com", True),
        ("https://s3.eu-west-1.amazonaws.com", True),
        ("https://bucket.s3.amazonaws.com:443", True),
        ("https://amazonaws.com", True),
        ("https://notamazonaws.com", False),
        ("https://amazonaws.com.example.org", False),
        ("http://127.0.0.1:9000", False),
        ("http://minio", False),
    ],
)
def test_path_style_unless_the_endpoint_is_aws(endpoint, aws):
    assert aws_host(endpoint) is aws
    assert store({**GOOD, "endpoint": endpoint}, "f")["path_style"] is (not aws)
    assert store({**GOOD, "endpoint": endpoint, "pathStyle": True}, "f")["path_style"] is True


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"endpoint": "s3:9000"}, "endpoint"),
        ({"endpoint": "http://s3:9000/path"}, "endpoint"),
        ({"endpoint": None}, "endpoint"),
        ({"bucket": ""}, "bucket"),
        ({"bucket": "ab"}, "bucket"),
        ({"bucket": "Etcd"}, "bucket"),
        ({"bucket": "etcd_backups"}, "bucket"),
        ({"bucket": "-etcd"}, "bucket"),
        ({"bucket": "e" * 64}, "bucket"),
        ({"credentialsSecret": ""}, "credentialsSecret"),
        ({"credentialsSecret": "Creds"}, "credentialsSecret"),
    ],
)
def test_a_store_the_backup_refuses_the_restore_refuses_alike(change, field):
    # Before one home the restore took any non-empty bucket the backup refused.
    with pytest.raises(StoreSpecError) as refused:
        store({**GOOD, **change}, "spec.x.s3")
    assert refused.value.field == f"spec.x.s3.{field}"
    backup = {"clusterName": "e", "destination": {"s3": {**GOOD, **change}}}
    with pytest.raises(bp.BackupPlanError, match=f"spec.destination.s3.{field}"):
        bp.backup_target(backup, "ns")
    with pytest.raises(rp.RestoreRefused) as restore:
        rp._store({**GOOD, **change}, "spec.source.s3")
    assert restore.value.field == f"spec.source.s3.{field}"


def test_credentials_reach_a_job_only_as_references_to_their_secret():
    env = credentials_env("creds")
    assert [e["name"] for e in env] == ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
    assert all(set(e) == {"name", "valueFrom"} for e in env)
    assert {e["valueFrom"]["secretKeyRef"]["name"] for e in env} == {"creds"}
    assert ca_volume("ca")["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
