"""Every role's defaults and argument specs say the same thing: each default is an option of an
entry point with the same default value, and each option with a default has it in defaults/main.yml.
A role's README names every input of its entry points."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROLES = sorted(p for p in (Path(__file__).resolve().parents[2] / "roles").iterdir() if p.is_dir())


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.exists() else None


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_defaults_and_argument_specs_agree(role: Path) -> None:
    defaults = _load(role / "defaults" / "main.yml") or {}
    specs = (_load(role / "meta" / "argument_specs.yml") or {}).get("argument_specs")
    assert specs, f"{role.name}: meta/argument_specs.yml has no entry point"
    options: dict[str, dict[str, Any]] = {}
    for entry, spec in specs.items():
        assert spec.get("short_description"), f"{role.name}:{entry} has no short_description"
        for name, option in (spec.get("options") or {}).items():
            assert option.get("description"), f"{role.name}:{entry}:{name} is not described"
            options.setdefault(name, {}).update(option)
            if "default" in option:
                assert name in defaults, f"{role.name}: {name} has a default only in {entry}"
                assert option["default"] == defaults[name], (
                    f"{role.name}: {name} defaults to {defaults[name]!r} in defaults/main.yml "
                    f"but to {option['default']!r} in entry point {entry}"
                )
    for name in defaults:
        assert name in options, f"{role.name}: default {name} is no entry point's option"


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_readme_names_every_input(role: Path) -> None:
    readme = role / "README.md"
    assert readme.exists(), f"{role.name} has no README.md"
    text = readme.read_text()
    specs = _load(role / "meta" / "argument_specs.yml")["argument_specs"]
    names = {name for spec in specs.values() for name in (spec.get("options") or {})}
    missing = [n for n in sorted(names) if f"`{n}`" not in text]
    assert not missing, f"{role.name}/README.md does not name {missing}"


PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
INTERNAL = "etcd_common"


def _roles_included(playbook: Path) -> set[str]:
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            include = node.get("ansible.builtin.include_role") or node.get("include_role")
            if isinstance(include, dict):
                found.add(include["name"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load(playbook.read_text()))
    return found


def test_every_runbook_role_has_a_playbook_and_the_internal_role_none() -> None:
    included = set().union(*(_roles_included(p) for p in PLAYBOOKS.glob("*.yml")))
    runbooks = {r.name for r in ROLES} - {INTERNAL}
    assert runbooks <= included, f"roles without a playbook: {sorted(runbooks - included)}"
    assert INTERNAL not in included, "a playbook includes the internal role directly"


def test_the_internal_role_refuses_to_run_alone(tmp_path: Path) -> None:
    repo = PLAYBOOKS.parent
    play = tmp_path / "alone.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  roles:\n    - etcd_common\n")
    env = {**os.environ, "ANSIBLE_CONFIG": str(repo / "ansible.cfg")}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), str(play)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "does not run on its own" in done.stdout


# What etcd_common publishes (README.md, "What it leaves for the runbook roles") is all another
# role or a playbook may read of it; its `_etcd_common_*` names are its own.
REPO = PLAYBOOKS.parent
COMMON = REPO / "roles" / INTERNAL
PRIVATE = re.compile(r"(?<![\w])_etcd_common_\w+")
NAMED = re.compile(r"(?<![\w])etcd_common_\w+")
PUBLISHED_ROW = re.compile(r"^\| `(etcd_common_\w+)` \|", re.MULTILINE)


def _readers() -> list[Path]:
    """Every file of the other roles, the playbooks and the molecule scenarios."""
    roots = [r for r in ROLES if r.name != INTERNAL] + [PLAYBOOKS, REPO / "molecule"]
    return sorted(p for root in roots for p in root.rglob("*") if p.is_file())


def _published() -> set[str]:
    text = (COMMON / "README.md").read_text()
    return set(PUBLISHED_ROW.findall(text.split("## What it leaves for the runbook roles", 1)[1]))


def _inputs() -> set[str]:
    specs = _load(COMMON / "meta" / "argument_specs.yml")["argument_specs"]
    return {name for spec in specs.values() for name in (spec.get("options") or {})}


def _set_in_common() -> set[str]:
    """Names etcd_common sets: set_fact keys of its tasks, and its vars/main.yml."""
    names = set(_load(COMMON / "vars" / "main.yml") or {})
    for tasks in (COMMON / "tasks").glob("*.yml"):
        for task in _load(tasks) or []:
            names |= set(task.get("ansible.builtin.set_fact") or {})
    return names


@pytest.mark.parametrize(
    ("text", "private", "named"),
    [
        ('when: "{{ _etcd_common_plan.heal }}"', ["_etcd_common_plan"], []),
        ("x: '{{ _etcd_common_info_error or 1 }}'", ["_etcd_common_info_error"], []),
        ("owner: '{{ etcd_common_owner }}'", [], ["etcd_common_owner"]),
        ("source: '{{ etcd_common_info | etcd_backup_source }}'", [], ["etcd_common_info"]),
        ("name: etcd_common", [], []),
        ("_etcd_cluster_etcd_common_plan: 1", [], []),
    ],
)
def test_names_are_found_as_whole_words(text: str, private: list[str], named: list[str]) -> None:
    assert PRIVATE.findall(text) == private
    assert NAMED.findall(text) == named


def test_no_other_role_or_playbook_names_a_private_etcd_common_name() -> None:
    found = [
        f"{path.relative_to(REPO)}:{number}: {name}"
        for path in _readers()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        for name in PRIVATE.findall(line)
    ]
    assert not found, "read only what etcd_common publishes (its README):\n" + "\n".join(found)


def test_other_roles_read_only_inputs_and_published_names_of_etcd_common() -> None:
    allowed = _inputs() | _published()
    found = sorted(
        f"{path.relative_to(REPO)}: {name}"
        for path in _readers()
        if path.suffix in (".yml", ".yaml")
        for name in set(NAMED.findall(path.read_text()))
        if name not in allowed
    )
    assert not found, "neither an input nor a published output of etcd_common:\n" + "\n".join(found)


def test_what_etcd_common_publishes_it_sets() -> None:
    published = _published()
    assert "etcd_common_plan" in published and "etcd_common_connection" in published
    assert not published - _set_in_common(), "published in README.md but never set"
    assert not published & _inputs(), "a name is both an input and an output"
