# Helpers shared by hack/cluster and its parts (sourced, not run).
# shellcheck shell=bash
HERE="${HERE:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=hack/cluster.d/versions.sh
. "$HERE/versions.sh"

PKI="$STATE/pki"
LOGS="$STATE/logs"
RUN="$STATE/run"

log() { echo "cluster: $*" >&2; }
die() { echo "cluster: error: $*" >&2; exit 1; }

MAX_NODES=3 # what has been measured on this 2-core machine (docs/local-cluster.md)

# Everything that depends on the node index N (see docs/local-cluster.md, "Nodes").
node_vars() {
	local n="$1"
	NODE_INDEX="$n"
	NODE_NAME="erop-node$n"
	NODE_DIR="$STATE/node$n"
	NODE_POD_SUBNET="10.244.$n.0/24"
	NODE_IP="10.244.$n.1" # the bridge gateway: node address, API server address for node 0
	NODE_BRIDGE="cni-erop$n"
	NODE_CGROUP_ROOT="/kubepods-node$n"
	NODE_CONTAINERD_SOCK="$NODE_DIR/containerd/containerd.sock"
	NODE_KUBELET_HEALTHZ_PORT=$((10248 + 100 * n))
	NODE_PROXY_HEALTHZ_PORT=$((10256 + 100 * n))
	NODE_PROXY_METRICS_PORT=$((10249 + 100 * n))
	# Node 0 lives in the host's network namespace. Every other node has its own, so that its
	# kube-proxy owns its iptables rules, joined to the host by a veth pair: NODE_VETH on the
	# host, NODE_UPLINK inside. NODE_EXEC runs a command in the node's namespace (no mount
	# namespace of its own, unlike `ip netns exec`: kubelet and containerd must see each
	# other's mounts, and `down` must see them all).
	if ((n == 0)); then
		NODE_NETNS=""
		NODE_EXEC=()
	else
		NODE_NETNS="erop-node$n"
		NODE_EXEC=(nsenter "--net=/run/netns/$NODE_NETNS")
	fi
	NODE_VETH="erop-veth$n"
	NODE_UPLINK=erop-host
}
node_vars 0
# Node 0's gateway, also the host's address as the other nodes see it; 127.0.0.1 forwards to it.
APISERVER_IP="$NODE_IP"

# Indices of the nodes beyond 0 that have anything on this machine: a network namespace (a
# node exists from `up` creating it until `up` with fewer nodes or `down` removes it), or a pid
# file of a daemon whose namespace has gone.
extra_node_indices() {
	local f
	for f in /run/netns/erop-node* "$RUN"/*-node*.pid; do
		if [[ "$f" =~ -node([1-9][0-9]*)(\.pid)?$ ]]; then echo "${BASH_REMATCH[1]}"; fi
	done | sort -un
}

# Background processes: setsid, log file and pid file per name (PID 1 is no systemd).
# A zombie counts as gone: our daemons are reparented to a PID 1 that may reap late.
alive() {
	local stat
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
	stat="${stat##*) }"
	[[ "${stat:0:1}" != Z ]]
}

pid_of() {
	local f="$RUN/$1.pid" pid
	[[ -f "$f" ]] || return 1
	pid="$(cat "$f")"
	alive "$pid" || return 1
	echo "$pid"
}

# start_bg [--netns NS] NAME CMD...: NS is a network namespace under /run/netns to start in.
start_bg() {
	local netns="" enter=() pid
	if [[ "$1" == --netns ]]; then
		netns="$2"
		enter=(nsenter "--net=/run/netns/$netns")
		shift 2
	fi
	local name="$1"
	shift
	if pid="$(pid_of "$name")"; then
		# Same command line (nsenter execs, so it is not part of it) in the same namespace:
		# keep it. A changed one (new flags, new binary) or a namespace made anew means restart,
		# so every `up` converges on what the scripts say now.
		if [[ "$(tr '\0' '\n' <"/proc/$pid/cmdline")" != "$(printf '%s\n' "$@")" ]]; then
			log "$name: command line changed, restarting"
		elif [[ -n "$netns" && ! "/proc/$pid/ns/net" -ef "/run/netns/$netns" ]]; then
			log "$name: runs outside network namespace $netns, restarting"
		else
			return 0
		fi
		stop_bg "$name"
	fi
	mkdir -p "$RUN" "$LOGS"
	log "starting $name${netns:+ in network namespace $netns}"
	# 9>&-: the daemon must not inherit hack/cluster's lock (see main in hack/cluster).
	setsid "${enter[@]}" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 9>&- &
	echo $! >"$RUN/$name.pid"
}

stop_bg() {
	local name="$1" pid i
	if pid="$(pid_of "$name")"; then
		log "stopping $name ($pid)"
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 50); do
			alive "$pid" || break
			sleep 0.2
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$RUN/$name.pid"
}

# wait_until SECONDS DESCRIPTION CMD...: poll CMD every half second.
wait_until() {
	local timeout="$1" what="$2" deadline
	shift 2
	deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "timed out after ${timeout}s waiting for $what"
		sleep 0.5
	done
}

kubectl_admin() { "$K8S_BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig" "$@"; }
