# Local images: built as docker-archive tarballs by hack/images/build_image.py, cached under
# $IMAGE_CACHE by version, and imported into each node's containerd (sourced). The functions
# without "nodes" in their name act on the node set by node_vars.
# shellcheck shell=bash
BUILD_IMAGE=(python3 "$REPO/hack/images/build_image.py")

_ctr() { ctr --address "$NODE_CONTAINERD_SOCK" -n k8s.io "$@"; }

# image_tar NAME: path of a cached tarball; building happens only when it is missing.
_pause_tar() {
	local tar="$IMAGE_CACHE/pause-3.10.1.tar" bin="$IMAGE_CACHE/pause-bin/pause"
	[[ -f "$tar" ]] && { echo "$tar"; return; }
	mkdir -p "${bin%/*}"
	gcc -static -Os -s -o "$bin" "$REPO/hack/images/pause.c"
	"${BUILD_IMAGE[@]}" --tag "$PAUSE_IMAGE" --out "$tar" --file "$bin:/pause:0755" \
		--entrypoint /pause --user 65535:65535
	echo "$tar"
}

_busybox_tar() {
	local version tar
	version="$(dpkg-query -W -f='${Version}' busybox-static | tr -c 'A-Za-z0-9.\n' _)"
	tar="$IMAGE_CACHE/busybox-$version.tar"
	[[ -f "$tar" ]] && { echo "$tar"; return; }
	local links=() applet
	for applet in $(/bin/busybox --list); do
		[[ "$applet" == busybox ]] || links+=(--symlink "/bin/$applet:busybox")
	done
	"${BUILD_IMAGE[@]}" --tag "$BUSYBOX_IMAGE" --out "$tar" --file /bin/busybox:/bin/busybox:0755 \
		"${links[@]}" --dir /tmp:1777 --dir /root:0700 --passwd --env PATH=/bin --cmd /bin/sh
	echo "$tar"
}

_coredns_tar() {
	local tar="$IMAGE_CACHE/coredns-$COREDNS_VERSION.tar"
	[[ -f "$tar" ]] && { echo "$tar"; return; }
	"${BUILD_IMAGE[@]}" --tag "$COREDNS_IMAGE" --out "$tar" \
		--file "$COREDNS_BIN/coredns:/coredns:0755" --dir /tmp:1777 --passwd \
		--entrypoint /coredns
	echo "$tar"
}

# The official etcd image layout: binaries in /usr/local/bin, data dirs, no shell.
_etcd_tar() {
	local version="$1" tar="$IMAGE_CACHE/etcd-v$1.tar" dir tool files=()
	[[ -f "$tar" ]] && { echo "$tar"; return; }
	dir="$("$REPO/hack/etcd-bin" "$version")"
	for tool in etcd etcdctl etcdutl; do
		[[ -x "$dir/$tool" ]] && files+=(--file "$dir/$tool:/usr/local/bin/$tool:0755")
	done
	"${BUILD_IMAGE[@]}" --tag "gcr.io/etcd-development/etcd:v$version" --out "$tar" "${files[@]}" \
		--dir /tmp:1777 --dir /var/etcd:0700 --dir /var/lib/etcd:0700 --passwd \
		--env PATH=/usr/local/bin:/usr/bin:/bin --cmd /usr/local/bin/etcd
	echo "$tar"
}

_import() {
	local tag="$1" tar="$2" digest by_digest
	# containerd stores names fully qualified: local/x:1 is docker.io/local/x:1.
	[[ "${tag%%/*}" == *.* || "${tag%%/*}" == *:* ]] || tag="docker.io/$tag"
	if [[ "$(_ctr images ls -q name=="$tag" 2>/dev/null)" != "$tag" ]]; then
		log "importing $tag"
		_ctr images import "$tar" >/dev/null
	fi
	# A pull from a registry also records the image under its digest (repo@sha256:...); a Pod
	# that names its image by digest (an EtcdCluster's spec.imageDigests) is found only so,
	# with no registry to ask.
	digest="$(_ctr images ls name=="$tag" | awk 'NR == 2 {print $3}')"
	by_digest="${tag%:*}@$digest"
	if [[ -n "$digest" && -z "$(_ctr images ls -q name=="$by_digest")" ]]; then
		_ctr images tag "$tag" "$by_digest" >/dev/null
		_ctr images label "$by_digest" io.cri-containerd.image=managed >/dev/null
	fi
}

ensure_images() {
	mkdir -p "$IMAGE_CACHE"
	_import "$PAUSE_IMAGE" "$(_pause_tar)"
	_import "$BUSYBOX_IMAGE" "$(_busybox_tar)"
	_import "$COREDNS_IMAGE" "$(_coredns_tar)"
}

# Separate from ensure_images: building the etcd versions may take minutes, and the cluster
# does not need them to come up.
ensure_etcd_images() {
	local v
	for v in $("$REPO/hack/etcd-bin" --supported); do
		_import "gcr.io/etcd-development/etcd:v$v" "$(_etcd_tar "$v")"
	done
}

# import_image TARBALL: for other tooling (e.g. the operator image); always re-imports. A
# content-key tag (REPO:key-*) replaces the older key tags of the same repository, so images of
# earlier builds do not pile up in the node's containerd.
import_image() {
	local out name repo old
	out="$(_ctr images import "$1")"
	echo "$out" >&2
	for name in $(echo "$out" | sed -n 's/^unpacking \([^ ]*:key-[^ ]*\) .*/\1/p'); do
		repo="${name%:key-*}"
		for old in $(_ctr images list -q | grep "^$repo:key-" | grep -vx "$name"); do
			_ctr images remove "$old" >/dev/null && echo "removed the older image tag $old" >&2
		done
	done
}

# for_running_nodes CMD ARGS...: CMD once per node whose containerd runs, with node_vars set.
# Each node has its own image store and a Pod may land on any node, so an image goes into
# all of them; a stopped node is named, since it comes back without the image.
for_running_nodes() {
	local n
	for n in 0 $(extra_node_indices); do
		node_vars "$n"
		if pid_of "containerd-node$n" >/dev/null; then
			"$@"
		else
			log "$NODE_NAME is stopped and does not get the image: import it again once it runs"
		fi
	done
	node_vars 0
}
