"""Every project filter a role, playbook or molecule scenario calls is one a plugin in
plugins/filter/ provides: a name the move to etcd_runbook/ dropped from a plugin's map fails
here, not half way through a runbook on the cluster."""

from __future__ import annotations

import re
from pathlib import Path

from tests.filters import FILTERS, load_filter

ROOT = Path(__file__).resolve().parents[2]
# A project filter after a pipe: `| etcd_name`, `|etcd_cluster_plan(...)`.
USED = re.compile(r"\|\s*(etcd_[a-z0-9_]+)\b")


def provided() -> set[str]:
    names: set[str] = set()
    for path in FILTERS.glob("*.py"):
        names |= set(load_filter(path.stem).FilterModule().filters())
    return names


def test_every_filter_a_runbook_calls_exists():
    have = provided()
    missing = []
    for path in sorted(
        [
            *ROOT.glob("roles/**/*.yml"),
            *ROOT.glob("playbooks/**/*.yml"),
            *ROOT.glob("molecule/**/*.yml"),
        ]
    ):
        # Comments and task titles ("Refuse | etcd_common runs only ...") call nothing; a
        # filter may follow its pipe on the next line.
        code = "\n".join(
            "" if line.strip().removeprefix("- ").startswith("name:") else line.split("#", 1)[0]
            for line in path.read_text().splitlines()
        )
        missing += [
            f"{path.relative_to(ROOT)}:{code.count(chr(10), 0, m.start()) + 1}: {m[1]}"
            for m in USED.finditer(code)
            if m[1] not in have
        ]
    assert not missing, "\n".join(missing)
