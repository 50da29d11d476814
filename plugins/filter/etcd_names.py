"""The project's label and annotation names for task files.

`{{ 'fenced' | etcd_name }}` is `etcd.runbook.io/fenced`: a task that writes a mark spells
it through etcd_runbook/names.py, where every name is defined once."""

from __future__ import annotations

from typing import Any

from etcd_runbook.names import name


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"etcd_name": name}
