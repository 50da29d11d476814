# Certificates, keys and kubeconfigs of the cluster, made once with openssl (sourced).
# shellcheck shell=bash

# cert NAME CN ORG [SAN...]: a key and a certificate signed by $SIGNER (default: the cluster
# CA), client and server usage.
_cert() {
	local name="$1" cn="$2" org="$3" san signer="${SIGNER:-ca}"
	shift 3
	[[ -f "$PKI/$name.crt" ]] && return 0
	san=""
	(($# == 0)) || san="$(printf '%s,' "$@")"
	local out
	out="$(openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$PKI/$name.key" -subj "/CN=$cn${org:+/O=$org}" -out "$PKI/$name.csr" 2>&1 &&
		openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$signer.crt" -CAkey "$PKI/$signer.key" \
			-CAcreateserial -days 3650 -sha256 -out "$PKI/$name.crt" -extfile <(
				echo "basicConstraints=critical,CA:FALSE"
				echo "keyUsage=critical,digitalSignature,keyEncipherment"
				echo "extendedKeyUsage=serverAuth,clientAuth"
				[[ -z "$san" ]] || echo "subjectAltName=${san%,}"
			) 2>&1)" || die "openssl failed for $name: $out"
	rm -f "$PKI/$name.csr"
}

# kubeconfig NAME CERT: a kubeconfig for a client certificate, server at 127.0.0.1.
_kubeconfig() {
	local name="$1" cert="$2" server="${3:-https://127.0.0.1:$APISERVER_PORT}"
	cat >"$STATE/$name.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: erop-local
  cluster:
    certificate-authority: $PKI/ca.crt
    server: $server
users:
- name: $name
  user:
    client-certificate: $PKI/$cert.crt
    client-key: $PKI/$cert.key
contexts:
- name: erop-local
  context: {cluster: erop-local, user: $name}
current-context: erop-local
KC
	chmod 600 "$STATE/$name.kubeconfig"
}

_ca() {
	local name="$1" cn="$2"
	[[ -f "$PKI/$name.crt" ]] && return 0
	log "creating $cn in $PKI"
	openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$PKI/$name.key" -subj "/CN=$cn" -days 3650 -sha256 \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
		-out "$PKI/$name.crt" 2>/dev/null
}

ensure_pki() {
	mkdir -p "$PKI"
	chmod 700 "$PKI"
	_ca ca erop-local-ca
	# The aggregation layer's own CA: components read it from the
	# extension-apiserver-authentication ConfigMap (and log errors every few seconds without it).
	_ca front-proxy-ca erop-local-front-proxy-ca
	[[ -f "$PKI/sa.key" ]] || {
		openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
		openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	}
	_cert apiserver kube-apiserver "" IP:127.0.0.1 "IP:$APISERVER_IP" "IP:$KUBERNETES_SVC_IP" \
		DNS:localhost DNS:kubernetes DNS:kubernetes.default DNS:kubernetes.default.svc \
		"DNS:kubernetes.default.svc.$CLUSTER_DOMAIN"
	_cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
	_cert admin kubernetes-admin system:masters
	_cert controller-manager system:kube-controller-manager ""
	_cert scheduler system:kube-scheduler ""
	_cert kube-proxy system:kube-proxy ""
	_cert provisioner erop-hostdir-provisioner ""
	SIGNER=front-proxy-ca _cert front-proxy-client front-proxy-client ""
	_kubeconfig admin admin
	local direct="https://$APISERVER_IP:$APISERVER_PORT"
	_kubeconfig controller-manager controller-manager "$direct"
	_kubeconfig scheduler scheduler "$direct"
	_kubeconfig kube-proxy kube-proxy "$direct"
	_kubeconfig provisioner provisioner
}

ensure_node_pki() {
	_cert "kubelet-$NODE_NAME" "system:node:$NODE_NAME" system:nodes
	_kubeconfig "kubelet-$NODE_NAME" "kubelet-$NODE_NAME" "https://$APISERVER_IP:$APISERVER_PORT"
}
