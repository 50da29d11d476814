"""Clients of etcd, Kubernetes and object stores, and certificate making: the I/O layer."""
