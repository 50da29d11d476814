"""spec.etcd: etcd's settings checked (each refusal naming its field) and turned into each
member's flags as its version spells them (etcd_manifests.settings_args)."""

from __future__ import annotations

from typing import Any

import pytest

from etcd_runbook.rules import etcd_plan as ep
from etcd_runbook.rules.cluster.spec import normalize_spec, pod_hash
from etcd_runbook.rules.etcd_manifests import settings_args
from tests.unit.test_etcd_plan import healthy3, obj


def args_for(version: str, **etcd: Any) -> list[str]:
    spec = normalize_spec(obj(version=version, etcd=etcd), {})
    assert spec["problems"] == [], spec["problems"]
    return settings_args({"spec": spec, "auto_compaction_retention": "1h"}, version)


@pytest.mark.parametrize(
    ("version", "etcd", "args"),
    [
        ("3.6.16", {}, ["--auto-compaction-mode=periodic", "--auto-compaction-retention=1h"]),
        (
            "3.6.16",
            {"autoCompactionMode": "revision", "autoCompactionRetention": "10000"},
            ["--auto-compaction-mode=revision", "--auto-compaction-retention=10000"],
        ),
        (
            "3.5.35",
            {
                "heartbeatInterval": 200,
                "electionTimeout": 2000,
                "snapshotCount": 5000,
                "maxRequestBytes": "2Mi",
                "maxTxnOps": 256,
                "logLevel": "warn",
            },
            [
                "--auto-compaction-mode=periodic",
                "--auto-compaction-retention=1h",
                "--heartbeat-interval=200",
                "--election-timeout=2000",
                "--snapshot-count=5000",
                f"--max-request-bytes={2 * 1024**2}",
                "--max-txn-ops=256",
                "--log-level=warn",
            ],
        ),
        # Gates: one flag from 3.6, the experimental flag each was before.
        (
            "3.6.16",
            {"featureGates": {"InitialCorruptCheck": True, "StopGRPCServiceOnDefrag": False}},
            [
                "--auto-compaction-mode=periodic",
                "--auto-compaction-retention=1h",
                "--feature-gates=InitialCorruptCheck=true,StopGRPCServiceOnDefrag=false",
            ],
        ),
        (
            "3.5.35",
            {"featureGates": {"InitialCorruptCheck": True, "CompactHashCheck": True}},
            [
                "--auto-compaction-mode=periodic",
                "--auto-compaction-retention=1h",
                "--experimental-compact-hash-check-enabled=true",
                "--experimental-initial-corrupt-check=true",
            ],
        ),
        (
            "3.4.31",
            {"featureGates": {"LeaseCheckpoint": True}},
            [
                "--auto-compaction-mode=periodic",
                "--auto-compaction-retention=1h",
                "--experimental-enable-lease-checkpoint=true",
            ],
        ),
    ],
)
def test_settings_become_the_member_s_flags(version: str, etcd: dict, args: list[str]) -> None:
    assert args_for(version, **etcd) == args


@pytest.mark.parametrize(
    ("etcd", "field", "words"),
    [
        ({"autoCompactionMode": "hourly"}, "spec.etcd.autoCompactionMode", "periodic or revision"),
        ({"autoCompactionMode": "revision"}, "spec.etcd.autoCompactionRetention", "such as 10000"),
        ({"autoCompactionRetention": "forever"}, "spec.etcd.autoCompactionRetention", "30m"),
        ({"heartbeatInterval": 5}, "spec.etcd.heartbeatInterval", "from 10 to 5000"),
        (
            {"heartbeatInterval": 300, "electionTimeout": 1000},
            "spec.etcd.electionTimeout",
            "at least five heartbeats",
        ),
        ({"electionTimeout": 400}, "spec.etcd.electionTimeout", "at least five heartbeats"),
        ({"snapshotCount": True}, "spec.etcd.snapshotCount", "whole number"),
        ({"maxRequestBytes": "1Gi"}, "spec.etcd.maxRequestBytes", "1Ki to 64Mi such as 2Mi"),
        ({"maxRequestBytes": "big"}, "spec.etcd.maxRequestBytes", "such as 2Mi"),
        ({"maxTxnOps": 0}, "spec.etcd.maxTxnOps", "from 1 to 100000"),
        ({"logLevel": "loud"}, "spec.etcd.logLevel", "debug, info, warn, error"),
        ({"featureGates": {"Warp": True}}, "spec.etcd.featureGates.Warp", "not a feature gate"),
        ({"featureGates": ["InitialCorruptCheck"]}, "spec.etcd.featureGates", "map gate names"),
        (
            {"featureGates": {"InitialCorruptCheck": "yes"}},
            "spec.etcd.featureGates.InitialCorruptCheck",
            "true or false",
        ),
    ],
)
def test_a_setting_that_cannot_be_used_is_refused_naming_its_field(
    etcd: dict, field: str, words: str
) -> None:
    spec = normalize_spec(obj(etcd=etcd), {})
    assert [p["field"] for p in spec["problems"]] == [field]
    assert words in spec["problems"][0]["message"], spec["problems"][0]["message"]
    # What a member is made with meanwhile (a heal never waits on a refusal): etcd's defaults.
    assert settings_args({"spec": spec, "auto_compaction_retention": "1h"}, "3.6.16")[:2] == [
        "--auto-compaction-mode=periodic",
        "--auto-compaction-retention=1h",
    ]


def test_a_gate_the_version_lacks_is_refused() -> None:
    spec = normalize_spec(
        obj(version="3.4.31", etcd={"featureGates": {"CompactHashCheck": True}}), {}
    )
    assert spec["problems"][0]["field"] == "spec.etcd.featureGates.CompactHashCheck"
    assert "etcd 3.4 has no such feature (it came with 3.5)" in spec["problems"][0]["message"]


def test_a_settings_change_rolls_the_members() -> None:
    plain = normalize_spec(obj(), {})
    tuned = normalize_spec(obj(etcd={"snapshotCount": 5000}), {})
    assert pod_hash(plain, "3.6.16") != pod_hash(tuned, "3.6.16")
    facts = healthy3(etcd={"snapshotCount": 5000})
    plan = ep.plan(facts)
    assert plan["roll"] == ["e-1"] and plan["roll_pending"][-1] == "e-0"
