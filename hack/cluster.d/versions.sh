# Pinned versions and cache locations shared by every hack/cluster helper (sourced, not run).
# shellcheck shell=bash
CACHE="${ETCD_OPERATOR_CACHE:-$HOME/.cache/etcd-runbook-operator}"
K8S_VERSION=v1.34.4            # newest 1.34 patch on the Go module proxy when pinned
K8S_STAGING_VERSION=v0.34.4    # k8s.io/api, client-go, ... published for that patch
K8S_BUILD_DATE=2026-01-01T00:00:00Z
COREDNS_VERSION=v1.14.7           # newest 1.14 on the Go module proxy when pinned
K8S_COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
K8S_BIN="$CACHE/k8s/bin/$K8S_VERSION"
COREDNS_BIN="$CACHE/k8s/coredns/$COREDNS_VERSION"
STATE="$CACHE/k8s/state"       # one cluster's state: PKI, etcd data, node dirs, logs, volumes
IMAGE_CACHE="$CACHE/k8s/images"
ETCD_K8S_MINOR=3.5             # the etcd the API server stores its objects in
PAUSE_IMAGE=registry.k8s.io/pause:3.10.1
COREDNS_IMAGE="local/coredns:$COREDNS_VERSION"
BUSYBOX_IMAGE=local/busybox:1

# Network layout (see docs/local-cluster.md): nothing here may overlap the host's 192.0.2.0/24.
POD_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SVC_IP=10.96.0.1
DNS_SVC_IP=10.96.0.10
CLUSTER_DOMAIN=cluster.local
APISERVER_PORT=6443
ETCD_CLIENT_PORT=12379
ETCD_PEER_PORT=12380
