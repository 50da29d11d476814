"""What the benchmarks share: the one harness under bench/.

A benchmark (bench/<name>.py, registered in bench/run.py) imports from here, from the test
bed the tests use too (testbed/: the local Kubernetes, the object store, the operator deployed,
etcd's binaries, `ansible -m`) and from the project (etcd_runbook, etcd_runbook_operator), never
from tests/ and never from another benchmark; nothing here imports a benchmark. So the
benchmarks need neither pytest nor the test suites' fixtures, and no two of them depend on each
other. What only benchmarks need is here; what the tests need too is in testbed/.

- report: docs/benchmarks.md sections, the command line, tables and the end of a run;
- cluster: the API through the watcher's own layer, EtcdCluster manifests, readers of what runs
  in the local Kubernetes (testbed.cluster brings it up, with kubectl and bounded waits);
- measured_operator: the operator measured (in the cluster, or a host process), its figures;
- static_etcd: a 3-member etcd started by hand on the local Kubernetes (the baselines);
- etcd_member: one real etcd member on loopback;
- throughput: the snapshot benchmarks' options, fill, rounds and medians.

No module here is named after the standard library or a package the project imports: a
script run from its directory would shadow it.
"""
