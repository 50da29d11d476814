"""playbooks/etcd-recover-quorum.yml's filter: a request for a quorum recovery, read by the
operator's own parser (etcd_runbook/rules/cluster/recover.py) before anything is written.

`{{ {'member': ..., 'backup': ..., 'clusterID': ..., 'acceptOlder': ...} | etcd_recover_request }}`
is the request as the annotation spells it (RecoverRequest.normalised), or fails naming the key
at fault. The values are a person's `-e` input, joined here as data, not spelled in a
template; a value with a space in it is refused, as it would read as pairs of its own
(`member=e-0 acceptOlder=true`)."""

from __future__ import annotations

import json
from typing import Any

from ansible.errors import AnsibleFilterError

from etcd_runbook.rules.cluster.recover import EXPECTED, PREFIX, RequestError, parse_request


def recover_request(pairs: dict[str, Any]) -> str:
    # An empty value, or acceptOlder false, is a key not given, as it is in an annotation.
    given = {k: "true" if v is True else str(v) for k, v in pairs.items() if v not in ("", False)}
    for key, value in given.items():
        if len(value.split()) != 1:
            want = EXPECTED.get(key, key)
            raise AnsibleFilterError(f"{PREFIX}{key} {json.dumps(value)} has a space; write {want}")
    try:
        return parse_request(" ".join(f"{k}={v}" for k, v in given.items())).normalised()
    except RequestError as e:
        raise AnsibleFilterError(e.message) from e


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "etcd_recover_request": recover_request,
        }
