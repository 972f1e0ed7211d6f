#!/usr/bin/env bash
# setup-envtest.sh builds the envtest control-plane binaries (kube-apiserver,
# etcd, kubectl) from source through the Go module proxy, because prebuilt
# downloads are not reachable here. The result is cached outside the clone and
# reused; the last line printed on stdout is the KUBEBUILDER_ASSETS directory.
#
# Usage: hack/setup-envtest.sh [--update-lock]
#   --update-lock  rewrite the locked go.sum files under hack/envtest/ (maintainers only)
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/toolhooks/envtest"
ASSETS="${CACHE_ROOT}/${K8S_VERSION}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOCKS="${HERE}/envtest"
UPDATE_LOCK=0
[[ "${1:-}" == "--update-lock" ]] && UPDATE_LOCK=1

log() { printf '[setup-envtest %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# shellcheck source=hack/lib/k8s-source.sh
source "${HERE}/lib/k8s-source.sh"

have() {
  [[ -x "${ASSETS}/kube-apiserver" && -x "${ASSETS}/etcd" && -x "${ASSETS}/kubectl" ]]
}

if have && [[ $UPDATE_LOCK == 0 ]]; then
  log "cached binaries found in ${ASSETS}"
  echo "${ASSETS}"
  exit 0
fi

command -v go >/dev/null || { log "go is required (Go 1.26)"; exit 1; }
mkdir -p "${ASSETS}"
k8s_build_lock "${CACHE_ROOT}"
if have && [[ $UPDATE_LOCK == 0 ]]; then
  log "binaries built by another run found in ${ASSETS}"
  echo "${ASSETS}"
  exit 0
fi
WORK="$(mktemp -d "${CACHE_ROOT}/build.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0

build_kubernetes() {
  local mod="${WORK}/kubernetes"
  mkdir -p "${mod}"
  k8s_write_gomod "${mod}" toolhooks.dev/envtest-kubernetes "${K8S_VERSION}"
  cat >"${mod}/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  log "go mod tidy for kube-apiserver and kubectl (downloads a few hundred modules the first time)"
  k8s_tidy_locked "${mod}" "${LOCKS}/kubernetes.go.sum" "${UPDATE_LOCK}" hack/setup-envtest.sh
  local ldflags
  ldflags="$(k8s_ldflags "${K8S_VERSION}")"
  if [[ ! -x "${ASSETS}/kube-apiserver" || $UPDATE_LOCK == 1 ]]; then
    log "building kube-apiserver ${K8S_VERSION} (about 10 minutes on 2 cores the first time)"
    (cd "${mod}" && go build -trimpath -ldflags "${ldflags}" -o "${ASSETS}/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
    mv "${ASSETS}/kube-apiserver.tmp" "${ASSETS}/kube-apiserver"
    log "kube-apiserver done"
  fi
  if [[ ! -x "${ASSETS}/kubectl" || $UPDATE_LOCK == 1 ]]; then
    log "building kubectl ${K8S_VERSION} (about 1 minute)"
    (cd "${mod}" && go build -trimpath -ldflags "${ldflags}" -o "${ASSETS}/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl)
    mv "${ASSETS}/kubectl.tmp" "${ASSETS}/kubectl"
    log "kubectl done"
  fi
}

build_etcd() {
  local mod="${WORK}/etcd"
  mkdir -p "${mod}"
  cat >"${mod}/go.mod" <<GOMOD
module toolhooks.dev/envtest-etcd

go 1.26

require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}
GOMOD
  cat >"${mod}/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  log "go mod tidy for etcd ${ETCD_VERSION}"
  k8s_tidy_locked "${mod}" "${LOCKS}/etcd.go.sum" "${UPDATE_LOCK}" hack/setup-envtest.sh
  log "building etcd ${ETCD_VERSION} (about 1 minute)"
  (cd "${mod}" && go build -trimpath -ldflags "-s -w" -o "${ASSETS}/etcd.tmp" .)
  mv "${ASSETS}/etcd.tmp" "${ASSETS}/etcd"
  log "etcd done"
}

if [[ ! -x "${ASSETS}/etcd" || $UPDATE_LOCK == 1 ]]; then build_etcd; fi
if [[ ! -x "${ASSETS}/kube-apiserver" || ! -x "${ASSETS}/kubectl" || $UPDATE_LOCK == 1 ]]; then build_kubernetes; fi
have || { log "build finished but binaries are missing in ${ASSETS}"; exit 1; }
log "envtest binaries ready in ${ASSETS}"
echo "${ASSETS}"
