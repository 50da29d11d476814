"""The etcd_cluster runbook's decisions, one module a concern; etcd_runbook/rules/etcd_plan.py
puts them in order (its STEPS) and roles/etcd_cluster/README.md says which rule is where."""
