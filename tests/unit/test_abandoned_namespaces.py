"""Which test namespaces a new test session deletes as left by a run that has ended
(tests/k8s_cluster.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.k8s_cluster import OWNER, abandoned

BOOT = "f8d4075d-d0e6-4279-bba7-80a049e12a05"
LIVE = {100, 200}


def ns(name: str, owner: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owner is not None:
        meta["annotations"] = {OWNER: owner}
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("namespace", "deleted"),
    [
        pytest.param(ns("t-aaaa", f"{BOOT}/100"), False, id="its process still runs"),
        pytest.param(ns("t-aaaa", f"{BOOT}/300"), True, id="its process has ended"),
        pytest.param(ns("t-aaaa", "older-boot/100"), True, id="made before the machine started"),
        pytest.param(ns("t-aaaa", None), False, id="no owner: whose is unknown"),
        pytest.param(ns("t-aaaa", "garbage"), False, id="an owner that is no process"),
        pytest.param(ns("t-aaaa", f"{BOOT}/x"), True, id="a pid that is no number"),
        pytest.param(ns("default", f"{BOOT}/300"), False, id="not a test namespace"),
        pytest.param(ns("etcd-operator-system", None), False, id="the operator's"),
    ],
)
def test_abandoned(namespace: dict[str, Any], deleted: bool) -> None:
    name = namespace["metadata"]["name"]
    assert abandoned([namespace], BOOT, LIVE.__contains__) == ([name] if deleted else [])


def test_abandoned_lists_each_once_sorted() -> None:
    listed = [ns("t-b", f"{BOOT}/1"), ns("t-a", f"{BOOT}/2"), ns("t-c", f"{BOOT}/100")]
    assert abandoned(listed, BOOT, LIVE.__contains__) == ["t-a", "t-b"]
