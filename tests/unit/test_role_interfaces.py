"""Every role's defaults and argument specs say the same thing: each default is an option of an
entry point with the same default value, and each option with a default has it in defaults/main.yml.
A role's README names every input of its entry points."""

from __future__ import annotations

import os
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
