# Network of the cluster (sourced): each node's bridge (node 0's on the host, the others' in
# their own network namespaces, joined to the host by veth pairs) and the host's filter chain.
# shellcheck shell=bash
# The chain EROP-FILTER (hooked into INPUT and FORWARD) keeps pod and service addresses
# local: pods may talk only to pods, services and this host's gateway, and nothing from
# outside reaches an address of the cluster. No MASQUERADE to eth0 exists, so no pod has a way
# off the machine.
CHAIN=EROP-FILTER

# The node's bridge and its address, in the node's network namespace.
ensure_bridge() {
	if ! "${NODE_EXEC[@]}" ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
		log "creating bridge $NODE_BRIDGE ($NODE_IP/24)${NODE_NETNS:+ in network namespace $NODE_NETNS}"
		"${NODE_EXEC[@]}" ip link add "$NODE_BRIDGE" type bridge
	fi
	[[ "$("${NODE_EXEC[@]}" ip -4 -o addr show dev "$NODE_BRIDGE")" == *" $NODE_IP/24 "* ]] ||
		"${NODE_EXEC[@]}" ip addr add "$NODE_IP/24" dev "$NODE_BRIDGE"
	"${NODE_EXEC[@]}" ip link set "$NODE_BRIDGE" up
	# Service addresses go to the bridge (kube-proxy DNATs them there): without this route they
	# would follow the default route off the host (or, in a node's namespace, nowhere).
	"${NODE_EXEC[@]}" ip route replace "$SERVICE_CIDR" dev "$NODE_BRIDGE" src "$NODE_IP"
	# On the host the rest of the pod range is unreachable, so it never follows the default
	# route; each other node's range has a more specific route to its veth (ensure_node_routes).
	[[ -n "$NODE_NETNS" ]] || ip route replace unreachable "$POD_CIDR"
	"${NODE_EXEC[@]}" sysctl -qw net.ipv4.ip_forward=1
	# Pod -> service -> pod on the same bridge passes through iptables only with
	# br_netfilter; without it kube-proxy masquerades all service traffic (see node.sh).
	[[ -d /proc/sys/net/bridge ]] || modprobe br_netfilter 2>/dev/null || true
	if [[ -d /proc/sys/net/bridge ]]; then
		"${NODE_EXEC[@]}" sysctl -qw net.bridge.bridge-nf-call-iptables=1
	else
		log "no br_netfilter: kube-proxy will masquerade all service traffic"
	fi
}

# A node beyond 0: its network namespace and the veth pair joining it to the host. A veth
# whose other end is not in the namespace (made anew while old daemons held the previous one)
# is replaced.
ensure_node_netns() {
	if [[ ! -e "/run/netns/$NODE_NETNS" ]]; then
		log "creating network namespace $NODE_NETNS"
		ip netns add "$NODE_NETNS"
	fi
	"${NODE_EXEC[@]}" ip link set lo up
	if ! "${NODE_EXEC[@]}" ip link show "$NODE_UPLINK" >/dev/null 2>&1; then
		ip link del "$NODE_VETH" 2>/dev/null || true
		log "creating veth pair $NODE_VETH (host) - $NODE_UPLINK ($NODE_NETNS)"
		ip link add "$NODE_VETH" type veth peer name "$NODE_UPLINK" netns "$NODE_NETNS"
	fi
	ip link set "$NODE_VETH" up
	"${NODE_EXEC[@]}" ip link set "$NODE_UPLINK" up
}

# Routes both ways over the veth pair, which has no IPv4 address of its own: the host sends
# the node's pod range to the node's address, the node sends the rest of the pod range (node 0
# and the other nodes, all through the host) to the host's. Sources are the two gateway
# addresses, inside the pod range, so the host's EROP-FILTER treats node traffic as pod
# traffic; the namespace has no default route, so nothing in it reaches past the cluster's
# ranges even before a filter looks at it.
ensure_node_routes() {
	ip route replace "$NODE_POD_SUBNET" via "$NODE_IP" dev "$NODE_VETH" onlink src "$APISERVER_IP"
	"${NODE_EXEC[@]}" ip route replace "$POD_CIDR" via "$APISERVER_IP" dev "$NODE_UPLINK" onlink \
		src "$NODE_IP"
}

# Everything of the node's network that start_node expects, for the node set by node_vars.
ensure_node_network() {
	if [[ -z "$NODE_NETNS" ]]; then
		ensure_bridge
	else
		ensure_node_netns
		ensure_bridge
		ensure_node_routes
	fi
}

# A node beyond 0, after stop_node: its bridge, veth pair and routes go with the namespace.
remove_node_netns() {
	[[ -e "/run/netns/$NODE_NETNS" ]] || return 0
	log "deleting network namespace $NODE_NETNS"
	ip netns del "$NODE_NETNS"
}

# `ip netns add` turned /run/netns into a mount point (bound onto itself); once no namespace is
# left in it, that goes too.
release_netns_dir() {
	[[ -d /run/netns && -z "$(ls -A /run/netns)" ]] || return 0
	if mountpoint -q /run/netns; then umount /run/netns; fi
	rmdir /run/netns
}

_filter_rules() {
	# Traffic that stays among the cluster's own addresses or the loopback passes.
	echo "-i lo -j RETURN"
	# Replies to connections the host opened (e.g. to a Service, masqueraded by kube-proxy).
	echo "-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"
	echo "-s $POD_CIDR -d $POD_CIDR -j RETURN"
	echo "-s $POD_CIDR -d $SERVICE_CIDR -j RETURN"
	# A pod reaching anything else (the host's eth0 network, the internet): dropped.
	echo "-s $POD_CIDR -j DROP"
	# Cluster addresses are not reachable from any other interface.
	echo "-d $POD_CIDR -j DROP"
	echo "-d $SERVICE_CIDR -j DROP"
}

# Rebuilt only when it differs, so a second `up` never opens a window without the rules.
ensure_filter() {
	local want have rule
	want="$(_filter_rules | sed "s/^/-A $CHAIN /")"
	have="$(iptables -w -S "$CHAIN" 2>/dev/null | grep '^-A' || true)"
	if [[ "$want" != "$have" ]]; then
		iptables -w -N "$CHAIN" 2>/dev/null || iptables -w -F "$CHAIN"
		while read -r rule; do
			# shellcheck disable=SC2086 # a rule is a list of words
			iptables -w -A "$CHAIN" $rule
		done < <(_filter_rules)
	fi
	# First in each hook: kube-proxy inserts its jumps at the top when it starts, and its
	# KUBE-FORWARD accepts some pod traffic before a later rule would see it.
	local hook
	for hook in INPUT FORWARD; do
		[[ "$(iptables -w -S "$hook" 2>/dev/null | grep -m1 '^-A')" == "-A $hook -j $CHAIN" ]] && continue
		while iptables -w -C "$hook" -j "$CHAIN" 2>/dev/null; do iptables -w -D "$hook" -j "$CHAIN"; done
		iptables -w -I "$hook" 1 -j "$CHAIN"
	done
}

remove_network() {
	local hook
	for hook in INPUT FORWARD; do
		while iptables -w -C "$hook" -j "$CHAIN" 2>/dev/null; do iptables -w -D "$hook" -j "$CHAIN"; done
	done
	if iptables -w -n -L "$CHAIN" >/dev/null 2>&1; then
		iptables -w -F "$CHAIN"
		iptables -w -X "$CHAIN"
	fi
	ip route del unreachable "$POD_CIDR" 2>/dev/null || true
	if ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
		log "deleting bridge $NODE_BRIDGE"
		ip link del "$NODE_BRIDGE"
	fi
}

# kubelet and kube-proxy leave chains behind (KUBE-FIREWALL, the KUBE-KUBELET-CANARY and
# KUBE-IPTABLES-HINT markers) even after `kube-proxy --cleanup`; only they create KUBE-*.
# Acts in the namespace of the node set by node_vars.
remove_kube_chains() {
	local ipt table chain rule
	for ipt in iptables ip6tables; do
		for table in filter nat mangle; do
			while read -r rule; do
				[[ -n "$rule" ]] || continue
				eval "\"\${NODE_EXEC[@]}\" $ipt -w -t $table -D ${rule#-A }" || true
			done < <("${NODE_EXEC[@]}" "$ipt" -w -t "$table" -S 2>/dev/null | grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j KUBE-' || true)
			for chain in $("${NODE_EXEC[@]}" "$ipt" -w -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[A-Za-z0-9-]*\)$/\1/p'); do
				"${NODE_EXEC[@]}" "$ipt" -w -t "$table" -F "$chain" 2>/dev/null || true
			done
			for chain in $("${NODE_EXEC[@]}" "$ipt" -w -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[A-Za-z0-9-]*\)$/\1/p'); do
				"${NODE_EXEC[@]}" "$ipt" -w -t "$table" -X "$chain" 2>/dev/null || true
			done
		done
	done
}
