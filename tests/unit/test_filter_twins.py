"""Decisions the filter plugins each keep a copy of. Ansible loads a filter
plugin by its path, and on the controller it can import neither the project's module_utils
(outside a collection) nor another filter plugin, so the copies stay; these tables keep them
saying the same."""

from __future__ import annotations

import pytest
from ansible.module_utils.etcd_observe import QUESTION_SILENCE, unschedulable

from tests.filters import load_filter

backup_plan = load_filter("etcd_backup_plan")
backup_jobs = load_filter("etcd_backup_jobs")
restore_plan = load_filter("etcd_restore_plan")
cluster_plan = load_filter("etcd_plan")


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
def test_both_plans_tell_an_aws_endpoint_alike(endpoint, aws):
    assert backup_plan._aws_host(endpoint) == restore_plan._aws_host(endpoint) == aws


@pytest.mark.parametrize("ca_secret", ["", "store-ca"])
def test_the_backup_and_restore_jobs_get_the_store_credentials_alike(ca_secret):
    s3 = {"endpoint": "http://s3:9000", "bucket": "etcd", "credentialsSecret": "creds"}
    if ca_secret:
        s3["caSecret"] = ca_secret
    backup = {
        "metadata": {"name": "nightly", "namespace": "prod", "uid": "u-1"},
        "spec": {"clusterName": "example", "destination": {"s3": s3}},
    }
    pod = backup_jobs.pod_spec(backup, "image", {})
    env: list[dict] = []
    volumes: list[dict] = []
    restore_plan._fetch_from_s3(restore_plan._store(s3, "spec.source.s3"), env, [], volumes)

    def credentials(entries: list[dict]) -> list[dict]:
        return [e for e in entries if e["name"].startswith("AWS_")]

    assert credentials(pod["containers"][0]["env"]) == credentials(env)
    assert len(credentials(env)) == 2
    # The CA: the same Secret key, as a volume of the same name (each Job mounts it where
    # its own steps look).
    assert [v for v in pod["volumes"] if v["name"] == "s3-ca"] == volumes


@pytest.mark.parametrize(
    "conditions",
    [
        [],
        [{"type": "PodScheduled", "status": "True"}],
        [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
        [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": " m "}],
    ],
)
def test_the_plan_and_the_wait_read_the_scheduler_alike(conditions):
    # The wait (module_utils/etcd_observe.py) stops on what the plan reports as unschedulable.
    pod = {"metadata": {"name": "e-0"}, "status": {"conditions": conditions}}
    assert unschedulable([pod], "e-0") == cluster_plan.unschedulable(pod)


def test_the_look_reads_the_volume_of_every_member_the_plan_may_judge_lost():
    # A node the look still counts usable is one the plan never counts lost for its silence:
    # else the plan would judge a member whose volume nobody read (and never move it).
    assert QUESTION_SILENCE < cluster_plan.NODE_SILENCE
