"""Fault points (etcd_runbook_operator/faults.py): each names a real task of the runbooks, one
that ends ok only where the point says; arming reads only names it knows, once per object."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from etcd_runbook_operator import faults
from etcd_runbook_operator.faults import POINTS, Ledger, armed, run_env

REPO = Path(__file__).resolve().parents[2]
INCLUDES = (
    "ansible.builtin.include_tasks",
    "ansible.builtin.include_role",
    "ansible.builtin.import_tasks",
)


def tasks() -> list[dict[str, Any]]:
    found = []
    for path in sorted(REPO.glob("roles/*/tasks/*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            found.extend(task.get("block", [])) if "block" in task else found.append(task)
    return found


@pytest.mark.parametrize("point", [POINTS[n] for n in sorted(POINTS)], ids=sorted(POINTS))
def test_each_point_names_one_task_of_the_runbooks(point):
    named = [t for t in tasks() if str(t.get("name", "")).startswith(point.task)]
    assert len(named) == 1, (point.name, [t.get("name") for t in named])
    # An include never ends ok in a callback's eyes: an "after" point on one would never fire.
    if point.when == "after":
        assert not set(INCLUDES) & set(named[0]), point.name


def obj(words: str | None, uid: str = "u1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "e", "uid": uid}
    if words is not None:
        meta["annotations"] = {"etcd.runbook.io/fault-points": words}
    return {"metadata": meta}


@pytest.mark.parametrize(
    "words, fired, names",
    [
        (None, set(), []),
        ("", set(), []),
        ("after-member-add", set(), ["after-member-add"]),
        (" after-member-add , before-promote ", set(), ["after-member-add", "before-promote"]),
        ("after-member-add,before-promote", {"after-member-add"}, ["before-promote"]),
        # Not a point: ignored, never run as anything.
        ("{{ lookup('pipe', 'id') }},rm -rf /", set(), []),
    ],
)
def test_armed_reads_known_names_not_yet_fired(words, fired, names):
    assert [p.name for p in armed(obj(words), "etcd.runbook.io", fired)] == names


def test_another_groups_annotation_arms_nothing():
    assert armed(obj("after-member-add"), "other.example.io", set()) == []


def test_the_ledger_remembers_per_object_uid(tmp_path):
    ledger = Ledger(tmp_path / "faults")
    assert ledger.fired("u1") == set()
    ledger.record("u1", "after-member-add")
    ledger.record("u2", "before-promote")
    assert ledger.fired("u1") == {"after-member-add"}
    assert ledger.fired("u2") == {"before-promote"}


def test_points_reach_the_run_only_when_armed(tmp_path, monkeypatch):
    assert run_env([], tmp_path / "f") == {}
    env = run_env([POINTS["after-member-add"]], tmp_path / "f")
    assert (
        env["ERO_FAULT_FIRED"] == str(tmp_path / "f")
        and "after-member-add" in env["ERO_FAULT_POINTS"]
    )
    monkeypatch.delenv(faults.ENABLE_ENV, raising=False)
    assert not faults.enabled()
    monkeypatch.setenv(faults.ENABLE_ENV, "yes")
    assert not faults.enabled()
    monkeypatch.setenv(faults.ENABLE_ENV, "enabled")
    assert faults.enabled()
