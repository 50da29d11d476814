#!/usr/bin/python
"""Ansible module: stream a local snapshot file into a running container through the API
server, so a person with only a kubeconfig can restore from a file on their machine."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_snapshot_upload
short_description: Upload a local etcd snapshot into a running container, whole or not at all
description:
  - Checks that the local file O(src) has the sha256 O(sha256) before anything is sent; a
    different file is refused (V(SnapshotCorrupt)).
  - Streams it through the API server's exec into O(container) of Pod O(pod), where a small
    receiver run by O(python) writes it to a hidden temporary file, fsyncs it and renames it to
    O(dest). The file therefore appears only when complete. The receiver's own sha256 of what
    arrived must match.
  - Nothing changes when O(dest) already holds a file of that sha256; a different file there
    is refused, never overwritten.
  - The restore Job of an EtcdRestore whose C(spec.source.upload) is set waits in its C(fetch)
    step for this file, then verifies it again (sha256, etcd's hash) before etcd's restore tool
    reads it.
  - Needs C(create) on C(pods/exec) in O(namespace).
version_added: "0.4.0"
author: etcd runbook operator maintainers
extends_documentation_fragment:
  - etcd_kube
options:
  namespace:
    description: Namespace of the Pod.
    type: str
    required: true
  pod:
    description: The Pod to upload into.
    type: str
    required: true
  container:
    description: The container of O(pod) that receives the file (it must be running).
    type: str
    required: true
  src:
    description: The local snapshot file.
    type: path
    required: true
  dest:
    description: Absolute path of the file in the container; its directory is created.
    type: str
    required: true
  sha256:
    description: The sha256 O(src) must have (64 hex digits).
    type: str
    required: true
  python:
    description: The Python interpreter in the container that runs the receiver.
    type: str
    default: /opt/venv/bin/python
  timeout:
    description: Seconds to wait for each answer of the receiver.
    type: int
    default: 120
attributes:
  check_mode:
    support: full
    details: Checks the local file and asks whether O(dest) is there; sends nothing.
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: Upload a snapshot into the restore Job's fetch step
  etcd_snapshot_upload:
    namespace: prod
    pod: from-laptop-restore-x7k2p
    container: fetch
    src: /home/sre/etcd/prod-20261124.db
    dest: /snapshot/upload/snapshot.db
    sha256: 3f1c0c7e2b6f0d5d5e7f0a4c9b1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d
"""

RETURN = r"""
path:
  description: O(dest).
  returned: success
  type: str
  sample: /snapshot/upload/snapshot.db
size:
  description: Bytes of O(src).
  returned: success
  type: int
  sample: 25485344
sha256:
  description: The sha256 of O(src), as checked on both ends.
  returned: success
  type: str
  sample: 3f1c0c7e2b6f0d5d5e7f0a4c9b1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d
msg:
  description: What was done.
  returned: always
  type: str
  sample: uploaded 25485344 bytes to /snapshot/upload/snapshot.db
reason:
  description: A short word for the failure (V(SnapshotCorrupt), V(UploadFailed),
    V(Refused), V(InvalidInput), V(KubernetesError)).
  returned: failed
  type: str
  sample: UploadFailed
"""

import re
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from etcd_runbook.clients.etcd_errors import EtcdInputError, EtcdModuleError
from etcd_runbook.clients.etcd_kube import credentials, kube_argument_spec
from etcd_runbook.operations.etcd_pod_upload import exec_channel, upload

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def argument_spec() -> dict[str, Any]:
    return {
        **kube_argument_spec(),
        "namespace": {"type": "str", "required": True},
        "pod": {"type": "str", "required": True},
        "container": {"type": "str", "required": True},
        "src": {"type": "path", "required": True},
        "dest": {"type": "str", "required": True},
        "sha256": {"type": "str", "required": True},
        "python": {"type": "str", "default": "/opt/venv/bin/python"},
        "timeout": {"type": "int", "default": 120},
    }


def run(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    if not _SHA256.match(params["sha256"]):
        raise EtcdInputError("sha256 must be 64 lowercase hex digits")
    if not params["dest"].startswith("/"):
        raise EtcdInputError("dest must be an absolute path in the container")

    # Credentials only once the local file has checked out: a wrong file needs no cluster.
    def opener(command: list[str]) -> Any:
        creds = credentials(params["kubeconfig"], params["context"])
        return exec_channel(creds, params["namespace"], params["pod"], params["container"], command)

    try:
        result = upload(
            opener,
            params["python"],
            params["src"],
            params["dest"],
            params["sha256"],
            check=module.check_mode,
            timeout=params["timeout"],
        )
    except OSError as exc:
        raise EtcdInputError(f"cannot read {params['src']}: {exc}") from exc
    if module._diff:
        where = f"{params['namespace']}/{params['pod']}:{params['dest']}"
        result["diff"] = {
            "before": "" if result["changed"] else f"{where} sha256 {result['sha256']}\n",
            "after": f"{where} sha256 {result['sha256']}\n",
        }
    return result


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    try:
        result = run(module)
    except EtcdModuleError as error:
        module.fail_json(**error.as_result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
