"""etcd_runbook/names.py: the vocabulary, and the filter task files spell it through."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from etcd_runbook import names
from tests.filters import load_filter

ROOT = Path(__file__).resolve().parents[2]
FILTERS = load_filter("etcd_names").FilterModule().filters()


def test_every_name_is_the_group_s_and_short_names_are_unique():
    values = [v for k, v in vars(names).items() if k.startswith(("LABEL_", "ANN_"))]
    ours = [v for v in values if isinstance(v, str) and v.startswith(names.GROUP + "/")]
    assert len(names.NAMES) == len(set(ours))
    assert all(names.NAMES[v.split("/", 1)[1]] == v for v in ours)


@pytest.mark.parametrize("short", ["fenced", "restore-uid", "cluster", "check-requested"])
def test_task_files_get_the_full_name(short):
    assert FILTERS["etcd_name"](short) == f"etcd.runbook.io/{short}"


def test_a_misspelt_name_fails_the_run_instead_of_writing_a_mark_nothing_reads():
    with pytest.raises(ValueError, match="'fence'"):
        FILTERS["etcd_name"]("fence")


def test_the_cluster_s_labels_and_selector_say_the_same():
    assert FILTERS["etcd_cluster_labels"]("e") == {
        "app.kubernetes.io/name": "etcd",
        "etcd.runbook.io/cluster": "e",
    }
    assert FILTERS["etcd_cluster_selector"]("e") == (
        "app.kubernetes.io/name=etcd,etcd.runbook.io/cluster=e"
    )


def test_no_python_outside_names_spells_a_label_or_annotation_of_the_group():
    # Prose (docstrings, comments) may name them; code takes them from etcd_runbook.names.
    spelled = re.compile(r"""(?<![#\w])f?["']etcd\.runbook\.io/(?!v1alpha1)[a-z-]+["']""")
    found = []
    for path in [*ROOT.glob("etcd_runbook/**/*.py"), *ROOT.glob("library/*.py")]:
        if path.name == "names.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if spelled.search(code):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_no_task_file_spells_a_label_or_annotation_of_the_group():
    # Comments and argument-spec prose may name them; what a task writes or reads comes from
    # the etcd_name, etcd_cluster_labels and etcd_cluster_selector filters.
    spelled = re.compile(r"etcd\.runbook\.io/(?!v1alpha1)[a-z-]+")
    found = []
    for path in [*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("roles/*/vars/*.yml")]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if spelled.search(code):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
