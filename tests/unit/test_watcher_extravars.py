from pathlib import Path

import pytest

from etcd_runbook_operator.config import Target, Watch
from etcd_runbook_operator.extravars import build_extravars, mark_unsafe, snake_keys, to_snake


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


def watch(snake: bool = True, spec: bool = True) -> Watch:
    return Watch(
        group="etcd.runbook.io",
        version="v1alpha1",
        kind="EtcdCluster",
        target=Target(playbook=Path("/x.yml")),
        snake_case_parameters=snake,
        pass_spec_parameters=spec,
    )


OBJ = {
    "apiVersion": "etcd.runbook.io/v1alpha1",
    "kind": "EtcdCluster",
    "metadata": {"name": "demo", "namespace": "prod"},
    "spec": {"size": 3, "storageSize": "1Gi"},
}


def u(text: str) -> dict[str, str]:
    return {"__ansible_unsafe": text}


def test_extravars_shape_with_every_string_of_the_object_marked_unsafe():
    ev = build_extravars(watch(), OBJ, Target(playbook=Path("/x.yml")))
    assert ev["ansible_operator_meta"] == {"name": u("demo"), "namespace": u("prod")}
    assert ev["size"] == 3 and ev["storage_size"] == u("1Gi")
    assert ev["_etcd_runbook_io_etcdcluster"] == mark_unsafe(OBJ)
    assert ev["_etcd_runbook_io_etcdcluster"]["metadata"]["name"] == u("demo")


@pytest.mark.parametrize(
    "value, marked",
    [
        ("{{ x }}", u("{{ x }}")),
        (3, 3),
        (True, True),
        (None, None),
        ({"k{{": ["a", 1]}, {"k{{": [u("a"), 1]}),
        ([[{"a": "b"}]], [[{"a": u("b")}]]),
    ],
)
def test_mark_unsafe(value, marked):
    assert mark_unsafe(value) == marked


def test_finalizer_vars_added_and_fresh_each_time():
    target = Target(playbook=Path("/x.yml"), vars={"state": "absent"})
    first = build_extravars(watch(), OBJ, target)
    assert first["state"] == "absent"  # the operator's own vars are not marked
    first["size"] = 99
    assert build_extravars(watch(), OBJ, target)["size"] == 3


def test_snake_case_can_be_disabled():
    ev = build_extravars(watch(snake=False), OBJ, Target(playbook=Path("/x.yml")))
    assert "storageSize" in ev and "storage_size" not in ev


def test_spec_parameters_can_be_left_out():
    ev = build_extravars(watch(spec=False), OBJ, Target(playbook=Path("/x.yml"), vars={"a": 1}))
    assert set(ev) == {"a", "ansible_operator_meta", "_etcd_runbook_io_etcdcluster"}
