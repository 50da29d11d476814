# etcd, kube-apiserver (with its 127.0.0.1 forwarder), controller-manager, scheduler (sourced).
# shellcheck shell=bash

start_etcd() {
	local dir
	dir="$("$REPO/hack/etcd-bin" "$ETCD_K8S_MINOR")" || die "hack/etcd-bin $ETCD_K8S_MINOR failed"
	local url="http://127.0.0.1:$ETCD_CLIENT_PORT" peer="http://127.0.0.1:$ETCD_PEER_PORT"
	start_bg etcd "$dir/etcd" --name k8s --data-dir "$STATE/etcd" \
		--listen-client-urls "$url" --advertise-client-urls "$url" \
		--listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
		--initial-cluster "k8s=$peer" --initial-cluster-token erop-local-k8s \
		--listen-metrics-urls "" --quota-backend-bytes 2147483648 --log-level warn
	wait_until 60 "etcd on $url" curl -fsS "$url/health"
}

start_apiserver() {
	start_bg kube-apiserver "$K8S_BIN/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
		--bind-address "$APISERVER_IP" --advertise-address "$APISERVER_IP" \
		--secure-port "$APISERVER_PORT" \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--client-ca-file "$PKI/ca.crt" \
		--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
		--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types InternalIP \
		--requestheader-client-ca-file "$PKI/front-proxy-ca.crt" \
		--requestheader-allowed-names front-proxy-client \
		--requestheader-username-headers X-Remote-User \
		--requestheader-group-headers X-Remote-Group \
		--requestheader-extra-headers-prefix X-Remote-Extra- \
		--proxy-client-cert-file "$PKI/front-proxy-client.crt" \
		--proxy-client-key-file "$PKI/front-proxy-client.key" \
		--service-account-issuer "https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
		--service-account-key-file "$PKI/sa.pub" \
		--service-account-signing-key-file "$PKI/sa.key" \
		--authorization-mode Node,RBAC \
		--enable-admission-plugins NodeRestriction \
		--allow-privileged=true \
		--profiling=false
	# The API server binds one address (the bridge gateway, so pods reach it through the
	# kubernetes Service); this forwarder gives the host the usual https://127.0.0.1:6443.
	start_bg apiserver-loopback socat "TCP-LISTEN:$APISERVER_PORT,bind=127.0.0.1,reuseaddr,fork" \
		"TCP:$APISERVER_IP:$APISERVER_PORT"
	wait_until 120 "kube-apiserver readiness" kubectl_admin get --raw /readyz
}

start_controllers() {
	start_bg kube-controller-manager "$K8S_BIN/kube-controller-manager" \
		--kubeconfig "$STATE/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
		--authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 \
		--service-account-private-key-file "$PKI/sa.key" \
		--root-ca-file "$PKI/ca.crt" \
		--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
		--use-service-account-credentials=true \
		--service-cluster-ip-range "$SERVICE_CIDR" \
		--leader-elect=false --profiling=false
	start_bg kube-scheduler "$K8S_BIN/kube-scheduler" \
		--kubeconfig "$STATE/scheduler.kubeconfig" \
		--authentication-kubeconfig "$STATE/scheduler.kubeconfig" \
		--authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false --profiling=false
}
