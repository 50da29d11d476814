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

# Everything that depends on the node index N (0 now; 1, 2 later, see docs/local-cluster.md).
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
}
node_vars 0
APISERVER_IP="$NODE_IP" # node 0's gateway; 127.0.0.1 is forwarded to it

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

start_bg() {
	local name="$1" pid
	shift
	if pid="$(pid_of "$name")"; then
		# Same command line: keep it. A changed one (new flags, new binary) means restart, so
		# every `up` converges on what the scripts say now.
		[[ "$(tr '\0' '\n' <"/proc/$pid/cmdline")" != "$(printf '%s\n' "$@")" ]] || return 0
		log "$name: command line changed, restarting"
		stop_bg "$name"
	fi
	mkdir -p "$RUN" "$LOGS"
	log "starting $name"
	# 9>&-: the daemon must not inherit hack/cluster's lock (see main in hack/cluster).
	setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 9>&- &
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
