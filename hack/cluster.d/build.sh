#!/usr/bin/env bash
# Builds the pinned Kubernetes components, kubectl and CoreDNS through the Go module proxy.
# Output: $CACHE/k8s/bin/<k8s-version>/ and $CACHE/k8s/coredns/<coredns-version>/, each marked
# complete by a .complete file so a second run (or a clean clone) builds nothing.
# Usage: build.sh            (prints the two bin directories, one per line, on stdout)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/cluster.d/versions.sh
. "$HERE/versions.sh"

log() { echo "build: $*" >&2; }

build_kubernetes() {
	local out="$K8S_BIN" work="$CACHE/k8s/build/$K8S_VERSION"
	if [[ -f "$out/.complete" ]]; then return 0; fi
	mkdir -p "$work" "$out"
	log "resolving k8s.io/kubernetes@$K8S_VERSION"
	local gomod
	gomod="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
		sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
	# Kubernetes points its staging modules (k8s.io/api, client-go, ...) at ./staging; outside its
	# tree each is published as v0.<minor>.<patch>, so the wrapper maps every one of them.
	local staging
	staging="$(sed -n 's|^\s*\(k8s.io/[a-z0-9-]*\) => \./staging/.*|\1|p' "$gomod")"
	{
		echo "module local/k8s-build"
		echo
		echo "go 1.24.0"
		echo
		echo "godebug default=go1.24"
		echo
		echo "require k8s.io/kubernetes $K8S_VERSION"
		echo
		echo "replace ("
		for m in $staging; do echo "	$m => $m $K8S_STAGING_VERSION"; done
		echo ")"
	} >"$work/go.mod"
	local pkg=k8s.io/component-base/version cgo=k8s.io/client-go/pkg/version ld="-s -w"
	local major="${K8S_VERSION#v}"; major="${major%%.*}"
	local minor="${K8S_VERSION#v*.}"; minor="${minor%%.*}"
	for p in $pkg $cgo; do
		ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor"
		ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$K8S_BUILD_DATE -X $p.gitCommit=module-proxy"
	done
	log "building ${K8S_COMPONENTS[*]} ($K8S_VERSION) into $out"
	local pkgs=()
	for c in "${K8S_COMPONENTS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
	(cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ld" -o "$out/" "${pkgs[@]}")
	"$out/kube-apiserver" --version >&2
	touch "$out/.complete"
}

build_coredns() {
	local out="$COREDNS_BIN"
	if [[ -f "$out/.complete" ]]; then return 0; fi
	mkdir -p "$out"
	log "building coredns $COREDNS_VERSION into $out"
	CGO_ENABLED=0 GOBIN="$out" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
	"$out/coredns" -version >&2
	touch "$out/.complete"
}

build_kubernetes
build_coredns
echo "$K8S_BIN"
echo "$COREDNS_BIN"
