#!/usr/bin/env bash
# e2e.sh is `make e2e`: it starts the local cluster (hack/local-cluster.sh),
# builds the controller and gateway images FROM scratch and imports them,
# installs the Helm chart with those images, waits for it to be Ready, runs the
# e2e suite (test/e2e, -tags=e2e) and always takes the cluster down again.
#
# Environment: HELM (default bin/helm, installed when missing),
# TOOLHOOKS_E2E_KEEP=1 leaves the cluster up afterwards (take it down with
# hack/local-cluster.sh down), GO_TEST_FLAGS adds flags to go test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
HELM="${HELM:-${ROOT}/bin/helm}"
NAMESPACE=toolhooks-e2e
RELEASE=toolhooks
TAG=e2e
CONTROLLER_IMAGE=toolhooks/controller
GATEWAY_IMAGE=toolhooks/gateway
# The suite's agent: makes a call from inside a pod as the pod's ServiceAccount.
AGENT_IMAGE=toolhooks/e2e-agent
CLUSTER="${ROOT}/hack/local-cluster.sh"

log() { printf '[e2e %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

PHASES=()
phase_start=$SECONDS
all_start=$SECONDS
phase() { # name: ends the running phase and names the next
  if [[ -n "${current:-}" ]]; then PHASES+=("$(printf '%-28s %5ss' "${current}" $((SECONDS - phase_start)))"); fi
  current="$1"
  phase_start=$SECONDS
  [[ -n "$1" ]] && log "== $1"
  return 0
}

WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolhooks-e2e.XXXXXX")"
KUBECONFIG_FILE=""
diagnose() {
  [[ -n "${KUBECONFIG_FILE}" && -f "${KUBECONFIG_FILE}" ]] || return 0
  log "diagnostics: pods, events and logs of namespace ${NAMESPACE}"
  local k=("${BINS}/kubectl" --kubeconfig "${KUBECONFIG_FILE}")
  "${k[@]}" get nodes,pods -A -o wide >&2 || true
  "${k[@]}" get events -n "${NAMESPACE}" --sort-by=.lastTimestamp >&2 || true
  local p
  for p in $("${k[@]}" get pods -n "${NAMESPACE}" -o name 2>/dev/null); do
    log "--- logs of ${p}"
    "${k[@]}" logs -n "${NAMESPACE}" "$p" --all-containers --tail 40 >&2 || true
  done
}
finish() {
  local rc=$?
  set +e
  ((rc == 0)) || diagnose
  if [[ "${TOOLHOOKS_E2E_KEEP:-0}" == 1 ]]; then
    log "TOOLHOOKS_E2E_KEEP=1: leaving the cluster up (KUBECONFIG=${KUBECONFIG_FILE}); hack/local-cluster.sh down removes it"
  else
    phase "cluster down"
    "${CLUSTER}" down
  fi
  phase ""
  rm -rf "${WORK}"
  log "phase times:"
  printf '  %s\n' "${PHASES[@]}" >&2
  if ((rc == 0)); then log "e2e passed in $((SECONDS - all_start))s"; else log "e2e FAILED (exit ${rc}) after $((SECONDS - all_start))s"; fi
  exit $rc
}
trap finish EXIT
# A signal must not end in finish with $? == 0 and a "passed" line.
trap 'exit 130' INT
trap 'exit 143' TERM

phase "tools (helm, cluster binaries)"
if [[ ! -x "${HELM}" ]]; then
  log "installing helm ${HELM_VERSION} into $(dirname "${HELM}")"
  mkdir -p "$(dirname "${HELM}")"
  GOBIN="$(cd "$(dirname "${HELM}")" && pwd)" go install "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
  [[ "$(basename "${HELM}")" == helm ]] || mv "$(dirname "${HELM}")/helm" "${HELM}"
fi
BINS="$(hack/setup-cluster-bins.sh | tail -n1)"

phase "cluster up"
# A cluster left by an interrupted run would carry its release along: start clean.
"${CLUSTER}" down
"${CLUSTER}" up
KUBECONFIG_FILE="$("${CLUSTER}" kubeconfig)"
export KUBECONFIG="${KUBECONFIG_FILE}"

phase "images build and import"
export CGO_ENABLED=0
log "building the controller, gateway and e2e agent binaries (static, CGO_ENABLED=0: the first time this compiles their dependencies anew, minutes on 2 cores)"
go build -trimpath -ldflags '-s -w' -o "${WORK}/manager" ./cmd/main.go
go build -trimpath -ldflags '-s -w' -o "${WORK}/gateway" ./cmd/gateway
go build -trimpath -ldflags '-s -w' -o "${WORK}/agent" ./test/e2e/agent
log "testing the image packer (hack/imagetar)"
(cd hack/imagetar && GOWORK=off go test -count=1 .)
for img in "controller:manager:${CONTROLLER_IMAGE}" "gateway:gateway:${GATEWAY_IMAGE}" "agent:agent:${AGENT_IMAGE}"; do
  IFS=: read -r what bin ref <<<"$img"
  log "packing ${ref}:${TAG} (FROM scratch, /${bin} as entrypoint, user 65532)"
  (cd hack/imagetar && GOWORK=off go run . -binary "${WORK}/${bin}" -path "/${bin}" -tag "${ref}:${TAG}" -out "${WORK}/${what}.tar")
  "${CLUSTER}" import "${WORK}/${what}.tar"
done

phase "helm install"
VALUES=(
  --set "controller.image.repository=${CONTROLLER_IMAGE}" --set "controller.image.tag=${TAG}"
  --set controller.image.pullPolicy=Never
  --set "gateway.image.repository=${GATEWAY_IMAGE}" --set "gateway.image.tag=${TAG}"
  --set gateway.image.pullPolicy=Never
)
# Not --wait: a gateway no policy selects denies every call and is not ready,
# so readiness comes once the suite applies its policy.
log "helm install ${RELEASE} charts/toolhooks into ${NAMESPACE}"
"${HELM}" install "${RELEASE}" charts/toolhooks -n "${NAMESPACE}" --create-namespace "${VALUES[@]}" --timeout 5m

phase "e2e suite"
# shellcheck disable=SC2086 # GO_TEST_FLAGS is a list of flags
TOOLHOOKS_E2E_HELM="${HELM}" TOOLHOOKS_E2E_KUBECTL="${BINS}/kubectl" TOOLHOOKS_E2E_NAMESPACE="${NAMESPACE}" \
  TOOLHOOKS_E2E_RELEASE="${RELEASE}" TOOLHOOKS_E2E_CHART="${ROOT}/charts/toolhooks" TOOLHOOKS_E2E_VALUES="${VALUES[*]}" \
  TOOLHOOKS_E2E_AGENT_IMAGE="${AGENT_IMAGE}:${TAG}" \
  go test -tags e2e -count=1 -v -timeout 20m ${GO_TEST_FLAGS:-} ./test/e2e/
