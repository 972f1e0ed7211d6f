#!/usr/bin/env bash
# setup-cluster-bins.sh builds the node and control-plane binaries that
# hack/local-cluster.sh needs beyond the envtest ones (kube-controller-manager,
# kube-scheduler, kubelet, kube-proxy) from source through the Go module proxy,
# as one multi-call binary (like the old hyperkube) that runs the component
# named by argv[0]: it shares every compiled package with the envtest
# kube-apiserver through the Go build cache and links once (measured here: one
# 122 MB binary linked in 49 s against four binaries of 357 MB at ~25-35 s
# each). The result is cached outside the clone; the last line on stdout is
# the binary directory, which holds a link per component and links to the
# envtest kube-apiserver, kubectl and etcd.
#
# Usage: hack/setup-cluster-bins.sh [--update-lock]
#   --update-lock  rewrite the locked go.sum under hack/cluster/ (maintainers only)
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/toolhooks/cluster"
BINS="${CACHE_ROOT}/${K8S_VERSION}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOCK="${HERE}/cluster/kubernetes.go.sum"
UPDATE_LOCK=0
[[ "${1:-}" == "--update-lock" ]] && UPDATE_LOCK=1
COMPONENTS=(kube-controller-manager kube-scheduler kubelet kube-proxy)

log() { printf '[setup-cluster-bins %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# shellcheck source=hack/lib/k8s-source.sh
source "${HERE}/lib/k8s-source.sh"

have() {
  local c
  for c in kube-node "${COMPONENTS[@]}" kube-apiserver kubectl etcd; do [[ -x "${BINS}/${c}" ]] || return 1; done
}

link_envtest() {
  local assets c
  assets="$("${HERE}/setup-envtest.sh" | tail -n1)"
  for c in kube-apiserver kubectl etcd; do ln -sfn "${assets}/${c}" "${BINS}/${c}"; done
}

if have && [[ $UPDATE_LOCK == 0 ]]; then
  log "cached binaries found in ${BINS}"
  echo "${BINS}"
  exit 0
fi

command -v go >/dev/null || { log "go is required (Go 1.26)"; exit 1; }
mkdir -p "${BINS}"
k8s_build_lock "${CACHE_ROOT}"
if have && [[ $UPDATE_LOCK == 0 ]]; then
  log "binaries built by another run found in ${BINS}"
  echo "${BINS}"
  exit 0
fi
link_envtest

if [[ ! -x "${BINS}/kube-node" || $UPDATE_LOCK == 1 ]]; then
  WORK="$(mktemp -d "${CACHE_ROOT}/build.XXXXXX")"
  trap 'rm -rf "${WORK}"' EXIT
  export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
  mod="${WORK}/kubernetes"
  mkdir -p "${mod}"
  k8s_write_gomod "${mod}" toolhooks.dev/cluster-kubernetes "${K8S_VERSION}"
  # The blank imports are those of the components' own main packages.
  cat >"${mod}/main.go" <<'GO'
// Command kube-node runs the Kubernetes component named by argv[0].
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
	_ "time/tzdata"
)

func main() {
	var cmd *cobra.Command
	switch filepath.Base(os.Args[0]) {
	case "kube-controller-manager":
		cmd = controllermanager.NewControllerManagerCommand()
	case "kube-scheduler":
		cmd = scheduler.NewSchedulerCommand()
	case "kubelet":
		cmd = kubelet.NewKubeletCommand(context.Background())
	case "kube-proxy":
		cmd = proxy.NewProxyCommand()
	default:
		fmt.Fprintf(os.Stderr, "kube-node: run me as kube-controller-manager, kube-scheduler, kubelet or kube-proxy, not %q\n", os.Args[0])
		os.Exit(2)
	}
	os.Exit(cli.Run(cmd))
}
GO
  log "go mod tidy for ${COMPONENTS[*]}"
  k8s_tidy_locked "${mod}" "${LOCK}" "${UPDATE_LOCK}" hack/setup-cluster-bins.sh
  ldflags="$(k8s_ldflags "${K8S_VERSION}")"
  log "building ${COMPONENTS[*]} ${K8S_VERSION} as one multi-call binary (about 10 CPU-minutes the first time; shares the kube-apiserver build cache)"
  (cd "${mod}" && go build -trimpath -ldflags "${ldflags}" -o "${BINS}/kube-node.tmp" .)
  mv "${BINS}/kube-node.tmp" "${BINS}/kube-node"
  log "built kube-node"
fi
for c in "${COMPONENTS[@]}"; do ln -sfn kube-node "${BINS}/${c}"; done
have || { log "build finished but binaries are missing in ${BINS}"; exit 1; }
log "cluster binaries ready in ${BINS}"
echo "${BINS}"
