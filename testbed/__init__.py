"""The test bed: the machinery that brings up and drives the local test bed on this machine.

- `cluster`: the local Kubernetes (hack/cluster, docs/local-cluster.md), its pinned kubectl,
  bounded waits and port-forwards;
- `object_store`: the S3-compatible store (hack/object-store): versitygw on loopback, or the
  one in the local Kubernetes;
- `operator_incluster`: the operator deployed from its image (hack/build-operator-image,
  config/default), as users run it;
- `operator_process`: the operator as a host process with its ServiceAccount's rights
  (hack/run-operator-as-sa);
- `ansible_adhoc`: one Ansible module run as a person runs it (`ansible localhost -m`);
- `host`: this machine: the checkout, the build cache, etcd's binaries (hack/etcd-bin), free
  loopback ports, child processes stopped for sure.

Used by tests/ (whose pytest fixtures are thin wrappers over it) and bench/; it imports neither,
nor pytest, nor the operator's code (`make lint` checks it: lint-imports, pyproject.toml). No
module here is named after the standard library or a package the project imports: a script
run from its directory would shadow it.
"""


class TestbedError(RuntimeError):
    """A part of the test bed could not be built, started or reached: a hack/ script, kubectl,
    a process it started. The message carries the end of its output."""

    __test__ = False  # a class named Test*: not a test class for pytest
