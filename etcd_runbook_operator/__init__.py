"""The thin watcher of the etcd runbook operator: Kubernetes events in, ansible-runner runs out."""
