#!/usr/bin/env bash
# e2e.sh is `make e2e`: it starts the local cluster (hack/local-cluster.sh),
# builds the controller and gateway images FROM scratch and imports them,
# starts a password-protected redis-server on the node IP for the gateways'
# shared state store, installs the Helm chart with those images and that
# store, runs the e2e suite (test/e2e, -tags=e2e) and always stops Redis and
# takes the cluster down again.
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
# The Secret (made here, not by the chart) holding the Redis password.
REDIS_SECRET=toolhooks-e2e-redis

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
REDIS_PID=""
# stop_redis stops the redis-server this script started (SIGTERM, then SIGKILL).
stop_redis() {
  [[ -n "${REDIS_PID}" ]] || return 0
  if kill -0 "${REDIS_PID}" 2>/dev/null; then
    log "stopping redis-server (pid ${REDIS_PID})"
    kill -TERM "${REDIS_PID}" 2>/dev/null || true
    local i
    for ((i = 0; i < 20; i++)); do kill -0 "${REDIS_PID}" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "${REDIS_PID}" 2>/dev/null || true
  fi
  wait "${REDIS_PID}" 2>/dev/null || true
  REDIS_PID=""
}
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
  if ((rc != 0)) && [[ -f "${WORK}/redis/redis.log" ]]; then
    log "last lines of the redis-server log:"
    tail -n 20 "${WORK}/redis/redis.log" >&2 || true
  fi
  stop_redis
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

phase "tools (helm, cluster binaries, redis-server)"
command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
  { log "redis-server and redis-cli are missing: run hack/test-deps.sh (Debian's redis-server)"; exit 1; }
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

phase "redis-server on the node IP"
# The gateways keep budgets and rate limits in this server (the chart's
# gateway.stateStore.redis), so they are exact across the replicas. It
# listens on the node IP, which the pods reach, and only with a password.
NODE_IP="$("${CLUSTER}" node-ip)"
REDIS_PASSWORD="$(openssl rand -hex 24)"
mkdir -p "${WORK}/redis"
REDIS_PORT=""
for p in $(seq 26379 26479); do
  if ! (exec 3<>"/dev/tcp/${NODE_IP}/${p}") 2>/dev/null; then REDIS_PORT=$p; break; fi
done
[[ -n "${REDIS_PORT}" ]] || { log "no free port for redis-server on ${NODE_IP} in 26379-26479"; exit 1; }
# The password goes in a file only this user reads, never on a command line.
(
  umask 077
  cat >"${WORK}/redis/redis.conf" <<EOF
bind ${NODE_IP}
port ${REDIS_PORT}
requirepass ${REDIS_PASSWORD}
dir ${WORK}/redis
save ""
appendonly yes
maxmemory-policy noeviction
daemonize no
EOF
)
log "starting redis-server on ${NODE_IP}:${REDIS_PORT} (password protected; data in ${WORK}/redis)"
redis-server "${WORK}/redis/redis.conf" >"${WORK}/redis/redis.log" 2>&1 </dev/null &
REDIS_PID=$!
redis_ping() { REDISCLI_AUTH="${REDIS_PASSWORD}" redis-cli -h "${NODE_IP}" -p "${REDIS_PORT}" ping 2>/dev/null | grep -qx PONG; }
for ((i = 0; i < 50; i++)); do
  redis_ping && break
  kill -0 "${REDIS_PID}" 2>/dev/null || { log "redis-server exited:"; cat "${WORK}/redis/redis.log" >&2; exit 1; }
  sleep 0.2
done
redis_ping || { log "redis-server on ${NODE_IP}:${REDIS_PORT} does not answer PING"; exit 1; }
if [[ "$(redis-cli -h "${NODE_IP}" -p "${REDIS_PORT}" ping 2>&1)" == PONG ]]; then
  log "redis-server answers without the password"
  exit 1
fi
log "redis-server (pid ${REDIS_PID}) answers PING with the password and refuses it without"
"${BINS}/kubectl" create namespace "${NAMESPACE}" >/dev/null
"${BINS}/kubectl" -n "${NAMESPACE}" create secret generic "${REDIS_SECRET}" \
  --from-file=password=<(printf '%s' "${REDIS_PASSWORD}") >/dev/null

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
  --set "gateway.stateStore.redis.address=${NODE_IP}:${REDIS_PORT}"
  --set "gateway.stateStore.redis.existingSecret=${REDIS_SECRET}"
  # Generous next to the 5ms default: this machine also runs the whole
  # cluster; a call not counted in time would be denied.
  --set gateway.stateStore.redis.timeout=250ms
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
  TOOLHOOKS_E2E_REDIS_ADDRESS="${NODE_IP}:${REDIS_PORT}" TOOLHOOKS_E2E_REDIS_SECRET="${REDIS_SECRET}" \
  go test -tags e2e -count=1 -v -timeout 20m ${GO_TEST_FLAGS:-} ./test/e2e/
