from pathlib import Path

import pytest

from etcd_runbook_operator.config import Target, Watch
from etcd_runbook_operator.extravars import build_extravars, snake_keys, to_snake


@pytest.mark.parametrize(
    "camel, snake",
    [
        ("size", "size"),
        ("storageSize", "storage_size"),
        ("clusterID", "cluster_id"),
        ("HTTPServerPort", "http_server_port"),
        ("tlsCASecretName", "tls_ca_secret_name"),
        ("v3Api", "v3_api"),
        ("pod-template", "pod_template"),
    ],
)
def test_to_snake(camel, snake):
    assert to_snake(camel) == snake


def test_snake_keys_is_recursive_and_leaves_values_alone():
    spec = {"backupPolicy": {"maxBackups": 3, "targets": [{"bucketName": "myBucket"}]}}
    assert snake_keys(spec) == {
        "backup_policy": {"max_backups": 3, "targets": [{"bucket_name": "myBucket"}]}
    }


def watch(snake: bool = True) -> Watch:
    return Watch(
        group="etcd.runbook.io",
        version="v1alpha1",
        kind="EtcdCluster",
        target=Target(playbook=Path("/x.yml")),
        snake_case_parameters=snake,
    )


OBJ = {
    "apiVersion": "etcd.runbook.io/v1alpha1",
    "kind": "EtcdCluster",
    "metadata": {"name": "demo", "namespace": "prod"},
    "spec": {"size": 3, "storageSize": "1Gi"},
}


def test_extravars_shape():
    ev = build_extravars(watch(), OBJ, Target(playbook=Path("/x.yml")))
    assert ev["ansible_operator_meta"] == {"name": "demo", "namespace": "prod"}
    assert ev["size"] == 3 and ev["storage_size"] == "1Gi"
    assert ev["_etcd_runbook_io_etcdcluster"] == OBJ


def test_finalizer_vars_added_and_fresh_each_time():
    target = Target(playbook=Path("/x.yml"), vars={"state": "absent"})
    first = build_extravars(watch(), OBJ, target)
    assert first["state"] == "absent"
    first["size"] = 99
    assert build_extravars(watch(), OBJ, target)["size"] == 3


def test_snake_case_can_be_disabled():
    ev = build_extravars(watch(snake=False), OBJ, Target(playbook=Path("/x.yml")))
    assert "storageSize" in ev and "storage_size" not in ev
