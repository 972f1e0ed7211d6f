#!/usr/bin/env bash
# local-cluster.sh runs a real single-node Kubernetes cluster on this machine,
# built only from the Go module proxy (hack/setup-cluster-bins.sh) and Debian's
# containerd, runc and containernetworking-plugins (installed when missing).
# It needs root and a cgroup v1 or v2 host; docker and kind are not needed.
#
# Everything it makes lives in one state directory ($TOOLHOOKS_CLUSTER_DIR,
# default /var/lib/toolhooks-cluster): certificates, kubeconfigs, etcd data,
# containerd root and state, kubelet root, pod logs, CNI config and IPAM data,
# netns mounts, process ids and logs. On the host it adds only a dummy
# interface holding the node IP (a port-less bridge where the kernel has no
# dummy driver) and a route of the service range to it, the CNI bridge, the
# KUBE-* iptables chains of kubelet and kube-proxy, a TOOLHOOKS-E2E chain
# that keeps pod traffic on this machine, kubepods cgroups, and
# net.ipv4.ip_forward=1 (the CNI bridge gateway needs it). `down` removes all of that and restores
# ip_forward; it is idempotent and also cleans up after a failed `up`.
#
# Usage: hack/local-cluster.sh up|down|status|check|kubeconfig|node-ip|import TAR
#   up          start the cluster (builds binaries once) and wait for the node to be Ready
#   down        stop everything and remove what `up` made
#   status      show the processes and the node
#   check       tell whether this machine can run the cluster (root, cgroups, packages)
#   kubeconfig  print the admin kubeconfig path
#   node-ip     print the node IP: an address of this machine the pods reach
#   import TAR  import an image archive into the node's containerd (k8s.io namespace)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/.." && pwd)"
STATE="${TOOLHOOKS_CLUSTER_DIR:-/var/lib/toolhooks-cluster}"
NODE="${TOOLHOOKS_CLUSTER_NODE:-toolhooks-e2e}"
# Addresses exist only on this machine: the node IP on a dummy interface, the
# pod range on the CNI bridge, the service range as kube-proxy NAT rules.
NODE_IF=thk0
NODE_IP=10.231.0.1
BRIDGE=thkbr0
POD_CIDR=10.232.0.0/24
SERVICE_CIDR=10.233.0.0/24
SERVICE_IP=10.233.0.1
API_PORT=16443
ETCD_PORT=23790
PAUSE_IMAGE=docker.io/toolhooks/pause:local
CNI_BIN=/usr/lib/cni
SOCK="${STATE}/containerd/containerd.sock"
KUBECONFIG_ADMIN="${STATE}/kubeconfig"
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy)

log() { printf '[local-cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need_root() { [[ $(id -u) == 0 ]] || die "must run as root (it starts containerd and kubelet)"; }

pid_of() { [[ -f "${STATE}/pids/$1" ]] && cat "${STATE}/pids/$1"; }
alive() { local p; p="$(pid_of "$1")" && [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null; }

# start NAME BINARY ARGS... runs one component in its own session, logging
# to logs/NAME.log, and records its pid.
start() {
  local name="$1"; shift
  if alive "$name"; then log "${name} already running (pid $(pid_of "$name"))"; return; fi
  log "starting ${name}"
  setsid "$@" >"${STATE}/logs/${name}.log" 2>&1 </dev/null &
  echo $! >"${STATE}/pids/${name}"
}

# stop NAME: SIGTERM, up to 20 s, then SIGKILL.
stop() {
  local name="$1" p i
  p="$(pid_of "$name" || true)"
  if [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null; then
    log "stopping ${name} (pid ${p})"
    kill -TERM "$p" 2>/dev/null || true
    for ((i = 0; i < 40; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$p" 2>/dev/null && { log "${name} did not stop, killing it"; kill -KILL "$p" 2>/dev/null || true; }
  fi
  rm -f "${STATE}/pids/${name}"
}

# wait_for WHAT SECONDS COMMAND...: polls COMMAND every second, printing
# progress every 10 s; on timeout shows the tail of the component's log.
wait_for() {
  local what="$1" secs="$2" i; shift 2
  for ((i = 1; i <= secs; i++)); do
    if "$@" >/dev/null 2>&1; then log "${what}: ready after ${i}s"; return 0; fi
    ((i % 10 == 0)) && log "${what}: waiting (${i}s/${secs}s)"
    sleep 1
  done
  log "${what}: not ready after ${secs}s"
  return 1
}

fail_with_log() { # component
  log "last lines of ${STATE}/logs/$1.log:"
  tail -n 30 "${STATE}/logs/$1.log" >&2 || true
  die "$1 did not become ready; run '$0 down' to clean up"
}

kubectl_() { "${BINS}/kubectl" --kubeconfig "${KUBECONFIG_ADMIN}" "$@"; }

ensure_packages() {
  local pkgs=()
  command -v containerd >/dev/null || pkgs+=(containerd)
  command -v runc >/dev/null || pkgs+=(runc)
  [[ -x "${CNI_BIN}/bridge" && -x "${CNI_BIN}/host-local" ]] || pkgs+=(containernetworking-plugins)
  command -v iptables >/dev/null || pkgs+=(iptables)
  command -v conntrack >/dev/null || pkgs+=(conntrack)
  command -v openssl >/dev/null || pkgs+=(openssl)
  command -v ip >/dev/null || pkgs+=(iproute2)
  ((${#pkgs[@]})) || return 0
  command -v apt-get >/dev/null || die "missing ${pkgs[*]} and no apt-get to install them"
  log "installing Debian packages: ${pkgs[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
}

# ---------------------------------------------------------------- certificates

# cert NAME CN [O] [SANS]: a key and a certificate signed by the cluster CA.
cert() {
  local name="$1" cn="$2" org="${3:-}" sans="${4:-}" subj="/CN=$2" ext="${STATE}/pki/$1.ext"
  [[ -n "$org" ]] && subj="/O=${org}/CN=${cn}"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [[ -n "$sans" ]]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=${sans}"
    else echo "extendedKeyUsage=clientAuth"; fi
  } >"$ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "${STATE}/pki/${name}.key" -subj "$subj" \
    -out "${STATE}/pki/${name}.csr" 2>/dev/null
  openssl x509 -req -in "${STATE}/pki/${name}.csr" -CA "${STATE}/pki/ca.crt" -CAkey "${STATE}/pki/ca.key" \
    -CAcreateserial -days 30 -extfile "$ext" -out "${STATE}/pki/${name}.crt" 2>/dev/null
}

# kubeconfig NAME CERT: a kubeconfig for the client certificate CERT.
kubeconfig() {
  cat >"${STATE}/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    certificate-authority: ${STATE}/pki/ca.crt
    server: https://${NODE_IP}:${API_PORT}
users:
- name: $2
  user:
    client-certificate: ${STATE}/pki/$2.crt
    client-key: ${STATE}/pki/$2.key
contexts:
- name: local
  context: {cluster: local, user: $2}
current-context: local
EOF
}

make_pki() {
  [[ -f "${STATE}/pki/done" ]] && return
  log "creating certificates with openssl"
  mkdir -p "${STATE}/pki"
  openssl req -x509 -new -newkey rsa:2048 -nodes -days 30 -subj "/CN=toolhooks-e2e-ca" \
    -keyout "${STATE}/pki/ca.key" -out "${STATE}/pki/ca.crt" 2>/dev/null
  cert apiserver kube-apiserver "" \
    "IP:${NODE_IP},IP:${SERVICE_IP},IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin kubernetes-admin system:masters
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert kubelet "system:node:${NODE}" system:nodes
  cert kube-proxy system:kube-proxy
  openssl genrsa -out "${STATE}/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "${STATE}/pki/sa.key" -pubout -out "${STATE}/pki/sa.pub" 2>/dev/null
  kubeconfig admin admin
  cp "${STATE}/admin.kubeconfig" "${KUBECONFIG_ADMIN}"
  kubeconfig controller-manager controller-manager
  kubeconfig scheduler scheduler
  kubeconfig kubelet kubelet
  kubeconfig kube-proxy kube-proxy
  touch "${STATE}/pki/done"
}

# ---------------------------------------------------------------- configs

write_configs() {
  mkdir -p "${STATE}/cni/net.d" "${STATE}/cni/ipam" "${STATE}/kubelet" "${STATE}/pod-logs" "${STATE}/containerd"
  cat >"${STATE}/containerd/config.toml" <<EOF
version = 2
root = "${STATE}/containerd/root"
state = "${STATE}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "${SOCK}"
[ttrpc]
  address = "${SOCK}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "${STATE}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # root without CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below ours.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "${STATE}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN}"
    conf_dir = "${STATE}/cni/net.d"
EOF
  cat >"${STATE}/cni/net.d/10-toolhooks.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "toolhooks-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "${BRIDGE}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "${POD_CIDR}"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "${STATE}/cni/ipam"
      }
    }
  ]
}
EOF
  : >"${STATE}/resolv.conf"
  cat >"${STATE}/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${NODE_IP}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${STATE}/pki/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://${SOCK}
podLogsDir: ${STATE}/pod-logs
resolvConf: ${STATE}/resolv.conf
clusterDomain: cluster.local
# Imported images cannot be pulled again: never garbage-collect them and
# never evict for the disk this shared machine uses.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
EOF
  cat >"${STATE}/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: ${STATE}/kube-proxy.kubeconfig}
hostnameOverride: ${NODE}
mode: iptables
clusterCIDR: ${POD_CIDR}
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["${NODE_IP}/32"]
iptables: {localhostNodePorts: false}
# 0 leaves the host's conntrack sysctls as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# ---------------------------------------------------------------- up

preflight() {
  need_root
  [[ -d /sys/fs/cgroup ]] || die "no /sys/fs/cgroup"
  local t
  if [[ ! -d "${STATE}" ]] && [[ -n "$(cat /sys/fs/cgroup/*/kubepods/cgroup.procs /sys/fs/cgroup/kubepods/cgroup.procs 2>/dev/null)" ]]; then
    die "processes run in kubepods cgroups but ${STATE} does not exist: another kubelet runs here; refusing to start"
  fi
  for t in filter nat mangle; do
    if [[ ! -f "${STATE}/host/iptables" ]] && iptables -w -t "$t" -S 2>/dev/null | grep -q -- '^-N KUBE-'; then
      die "the host already has KUBE-* iptables chains in table ${t}: another Kubernetes runs here; refusing to start"
    fi
  done
}

net_up() {
  mkdir -p "${STATE}/host"
  [[ -f "${STATE}/host/ip_forward" ]] || cat /proc/sys/net/ipv4/ip_forward >"${STATE}/host/ip_forward"
  # containerd's shims always put their sockets in /run/containerd/s.
  [[ -e /run/containerd || -f "${STATE}/host/run-containerd" ]] || touch "${STATE}/host/run-containerd"
  touch "${STATE}/host/iptables"
  if ! ip link show "${NODE_IF}" >/dev/null 2>&1; then
    log "creating interface ${NODE_IF} for the node IP ${NODE_IP}"
    # Kernels built without the dummy driver ("Unknown device type") get a
    # port-less bridge instead: it holds a local address just the same.
    ip link add "${NODE_IF}" type dummy 2>/dev/null || ip link add "${NODE_IF}" type bridge
  fi
  ip addr replace "${NODE_IP}/32" dev "${NODE_IF}"
  ip link set "${NODE_IF}" up
  # Service IPs without a kube-proxy rule die on the port-less interface
  # instead of following the default route off the machine.
  ip route replace "${SERVICE_CIDR}" dev "${NODE_IF}"
  # Pods may talk to each other and to this host, never beyond it.
  iptables -w -N TOOLHOOKS-E2E 2>/dev/null || iptables -w -F TOOLHOOKS-E2E
  iptables -w -A TOOLHOOKS-E2E -i "${BRIDGE}" ! -o "${BRIDGE}" -j DROP
  iptables -w -C FORWARD -j TOOLHOOKS-E2E 2>/dev/null || iptables -w -I FORWARD -j TOOLHOOKS-E2E
}

build_pause() {
  [[ -f "${STATE}/images/pause.tar" ]] && return
  mkdir -p "${STATE}/images"
  log "building the pause image (static Go binary, FROM scratch)"
  (cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "${STATE}/images/pause" ./hack/pause)
  image_tar "${STATE}/images/pause" /pause "${PAUSE_IMAGE#docker.io/}" "${STATE}/images/pause.tar" ""
}

# image_tar BINARY PATH TAG OUT [USER]: packs BINARY into a one-layer image.
image_tar() {
  (cd "${ROOT}/hack/imagetar" && GOWORK=off go run . -binary "$1" -path "$2" -tag "$3" -out "$4" -user "${5-65532:65532}")
}

import_image() { # tar
  "$(command -v ctr)" -a "${SOCK}" -n k8s.io images import "$1" >/dev/null
}

up() {
  preflight
  if alive kubelet && alive kube-apiserver; then
    log "cluster already up; KUBECONFIG=${KUBECONFIG_ADMIN}"
    return
  fi
  local t0=$SECONDS
  ensure_packages
  BINS="$("${HERE}/setup-cluster-bins.sh" | tail -n1)"
  mkdir -p "${STATE}/logs" "${STATE}/pids"
  echo "${BINS}" >"${STATE}/bins"
  net_up
  make_pki
  write_configs

  start etcd "${BINS}/etcd" --name "${NODE}" --data-dir "${STATE}/etcd" \
    --listen-client-urls "http://127.0.0.1:${ETCD_PORT}" --advertise-client-urls "http://127.0.0.1:${ETCD_PORT}" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
    --initial-cluster "${NODE}=http://127.0.0.1:$((ETCD_PORT + 10))" --listen-metrics-urls "" \
    --unsafe-no-fsync
  wait_for etcd 60 curl -sf "http://127.0.0.1:${ETCD_PORT}/health" || fail_with_log etcd

  start kube-apiserver "${BINS}/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:${ETCD_PORT}" \
    --bind-address "${NODE_IP}" --advertise-address "${NODE_IP}" --secure-port "${API_PORT}" \
    --tls-cert-file "${STATE}/pki/apiserver.crt" --tls-private-key-file "${STATE}/pki/apiserver.key" \
    --client-ca-file "${STATE}/pki/ca.crt" \
    --kubelet-client-certificate "${STATE}/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "${STATE}/pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP \
    --service-account-key-file "${STATE}/pki/sa.pub" \
    --service-account-signing-key-file "${STATE}/pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range "${SERVICE_CIDR}" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=false --profiling=false
  wait_for kube-apiserver 120 kubectl_ get --raw /readyz || fail_with_log kube-apiserver

  start kube-controller-manager "${BINS}/kube-controller-manager" \
    --kubeconfig "${STATE}/controller-manager.kubeconfig" \
    --authentication-kubeconfig "${STATE}/controller-manager.kubeconfig" \
    --authorization-kubeconfig "${STATE}/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "${STATE}/pki/sa.key" --root-ca-file "${STATE}/pki/ca.crt" \
    --cluster-signing-cert-file "${STATE}/pki/ca.crt" --cluster-signing-key-file "${STATE}/pki/ca.key" \
    --controllers '*,-node-ipam-controller' --profiling=false
  start kube-scheduler "${BINS}/kube-scheduler" \
    --kubeconfig "${STATE}/scheduler.kubeconfig" \
    --authentication-kubeconfig "${STATE}/scheduler.kubeconfig" \
    --authorization-kubeconfig "${STATE}/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --profiling=false

  build_pause
  start containerd "$(command -v containerd)" --config "${STATE}/containerd/config.toml"
  wait_for containerd 60 "$(command -v ctr)" -a "${SOCK}" version || fail_with_log containerd
  log "importing ${PAUSE_IMAGE}"
  import_image "${STATE}/images/pause.tar"

  start kubelet "${BINS}/kubelet" --config "${STATE}/kubelet/config.yaml" \
    --kubeconfig "${STATE}/kubelet.kubeconfig" --root-dir "${STATE}/kubelet" \
    --cert-dir "${STATE}/kubelet/pki" --node-ip "${NODE_IP}" --hostname-override "${NODE}"
  start kube-proxy "${BINS}/kube-proxy" --config "${STATE}/kube-proxy.yaml"

  wait_for "node ${NODE}" 180 node_ready || {
    kubectl_ describe node "${NODE}" >&2 || true
    fail_with_log kubelet
  }
  wait_for "default ServiceAccount" 60 kubectl_ get serviceaccount default -n default || fail_with_log kube-controller-manager
  log "cluster up in $((SECONDS - t0))s; export KUBECONFIG=${KUBECONFIG_ADMIN}"
}

node_ready() {
  [[ "$(kubectl_ get node "${NODE}" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

# ---------------------------------------------------------------- down

# our_procs prints the pids of processes started from our state directory
# (containerd shims and anything else whose command line names it).
our_procs() {
  # The pattern comes from a file so that this grep does not match itself.
  grep -lF -f <(printf '%s/\n' "${STATE}") /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3 | grep -vx "$$" || true
}

kill_containers() {
  local ctr id
  ctr="$(command -v ctr || true)"
  [[ -n "$ctr" && -S "${SOCK}" ]] && alive containerd || return 0
  log "killing pod containers"
  for id in $("$ctr" -a "${SOCK}" -n k8s.io tasks ls -q 2>/dev/null); do
    "$ctr" -a "${SOCK}" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
  done
  sleep 1
  for id in $("$ctr" -a "${SOCK}" -n k8s.io tasks ls -q 2>/dev/null); do
    "$ctr" -a "${SOCK}" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
  done
  for id in $("$ctr" -a "${SOCK}" -n k8s.io containers ls -q 2>/dev/null); do
    "$ctr" -a "${SOCK}" -n k8s.io containers delete "$id" >/dev/null 2>&1 || true
  done
}

unmount_state() {
  local m
  # Deepest first; lazy so a busy mount does not stop the rest.
  while read -r m; do
    [[ -n "$m" ]] || continue
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount ${m}"
  done < <(awk -v s="${STATE}/" 'index($2, s) == 1 {print $2}' /proc/self/mounts | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-)
}

# sweep_chains removes the KUBE-* chains kubelet and kube-proxy left in the
# host tables, our TOOLHOOKS-E2E forward guard, and the jumps to them. It only runs when our `up` recorded
# that the host had none before.
sweep_chains() {
  local ipt t rule chain
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for t in filter nat mangle; do
      "$ipt" -w -t "$t" -S >/dev/null 2>&1 || continue
      while read -r rule; do
        [[ -n "$rule" ]] || continue
        # shellcheck disable=SC2086 # rule is a saved iptables rule spec
        eval "$ipt -w -t $t -D ${rule#-A }" 2>/dev/null || true
      done < <("$ipt" -w -t "$t" -S | grep -E '^-A [A-Z]+ .*-j (KUBE-|TOOLHOOKS-E2E)' | grep -vE '^-A (KUBE-|TOOLHOOKS-E2E)')
      while read -r chain; do "$ipt" -w -t "$t" -F "$chain" 2>/dev/null || true; done \
        < <("$ipt" -w -t "$t" -S | awk '$1 == "-N" && $2 ~ /^(KUBE-|TOOLHOOKS-E2E)/ {print $2}')
      while read -r chain; do "$ipt" -w -t "$t" -X "$chain" 2>/dev/null || true; done \
        < <("$ipt" -w -t "$t" -S | awk '$1 == "-N" && $2 ~ /^(KUBE-|TOOLHOOKS-E2E)/ {print $2}')
    done
  done
}

# kill_pod_processes kills what still runs in the kubepods cgroups kubelet
# made: containers whose shim died with a crashed containerd are reparented
# to init and found only there.
kill_pod_processes() {
  local i procs
  for ((i = 0; i < 20; i++)); do
    procs="$(find /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u || true)"
    [[ -n "$procs" ]] || return 0
    ((i == 0)) && log "killing $(wc -w <<<"$procs") processes left in the kubepods cgroups"
    # shellcheck disable=SC2086 # one pid per word
    kill -KILL $procs 2>/dev/null || true
    sleep 0.5
  done
  log "processes remain in the kubepods cgroups: ${procs}"
}

remove_cgroups() {
  local d
  for d in /sys/fs/cgroup/kubepods /sys/fs/cgroup/kubepods.slice /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice; do
    [[ -d "$d" ]] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [[ -d "$d" ]] && log "cgroup ${d} still has processes; left in place"
  done
  return 0
}

down() {
  need_root
  if [[ ! -d "${STATE}" ]]; then
    log "nothing to do: ${STATE} does not exist"
    return
  fi
  local t0=$SECONDS p bins
  bins="$(cat "${STATE}/bins" 2>/dev/null || true)"
  stop kubelet
  kill_containers
  stop kube-proxy
  stop containerd
  stop kube-scheduler
  stop kube-controller-manager
  stop kube-apiserver
  stop etcd
  for p in $(our_procs); do
    log "killing leftover process ${p}: $(tr '\0' ' ' 2>/dev/null <"/proc/${p}/cmdline" | cut -c1-120)"
    kill -KILL "$p" 2>/dev/null || true
  done
  kill_pod_processes
  unmount_state
  # The veths of pods go with their netns; delete any still on the bridge.
  ip -o link show master "${BRIDGE}" type veth 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 |
    while read -r p; do ip link del "$p" 2>/dev/null || true; done
  for p in "${BRIDGE}" "${NODE_IF}"; do
    if ip link show "$p" >/dev/null 2>&1; then log "deleting interface ${p}"; ip link del "$p"; fi
  done
  if [[ -f "${STATE}/host/iptables" ]]; then
    log "removing the iptables rules of kube-proxy and kubelet"
    if [[ -n "$bins" && -x "${bins}/kube-proxy" ]]; then "${bins}/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
    sweep_chains
  fi
  remove_cgroups
  if [[ -f "${STATE}/host/run-containerd" ]]; then
    # We made it; with no containerd left running, what is in it (sockets of
    # shims that were killed) is ours too.
    if pgrep -x containerd >/dev/null || pgrep -x containerd-shim >/dev/null; then log "a containerd still runs; /run/containerd left in place"
    else rm -rf --one-file-system /run/containerd; fi
  fi
  if [[ -f "${STATE}/host/ip_forward" ]]; then
    cat "${STATE}/host/ip_forward" >/proc/sys/net/ipv4/ip_forward
  fi
  if [[ -n "$(awk -v s="${STATE}/" 'index($2, s) == 1' /proc/self/mounts)" ]]; then
    die "mounts under ${STATE} remain; not removing it"
  fi
  rm -rf --one-file-system "${STATE}"
  log "cluster down in $((SECONDS - t0))s; ${STATE} removed"
}

# check tells whether this machine can run the cluster, naming what is missing.
check() {
  local why=()
  [[ $(id -u) == 0 ]] || why+=("not root (uid $(id -u))")
  [[ -d /sys/fs/cgroup ]] || why+=("no /sys/fs/cgroup")
  command -v ip >/dev/null || why+=("no ip command (iproute2)")
  if ! command -v containerd >/dev/null || ! command -v runc >/dev/null || [[ ! -x "${CNI_BIN}/bridge" ]]; then
    command -v apt-get >/dev/null || why+=("containerd, runc or the CNI plugins are missing and there is no apt-get to install them")
  fi
  if [[ $(id -u) == 0 ]] && command -v ip >/dev/null; then
    if ip link add thkcheck0 type bridge 2>/dev/null; then ip link del thkcheck0
    else why+=("cannot create a bridge interface (no CAP_NET_ADMIN or no bridge support)"); fi
  fi
  if ((${#why[@]})); then
    printf 'cannot run the local cluster here: %s\n' "${why[@]}" >&2
    return 1
  fi
  echo "this machine can run the local cluster"
}

status() {
  local c rc=0
  [[ -d "${STATE}" ]] || { echo "down (no ${STATE})"; return 3; }
  for c in "${COMPONENTS[@]}"; do
    if alive "$c"; then printf '%-24s running (pid %s)\n' "$c" "$(pid_of "$c")"
    else printf '%-24s stopped\n' "$c"; rc=3; fi
  done
  BINS="$(cat "${STATE}/bins" 2>/dev/null || true)"
  if [[ -n "${BINS}" ]] && alive kube-apiserver; then
    kubectl_ get nodes -o wide || rc=3
  fi
  echo "KUBECONFIG=${KUBECONFIG_ADMIN}"
  return $rc
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  check) check ;;
  kubeconfig) echo "${KUBECONFIG_ADMIN}" ;;
  node-ip) echo "${NODE_IP}" ;;
  import)
    [[ -f "${2:-}" ]] || die "usage: $0 import IMAGE.tar"
    alive containerd || die "containerd is not running; run '$0 up' first"
    log "importing $2"
    import_image "$2"
    ;;
  *) sed -n '/^# Usage:/,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
