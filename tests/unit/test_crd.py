"""The EtcdCluster CRD: a structural schema whose defaults, patterns and columns say what
docs/api.md says. CEL rules need an API server: tests/cluster/test_crd_validation.py."""

from __future__ import annotations

import re
import subprocess
import zoneinfo
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from etcd_runbook.rules.cluster.spec import MAX_DEFRAG_WINDOW, MIN_DEFRAG_WINDOW, normalize_spec
from tests.crd_schema import (
    apply_defaults,
    cel_rules,
    resolves,
    structural_problems,
    validate,
    walk,
)

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "config/crd/bases/etcd.runbook.io_etcdclusters.yaml"
SAMPLE_PATH = ROOT / "config/samples/etcd_v1alpha1_etcdcluster.yaml"


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_PATH.read_text())


@pytest.fixture(scope="module")
def schema(crd) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def test_names_group_and_scope(crd):
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "etcdclusters.etcd.runbook.io"
    assert spec["group"] == "etcd.runbook.io"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == "EtcdCluster"
    assert spec["names"]["plural"] == "etcdclusters"
    assert spec["names"]["shortNames"] == ["etcd"]
    assert [v["name"] for v in spec["versions"]] == ["v1alpha1"]
    assert spec["versions"][0]["served"] and spec["versions"][0]["storage"]


def test_schema_is_structural(schema):
    """The rules of a structural schema the API server enforces (apiextensions v1)."""
    problems = structural_problems(schema)
    assert schema["properties"]["metadata"] == {"type": "object"}
    assert problems == []


def test_every_default_satisfies_its_own_schema(schema):
    defaults = [(path, node) for path, node in walk(schema) if "default" in node]
    assert len(defaults) >= 10
    for path, node in defaults:
        errors = list(jsonschema.Draft4Validator(node).iter_errors(node["default"]))
        assert errors == [], f"{path}: default {node['default']!r}: {errors}"


def test_empty_spec_gets_every_default(schema):
    defaulted = apply_defaults(schema, {"spec": {}})
    assert defaulted["spec"] == {
        "size": 3,
        "version": "3.6.16",
        "repository": "gcr.io/etcd-development/etcd",
        "storage": {"size": "1Gi"},
        "tls": {"enabled": True},
        "pod": {"antiAffinity": "preferred"},
        "defragmentation": {
            "enabled": True,
            "freePercent": 50,
            "minReclaim": "64Mi",
            "memberTimeout": "10m",
        },
        "paused": False,
    }
    assert validate(schema, defaulted) == []


def test_default_version_is_the_newest_supported_3_6(schema):
    supported = subprocess.run(
        [str(ROOT / "hack/etcd-bin"), "--supported"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    newest_36 = max(
        (v for v in supported if v.startswith("3.6.")),
        key=lambda v: tuple(int(p) for p in v.split(".")),
    )
    assert schema["properties"]["spec"]["properties"]["version"]["default"] == newest_36
    pattern = schema["properties"]["spec"]["properties"]["version"]["pattern"]
    assert all(re.search(pattern, v) for v in supported)


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"size": 0}, "spec.size: 0 is less than the minimum of 1"),
        ({"size": 10}, "spec.size: 10 is greater than the maximum of 9"),
        ({"size": "3"}, "spec.size: '3' is not of type 'integer'"),
        ({"version": "latest"}, "spec.version: 'latest' does not match"),
        ({"version": "3.7.0"}, "spec.version: '3.7.0' does not match"),
        ({"version": "v3.5.1"}, "spec.version: 'v3.5.1' does not match"),
        ({"version": "3.5"}, "spec.version: '3.5' does not match"),
        ({"repository": "quay.io/coreos/etcd:v3.5.0"}, "spec.repository: "),
        ({"repository": "Quay.io/etcd"}, "spec.repository: "),
        ({"storage": {"size": "1 Gi"}}, "spec.storage.size: '1 Gi' does not match"),
        ({"storage": {"size": "-1Gi"}}, "spec.storage.size: '-1Gi' does not match"),
        ({"storage": {"size": "1GB"}}, "spec.storage.size: '1GB' does not match"),
        ({"pod": {"antiAffinity": "always"}}, "spec.pod.antiAffinity: 'always' is not one of"),
        ({"tls": {"secrets": {"peer": "p", "server": "s"}}}, "spec.tls.secrets: 'client' is a"),
        ({"paused": "yes"}, "spec.paused: 'yes' is not of type 'boolean'"),
        ({"nodeLossTimeout": "5 minutes"}, "spec.nodeLossTimeout: '5 minutes' does not match"),
        ({"nodeLossTimeout": ""}, "spec.nodeLossTimeout: '' does not match"),
        ({"nodeLossTimeout": "300"}, "spec.nodeLossTimeout: '300' does not match"),
        ({"nodeLossTimeout": "5m1h"}, "spec.nodeLossTimeout: '5m1h' does not match"),
        ({"minReadySeconds": -1}, "spec.minReadySeconds: -1 is less than the minimum of 0"),
        ({"minReadySeconds": 3601}, "spec.minReadySeconds: 3601 is greater than the maximum"),
        ({"minReadySeconds": "30s"}, "spec.minReadySeconds: '30s' is not of type 'integer'"),
        (
            {"defragmentation": {"window": 7200}},
            "spec.defragmentation.window: 7200 is not of type 'string'",
        ),
        (
            {"defragmentation": {"schedule": "0 3 * * *" + " " * 120}},
            "spec.defragmentation.schedule: ",
        ),
    ],
)
def test_bad_spec_is_rejected_naming_the_field(schema, spec, error):
    errors = validate(schema, apply_defaults(schema, {"spec": spec}))
    assert len(errors) == 1, errors
    assert errors[0].startswith(error), errors


@pytest.mark.parametrize(
    "spec",
    [
        {"size": 1},
        {"size": 9, "version": "3.4.31"},
        {"version": "3.5.35", "repository": "registry.local:5000/mirror/etcd"},
        {"storage": {"size": "512Mi", "storageClassName": "fast"}},
        {"storage": {"size": "1.5Gi"}},
        {"tls": {"enabled": False}},
        {"tls": {"secrets": {"peer": "p", "server": "s", "client": "c"}}},
        {"nodeLossTimeout": "0"},
        {"nodeLossTimeout": "90s"},
        {"nodeLossTimeout": "1h30m"},
        {"nodeLossTimeout": "2h5s"},
        {"minReadySeconds": 0},
        {"minReadySeconds": 120},
        {"defragmentation": {"schedule": "0 3 * * *", "window": "2h", "timeZone": "Europe/Berlin"}},
        {
            "pod": {
                "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": 1}},
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "etcd", "operator": "Exists", "effect": "NoSchedule"}],
                "labels": {"team": "platform"},
                "annotations": {"note": "x"},
                "priorityClassName": "system-cluster-critical",
                "antiAffinity": "required",
                "affinity": {"nodeAffinity": {"anything": "kept"}},
            }
        },
    ],
)
def test_good_spec_is_accepted(schema, spec):
    assert validate(schema, apply_defaults(schema, {"spec": spec})) == []


def test_printer_columns(crd, schema):
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns] == [
        "Size", "Ready", "Version", "Available", "Health", "Phase", "Leader", "Cluster-ID",
        "Last-Backup", "Age",
    ]  # fmt: skip
    # Leader, cluster ID and the last backup with -o wide only.
    assert [c["name"] for c in columns if c.get("priority")] == [
        "Leader", "Cluster-ID", "Last-Backup"
    ]  # fmt: skip
    for column in columns:
        if column["jsonPath"] != ".metadata.creationTimestamp":
            assert resolves(schema, column["jsonPath"]), column


def test_status_and_scale_subresources(crd, schema):
    subresources = crd["spec"]["versions"][0]["subresources"]
    assert subresources["status"] == {}
    scale = subresources["scale"]
    assert scale == {
        "specReplicasPath": ".spec.size",
        "statusReplicasPath": ".status.size",
        "labelSelectorPath": ".status.selector",
    }
    for path in scale.values():
        assert resolves(schema, path), path
    assert schema["properties"]["status"]["properties"]["selector"]["type"] == "string"


def test_status_carries_the_role_contract(schema):
    status = schema["properties"]["status"]["properties"]
    for key in ("phase", "members", "readyMembers", "size", "currentVersion", "clusterID"):
        assert key in status
    for key in ("leader", "observedGeneration", "conditions", "selector"):
        assert key in status
    member = status["members"]["items"]["properties"]
    assert set(member) == {
        "name",
        "id",
        "peerURL",
        "clientURL",
        "ready",
        "learner",
        "version",
        "dbSize",
        "dbSizeInUse",
        "lastDefragmented",
    }
    condition = status["conditions"]["items"]["properties"]
    assert set(condition) == {
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
        "observedGeneration",
    }


def test_sample_is_valid_and_uses_the_default_version(schema):
    sample = yaml.safe_load(SAMPLE_PATH.read_text())
    assert sample["apiVersion"] == "etcd.runbook.io/v1alpha1"
    assert sample["kind"] == "EtcdCluster"
    assert sample["metadata"]["name"] == "example"
    assert sample["spec"]["size"] == 3
    assert sample["spec"]["tls"]["enabled"] is True
    version_default = schema["properties"]["spec"]["properties"]["version"]["default"]
    assert sample["spec"]["version"] == version_default
    assert validate(schema, apply_defaults(schema, sample)) == []


def cel_pattern(schema: dict[str, Any], field: str) -> re.Pattern[str]:
    """The regular expression of a CEL rule's self.matches() (RE2, which these patterns
    share with Python's re)."""
    ((rule, _message),) = cel_rules(schema)[f".spec.defragmentation.{field}"]
    return re.compile(re.findall(r"self\.matches\('([^']+)'\)", rule)[0])


def window_problems(**asked: Any) -> list[str]:
    spec = normalize_spec({"metadata": {"name": "e"}, "spec": {"defragmentation": asked}}, {})
    return [p["field"] for p in spec["problems"]]


@pytest.mark.parametrize(
    ("line", "runbook_takes"),
    [
        ("0 3 * * *", True),
        ("*/15 0-5 * * MON-FRI", True),
        ("@daily", True),
        ("0 3 * *", False),
        ("CRON_TZ=UTC 0 3 * * *", False),
        ("0 3 * * * *", False),
        ("", False),
        # The pattern passes it; the runbook names the weekday (0-6, as a CronJob takes).
        ("0 3 * * 7", False),
    ],
)
def test_what_the_schedule_rule_refuses_the_runbook_refuses(schema, line, runbook_takes):
    """The API server never refuses a line the runbook takes, and what it lets through the
    runbook judges itself (InvalidSpec naming the field)."""
    matches = bool(cel_pattern(schema, "schedule").fullmatch(line))
    assert (window_problems(schedule=line) == []) is runbook_takes
    assert matches or not runbook_takes


@pytest.mark.parametrize(
    "window", ["1m", "90s", "2h", "1h30m", "168h", "10080m", "59s", "168h1s", "0s", "2 hours", "2d"]
)
def test_the_window_rule_and_the_runbook_agree(schema, window):
    """The format is the pattern's; the bounds are duration() comparisons, the runbook's."""
    ((rule, message),) = cel_rules(schema)[".spec.defragmentation.window"]
    assert "duration(self) >= duration('1m')" in rule and MIN_DEFRAG_WINDOW == 60
    assert "duration(self) <= duration('168h')" in rule and MAX_DEFRAG_WINDOW == 168 * 3600
    assert "from 1m to 168h" in message
    matches = bool(cel_pattern(schema, "window").fullmatch(window))
    seconds = sum(
        int(n) * {"h": 3600, "m": 60, "s": 1}[unit]
        for n, unit in re.findall(r"(\d+)([hms])", window)
    )
    in_bounds = matches and MIN_DEFRAG_WINDOW <= seconds <= MAX_DEFRAG_WINDOW
    assert (window_problems(schedule="@daily", window=window) == []) is in_bounds


def test_the_time_zone_rule_takes_every_zone_the_runbook_knows(schema):
    pattern = cel_pattern(schema, "timeZone")
    zones = zoneinfo.available_timezones()
    assert len(zones) > 300
    assert [z for z in sorted(zones) if not pattern.fullmatch(z)] == []
    assert window_problems(schedule="@daily", timeZone="Europe/Berlin") == []
    assert not pattern.fullmatch("../etc/passwd") and not pattern.fullmatch("UTC ")
    assert window_problems(schedule="@daily", timeZone="Mars/Olympus") == [
        "spec.defragmentation.timeZone"
    ]
