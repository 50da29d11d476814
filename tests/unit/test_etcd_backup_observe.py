"""etcd_backup_observe's look (etcd_runbook/observe/etcd_backup_observe.py) against a fake reader:
what it asks for, and that a Secret's values never leave it."""

from __future__ import annotations

from typing import Any

from etcd_runbook.observe.etcd_backup_observe import observe_backup


class FakeReader:
    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects
        self.asked: list[str] = []

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any] | None:
        self.asked.append(path)
        return self.objects.get(path)

    def items(self, path: str, label_selector: str, kind: str, api_version: str) -> list[Any]:
        self.asked.append(f"{path}?{label_selector}")
        return [{"kind": kind, **o} for p, o in self.objects.items() if p.startswith(path + "/")]


SECRET = "/api/v1/namespaces/prod/secrets/creds"
CLUSTER = "/apis/etcd.runbook.io/v1alpha1/namespaces/prod/etcdclusters/example"
JOB = "/apis/batch/v1/namespaces/prod/jobs/nightly-1"
OWN = "/api/v1/namespaces/ops/pods/operator-0"


def test_everything_asked_is_read_and_the_secret_only_by_its_key_names():
    reader = FakeReader(
        {
            SECRET: {"data": {"secretAccessKey": "c2VjcmV0", "accessKeyId": "aWQ="}},
            CLUSTER: {"metadata": {"name": "example"}},
            JOB: {"metadata": {"name": "nightly-1"}},
            OWN: {
                "spec": {
                    "containers": [
                        {"name": "sidecar", "image": "x"},
                        {"name": "manager", "image": "op:1"},
                    ]
                }
            },
        }
    )
    facts = observe_backup(
        reader,
        {
            "namespace": "prod",
            "name": "nightly",
            "cluster": "example",
            "credentials_secret": "creds",
            "claim": "backups",
            "own_pod": {"namespace": "ops", "name": "operator-0", "container": "manager"},
        },
    )
    assert facts["secret_keys"] == ["accessKeyId", "secretAccessKey"]
    assert "c2VjcmV0" not in repr(facts)
    assert (facts["cluster_found"], facts["claim_found"], facts["image"]) == (True, False, "op:1")
    assert [j["metadata"]["name"] for j in facts["jobs"]] == ["nightly-1"]
    assert facts["cronjob"] is None
    assert "/apis/batch/v1/namespaces/prod/jobs?etcd.runbook.io/backup=nightly" in reader.asked


def test_only_what_is_asked():
    reader = FakeReader({})
    facts = observe_backup(reader, {"namespace": "prod", "name": "nightly"})
    assert (facts["cluster_found"], facts["secret_keys"], facts["claim_found"], facts["image"]) == (
        None,
        None,
        None,
        "",
    )
    assert len(reader.asked) == 5  # Jobs, Pods, the CronJob, the EtcdBackup, its RoleBinding


BACKUP = "/apis/etcd.runbook.io/v1alpha1/namespaces/prod/etcdbackups/nightly"


def test_the_status_is_read_after_the_jobs():
    # A Job writes lastSnapshot before it exits: reading the status after the Jobs is what makes
    # a finished Job and its snapshot arrive together (CI once saw Succeeded without Available).
    reader = FakeReader({BACKUP: {"status": {"lastSnapshot": {"location": "s3://b/k"}}}})
    facts = observe_backup(reader, {"namespace": "prod", "name": "nightly"})
    assert facts["status"] == {"lastSnapshot": {"location": "s3://b/k"}}
    jobs = reader.asked.index("/apis/batch/v1/namespaces/prod/jobs?etcd.runbook.io/backup=nightly")
    assert reader.asked.index(BACKUP) > jobs


def test_a_backup_gone_has_no_status():
    facts = observe_backup(FakeReader({}), {"namespace": "prod", "name": "nightly"})
    assert facts["status"] is None


def test_a_missing_secret_has_no_keys():
    facts = observe_backup(
        FakeReader({}), {"namespace": "prod", "name": "n", "credentials_secret": "gone"}
    )
    assert facts["secret_keys"] is None


CLAIM = "/api/v1/namespaces/prod/persistentvolumeclaims/backups"
BINDING = "/apis/rbac.authorization.k8s.io/v1/namespaces/prod/rolebindings/etcd-backup-nightly"


def test_the_claims_labels_the_clusters_tls_and_the_binding_are_read():
    tls = {"secrets": {"server": "s", "client": "c"}}
    reader = FakeReader(
        {
            CLAIM: {"metadata": {"labels": {"etcd.runbook.io/backup-destination": "true"}}},
            CLUSTER: {"metadata": {"name": "example", "uid": "u"}, "spec": {"tls": tls, "size": 3}},
            BINDING: {"roleRef": {"kind": "ClusterRole"}},
        }
    )
    params = {"namespace": "prod", "name": "nightly", "cluster": "example", "claim": "backups"}
    facts = observe_backup(reader, params)
    assert facts["claim_labels"] == {"etcd.runbook.io/backup-destination": "true"}
    assert facts["cluster"] == {"metadata": {"name": "example"}, "spec": {"tls": tls}}
    assert facts["binding"] == {"roleRef": {"kind": "ClusterRole"}}
    gone = observe_backup(FakeReader({}), params)
    assert (gone["claim_labels"], gone["cluster"], gone["binding"]) == (None, None, None)
