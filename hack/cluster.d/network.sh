# Host network of the cluster: the node bridge, its address and a filter chain (sourced).
# shellcheck shell=bash
# The chain EROP-FILTER (hooked into INPUT and FORWARD) keeps pod and service addresses
# local: pods may talk only to pods, services and this host's gateway, and nothing from
# outside reaches an address of the cluster. No MASQUERADE to eth0 exists, so no pod has a way
# off the machine.
CHAIN=EROP-FILTER

ensure_bridge() {
	if ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
		log "creating bridge $NODE_BRIDGE ($NODE_IP/24)"
		ip link add "$NODE_BRIDGE" type bridge
	fi
	[[ "$(ip -4 -o addr show dev "$NODE_BRIDGE")" == *" $NODE_IP/24 "* ]] ||
		ip addr add "$NODE_IP/24" dev "$NODE_BRIDGE"
	ip link set "$NODE_BRIDGE" up
	# Service addresses go to the bridge (kube-proxy DNATs them there) and the rest of the
	# pod range is unreachable: without these, both would follow the default route off the host.
	ip route replace "$SERVICE_CIDR" dev "$NODE_BRIDGE" src "$NODE_IP"
	ip route replace unreachable "$POD_CIDR"
	sysctl -qw net.ipv4.ip_forward=1
	# Pod -> service -> pod on the same bridge passes through iptables only with
	# br_netfilter; without it kube-proxy masquerades all service traffic (see node.sh).
	[[ -d /proc/sys/net/bridge ]] || modprobe br_netfilter 2>/dev/null || true
	if [[ -d /proc/sys/net/bridge ]]; then
		sysctl -qw net.bridge.bridge-nf-call-iptables=1
	else
		log "no br_netfilter: kube-proxy will masquerade all service traffic"
	fi
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
remove_kube_chains() {
	local ipt table chain rule
	for ipt in iptables ip6tables; do
		for table in filter nat mangle; do
			while read -r rule; do
				[[ -n "$rule" ]] || continue
				eval "$ipt -w -t $table -D ${rule#-A }" || true
			done < <("$ipt" -w -t "$table" -S 2>/dev/null | grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j KUBE-' || true)
			for chain in $("$ipt" -w -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[A-Za-z0-9-]*\)$/\1/p'); do
				"$ipt" -w -t "$table" -F "$chain" 2>/dev/null || true
			done
			for chain in $("$ipt" -w -t "$table" -S 2>/dev/null | sed -n 's/^-N \(KUBE-[A-Za-z0-9-]*\)$/\1/p'); do
				"$ipt" -w -t "$table" -X "$chain" 2>/dev/null || true
			done
		done
	done
}
