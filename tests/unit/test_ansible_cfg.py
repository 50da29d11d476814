"""ansible.cfg (found from the repository root) and playbooks/ansible.cfg (found from
playbooks/) are one configuration written twice: the same sections and keys, every path
naming the same place, every other value the same. Ansible resolves a relative path in a
config file from that file's own directory, so `./library` in one and `../library` in the
other agree. Which keys hold paths is taken from Ansible's own definitions (base.yml), so a
path setting added later is compared as a path without this test knowing its name."""

from __future__ import annotations

import configparser
import os
from pathlib import Path

import ansible.config
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TOP = ROOT / "ansible.cfg"
PLAYBOOKS = ROOT / "playbooks" / "ansible.cfg"

# Ansible's path types and how each splits a value into paths.
PATH_SEPARATORS = {"path": None, "tmppath": None, "pathspec": os.pathsep, "pathlist": ","}

# The paths this project sets today: a floor, so a change in Ansible's definitions that stopped
# calling one of them a path would be noticed rather than silently compared as text.
KNOWN_PATH_KEYS = {
    ("defaults", "library"),
    ("defaults", "doc_fragment_plugins"),
    ("defaults", "filter_plugins"),
    ("defaults", "action_plugins"),
    ("defaults", "roles_path"),
    ("defaults", "inventory"),
}


def read(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    with path.open(encoding="utf-8") as handle:
        parser.read_file(handle)
    return parser


def entries(parser: configparser.ConfigParser) -> dict[tuple[str, str], str]:
    return {
        (section, key): parser.get(section, key).strip()
        for section in parser.sections()
        for key in parser.options(section)
    }


def ansible_path_keys() -> dict[tuple[str, str], str]:
    """(section, key) of every ini setting Ansible reads as a path, with its type."""
    base = Path(ansible.config.__file__).parent / "base.yml"
    definitions = yaml.safe_load(base.read_text(encoding="utf-8"))
    found: dict[tuple[str, str], str] = {}
    for definition in definitions.values():
        kind = definition.get("type")
        if kind not in PATH_SEPARATORS:
            continue
        for ini in definition.get("ini") or []:
            found[(ini["section"], ini["key"])] = kind
    return found


def resolve(value: str, kind: str, base: Path) -> list[str]:
    """The absolute paths a value names, resolved as Ansible does from the file's directory."""
    separator = PATH_SEPARATORS[kind]
    parts = [value] if separator is None else value.split(separator)
    return [
        os.path.normpath(os.path.join(base, os.path.expanduser(part.strip())))
        for part in parts
        if part.strip()
    ]


@pytest.fixture(scope="module")
def both() -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    return entries(read(TOP)), entries(read(PLAYBOOKS))


def test_ansible_calls_each_known_setting_a_path():
    assert sorted(KNOWN_PATH_KEYS - ansible_path_keys().keys()) == []


def test_the_same_sections_and_keys(both):
    top, playbooks = both
    assert sorted(top.keys() - playbooks.keys()) == [], "only in ansible.cfg"
    assert sorted(playbooks.keys() - top.keys()) == [], "only in playbooks/ansible.cfg"


def test_paths_name_the_same_places(both):
    top, playbooks = both
    kinds = ansible_path_keys()
    for entry in sorted((top.keys() & playbooks.keys()) & kinds.keys()):
        kind = kinds[entry]
        assert resolve(top[entry], kind, TOP.parent) == resolve(
            playbooks[entry], kind, PLAYBOOKS.parent
        ), entry


def test_paths_exist(both):
    # Two files agreeing on a place that is not there would agree on nothing useful.
    top, _ = both
    kinds = ansible_path_keys()
    for entry in sorted(top.keys() & kinds.keys()):
        for path in resolve(top[entry], kinds[entry], TOP.parent):
            assert Path(path).exists(), (entry, path)


def test_other_values_are_equal(both):
    top, playbooks = both
    kinds = ansible_path_keys()
    for entry in sorted((top.keys() & playbooks.keys()) - kinds.keys()):
        assert top[entry] == playbooks[entry], entry
