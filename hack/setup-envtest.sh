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
STAGING_VERSION="v0.${K8S_VERSION#v1.}"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/toolhooks/envtest"
ASSETS="${CACHE_ROOT}/${K8S_VERSION}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOCKS="${HERE}/envtest"
UPDATE_LOCK=0
[[ "${1:-}" == "--update-lock" ]] && UPDATE_LOCK=1

log() { printf '[setup-envtest %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

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
WORK="$(mktemp -d "${CACHE_ROOT}/build.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0

# lock_or_check copies the locked go.sum into a throwaway module before tidy,
# then fails if tidy had to add a checksum the lock does not hold.
lock_prepare() { # dir lockname
  if [[ -f "${LOCKS}/$2" && $UPDATE_LOCK == 0 ]]; then cp "${LOCKS}/$2" "$1/go.sum"; fi
}
lock_check() { # dir lockname
  if [[ $UPDATE_LOCK == 1 || ! -f "${LOCKS}/$2" ]]; then
    cp "$1/go.sum" "${LOCKS}/$2"
    log "wrote lock ${LOCKS}/$2"
    return
  fi
  if ! diff -q <(sort -u "$1/go.sum") <(sort -u "${LOCKS}/$2") >/dev/null; then
    log "go.sum of the $2 build differs from the lock hack/envtest/$2;"
    log "run hack/setup-envtest.sh --update-lock if the versions changed on purpose"
    diff <(sort -u "${LOCKS}/$2") <(sort -u "$1/go.sum") >&2 || true
    exit 1
  fi
}

build_kubernetes() {
  local mod="${WORK}/kubernetes"
  mkdir -p "${mod}"
  log "resolving k8s.io/kubernetes@${K8S_VERSION} from the module proxy"
  local gomod
  gomod="$(cd "${mod}" && go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [[ -f "${gomod}" ]] || { log "could not download the go.mod of k8s.io/kubernetes@${K8S_VERSION}"; exit 1; }
  # Every staging module named in the replace block of kubernetes' own go.mod
  # (k8s.io/foo => ./staging/src/k8s.io/foo) is pinned to the published tag.
  local staging
  staging="$(awk '/^replace \(/{r=1;next} r&&/^\)/{r=0} r&&/=> \.\/staging\/src\//{print $1}' "${gomod}" | sort -u)"
  [[ -n "${staging}" ]] || { log "no staging modules found in ${gomod}"; exit 1; }
  log "pinning $(wc -l <<<"${staging}") staging modules to ${STAGING_VERSION}"
  {
    echo "module toolhooks.dev/envtest-kubernetes"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes ${K8S_VERSION}"
    echo
    echo "replace ("
    while read -r m; do echo "	${m} => ${m} ${STAGING_VERSION}"; done <<<"${staging}"
    echo ")"
  } >"${mod}/go.mod"
  cat >"${mod}/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  lock_prepare "${mod}" kubernetes.go.sum
  log "go mod tidy for kube-apiserver and kubectl (downloads a few hundred modules the first time)"
  (cd "${mod}" && go mod tidy)
  lock_check "${mod}" kubernetes.go.sum
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION}"
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
  lock_prepare "${mod}" etcd.go.sum
  log "go mod tidy for etcd ${ETCD_VERSION}"
  (cd "${mod}" && go mod tidy)
  lock_check "${mod}" etcd.go.sum
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
