"""The EtcdRestore's spec.cluster.spec is the EtcdCluster's spec schema, copied by
hack/crd-embed: compared here field by field, so the two never drift. That the API server
takes it, CEL rules and all: tests/cluster/test_crd_validation.py."""

from __future__ import annotations

import copy
import importlib.machinery
import importlib.util
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest

from tests import crd_schema as cs

SCRIPT = cs.ROOT / "hack" / "crd-embed"


def crd_embed() -> ModuleType:
    # The script has no .py suffix, so it is loaded by path.
    loader = importlib.machinery.SourceFileLoader("crd_embed", str(SCRIPT))
    spec = importlib.util.spec_from_loader("crd_embed", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def cluster_spec() -> dict[str, Any]:
    return copy.deepcopy(cs.schema_of(cs.load("etcdclusters"))["properties"]["spec"])


def restore_cluster_spec() -> dict[str, Any]:
    spec = cs.schema_of(cs.load("etcdrestores"))["properties"]["spec"]
    return copy.deepcopy(spec["properties"]["cluster"]["properties"]["spec"])


def transition_rules(schema: dict[str, Any]) -> list[str]:
    return [
        f"{path}: {message}"
        for path, rules in cs.cel_rules(schema).items()
        for rule, message in rules
        if "oldSelf" in rule
    ]


def test_the_embedded_schema_is_the_etcdcluster_spec():
    """All but the description, which is the restore's own, and the transition rules: a
    restore's cluster spec may be mended until the cluster is made, so the rules that guard a
    running cluster's changes would refuse a mend for a cluster that does not exist yet."""
    embedded, source = restore_cluster_spec(), cluster_spec()
    assert "EtcdRestore" in embedded.pop("description")
    assert source.pop("description") == "The desired cluster."
    assert transition_rules(embedded) == []
    assert transition_rules(source) == [
        ".storage: spec.storage.storageClassName is immutable",
        ".storage.size: spec.storage.size may grow but never shrink",
        ".tls: spec.tls.enabled cannot change after creation",
        ".pod: spec.pod.securityContext is immutable: each member's data is owned by the ids it "
        "was made with",
    ]
    for _path, node in cs.walk(source):
        rules = [r for r in node.pop("x-kubernetes-validations", []) if "oldSelf" not in r["rule"]]
        if rules:
            node["x-kubernetes-validations"] = rules
    assert embedded == source


def test_the_restore_crd_is_what_the_generator_writes():
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr


def test_the_check_sees_a_drift_and_the_rest_of_the_file_is_kept():
    module = crd_embed()
    text = module.RESTORE.read_text()
    drifted = text.replace("maximum: 9\n", "maximum: 7\n", 1)
    assert drifted != text
    assert module.generated(drifted) == text
    # Only the block is written: a hand-written comment outside it stays.
    commented = text.replace("  versions:\n", "  # kept\n  versions:\n", 1)
    assert module.generated(commented) == commented


def test_no_markers_no_rewrite():
    with pytest.raises(SystemExit, match="no '# BEGIN generated"):
        crd_embed().generated("spec: {}\n")
