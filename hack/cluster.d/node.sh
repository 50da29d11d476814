# One node: containerd (private root/state/socket), the CNI bridge config, kubelet and
# kube-proxy, all parametrised by the node index set with node_vars (sourced).
# shellcheck shell=bash

_cgroup_controllers() {
	awk '$3 == "cgroup" { n = split($4, o, ","); for (i = 1; i <= n; i++) if (o[i] !~ /^(rw|ro|relatime|noexec|nosuid|nodev)$/) { print $2; break } }' /proc/mounts
}

# kubelet refuses a --cgroup-root that does not exist; cpuset needs its cpus/mems filled.
ensure_cgroup_root() {
	local mnt
	for mnt in $(_cgroup_controllers); do
		mkdir -p "$mnt$NODE_CGROUP_ROOT"
		if [[ -f "$mnt/cpuset.cpus" ]]; then
			[[ -n "$(cat "$mnt$NODE_CGROUP_ROOT/cpuset.cpus")" ]] || cat "$mnt/cpuset.cpus" >"$mnt$NODE_CGROUP_ROOT/cpuset.cpus"
			[[ -n "$(cat "$mnt$NODE_CGROUP_ROOT/cpuset.mems")" ]] || cat "$mnt/cpuset.mems" >"$mnt$NODE_CGROUP_ROOT/cpuset.mems"
		fi
	done
}

# Every cgroup hierarchy: the v1 ones above and cgroup2 "unified", where the kubelet (runc's
# cgroup code, on this hybrid machine) makes the node's cgroups too.
cgroup_mounts() {
	awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/mounts
}

remove_cgroup_root() {
	local mnt
	for mnt in $(cgroup_mounts); do
		[[ -d "$mnt$NODE_CGROUP_ROOT" ]] || continue
		find "$mnt$NODE_CGROUP_ROOT" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
}

# stdin -> FILE, atomically and only when the content differs: kube-proxy exits when its
# config file changes and containerd reloads the CNI config on every write.
# Changed files are listed in CHANGED so start_node restarts the daemon reading each.
CHANGED=()
_write_if_changed() {
	local file="$1" tmp="$1.tmp"
	cat >"$tmp"
	if cmp -s "$tmp" "$file"; then
		rm -f "$tmp"
	else
		mv -f "$tmp" "$file"
		CHANGED+=("$file")
	fi
}

# restart_if_changed NAME FILE: stop NAME when FILE was rewritten, so start_bg starts it anew.
_restart_if_changed() {
	local f
	for f in "${CHANGED[@]}"; do
		if [[ "$f" == "$2" ]] && pid_of "$1" >/dev/null; then
			log "$2 changed: restarting $1"
			stop_bg "$1"
		fi
	done
}

write_node_config() {
	local c="$NODE_DIR/containerd"
	mkdir -p "$c" "$NODE_DIR/cni/net.d" "$NODE_DIR/kubelet" "$NODE_DIR/pod-logs"
	_write_if_changed "$c/config.toml" <<CFG
version = 2
root = "$c/root"
state = "$c/state"
[grpc]
  address = "$NODE_CONTAINERD_SOCK"
[ttrpc]
  address = "$NODE_CONTAINERD_SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  netns_mounts_under_state_dir = true
  # root here lacks CAP_SYS_RESOURCE, so no process may lower its oom_score_adj: keep
  # containers at or above containerd's own value instead of failing every sandbox.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$c/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE_DIR/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$c/certs.d"
CFG
	# Every image the test bed runs is imported, never pulled. An image it lacks (a test asks
	# for one on purpose) is pulled from a loopback port nothing listens on, so it fails at
	# once and no lookup or request ever leaves the machine.
	mkdir -p "$c/certs.d/_default"
	_write_if_changed "$c/certs.d/_default/hosts.toml" <<HOSTS
server = "http://127.0.0.1:9"
[host."http://127.0.0.1:9"]
  capabilities = ["pull", "resolve"]
HOSTS
	# No ipMasq: pods have no way off the machine (see network.sh).
	_write_if_changed "$NODE_DIR/cni/net.d/10-erop.conflist" <<CNI
{
  "cniVersion": "1.0.0",
  "name": "erop-node$NODE_INDEX",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$NODE_DIR/cni/ipam",
        "ranges": [[{"subnet": "$NODE_POD_SUBNET", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
	# Pods with dnsPolicy Default get no upstream resolver: there is no outside to ask.
	_write_if_changed "$NODE_DIR/resolv.conf" </dev/null
	_write_if_changed "$NODE_DIR/kubelet.yaml" <<KUBELET
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $NODE_KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$NODE_CONTAINERD_SOCK
cgroupDriver: cgroupfs
cgroupRoot: $NODE_CGROUP_ROOT
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
clusterDNS: [$DNS_SVC_IP]
clusterDomain: $CLUSTER_DOMAIN
resolvConf: $NODE_DIR/resolv.conf
podLogsDir: $NODE_DIR/pod-logs
staticPodPath: ""
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}
maxPods: 110
KUBELET
	_write_if_changed "$NODE_DIR/kube-proxy.yaml" <<PROXY
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $STATE/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:$NODE_PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$NODE_PROXY_METRICS_PORT
mode: iptables
clusterCIDR: $POD_CIDR
detectLocalMode: ClusterCIDR
nodePortAddresses: ["$NODE_IP/32"]
conntrack: {maxPerCore: 0}
iptables: {masqueradeAll: $([[ -d /proc/sys/net/bridge ]] && echo false || echo true)}
PROXY
}

# start_bg in the node's network namespace (the host's for node 0).
_start_node_bg() {
	if [[ -n "$NODE_NETNS" ]]; then
		start_bg --netns "$NODE_NETNS" "$@"
	else
		start_bg "$@"
	fi
}

start_node() {
	CHANGED=()
	write_node_config
	ensure_cgroup_root
	_restart_if_changed "containerd-node$NODE_INDEX" "$NODE_DIR/containerd/config.toml"
	_restart_if_changed "kubelet-node$NODE_INDEX" "$NODE_DIR/kubelet.yaml"
	_restart_if_changed "kube-proxy-node$NODE_INDEX" "$NODE_DIR/kube-proxy.yaml"
	_start_node_bg "containerd-node$NODE_INDEX" containerd --config "$NODE_DIR/containerd/config.toml"
	wait_until 60 "containerd of $NODE_NAME" ctr --address "$NODE_CONTAINERD_SOCK" version
	ensure_images
	_start_node_bg "kubelet-node$NODE_INDEX" "$K8S_BIN/kubelet" \
		--config "$NODE_DIR/kubelet.yaml" --root-dir "$NODE_DIR/kubelet" \
		--kubeconfig "$STATE/kubelet-$NODE_NAME.kubeconfig" \
		--hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
		--node-labels "erop.local/node-index=$NODE_INDEX"
	_start_node_bg "kube-proxy-node$NODE_INDEX" "$K8S_BIN/kube-proxy" --config "$NODE_DIR/kube-proxy.yaml"
}

# Stop a node leaving nothing behind: containers and their shims, network namespaces,
# mounts under the node dir, kube-proxy's iptables rules, the cgroup root. A node beyond 0
# keeps its own network namespace, bridge and veth pair (remove_node_netns takes them).
stop_node() {
	stop_bg "kubelet-node$NODE_INDEX"
	stop_bg "kube-proxy-node$NODE_INDEX"
	if pid_of "containerd-node$NODE_INDEX" >/dev/null; then
		local ctr=(ctr --address "$NODE_CONTAINERD_SOCK" -n k8s.io) id
		for id in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
			"${ctr[@]}" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
		done
		for id in $("${ctr[@]}" tasks ls -q 2>/dev/null); do
			for _ in 1 2 3 4 5 6 7 8 9 10; do
				"${ctr[@]}" tasks delete "$id" >/dev/null 2>&1 && break
				sleep 0.3
			done
		done
	fi
	stop_bg "containerd-node$NODE_INDEX"
	# Shims outlive containerd by design; ours are the ones serving our containerd's namespace.
	local pid
	for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $NODE_CONTAINERD_SOCK" || true); do
		kill -KILL "$pid" 2>/dev/null || true
	done
	unmount_under "$NODE_DIR"
	# IP allocations of the pods that are gone; the next start begins with a free range.
	rm -rf "$NODE_DIR/cni/ipam"
	"${NODE_EXEC[@]}" "$K8S_BIN/kube-proxy" --cleanup --config "$NODE_DIR/kube-proxy.yaml" \
		>>"$LOGS/kube-proxy-node$NODE_INDEX.log" 2>&1 || true
	remove_kube_chains
	remove_cgroup_root
	# containerd 1.6 keeps shim sockets and fifos under /run/containerd whatever its state dir.
	rmdir /run/containerd/s /run/containerd/fifo /run/containerd/runc/k8s.io /run/containerd/runc \
		/run/containerd 2>/dev/null || true
}

# Unmount everything below a directory, deepest first (netns files, overlay rootfs, tmpfs).
unmount_under() {
	local dir="$1" mnt
	while read -r mnt; do
		umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	done < <(awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r)
}
