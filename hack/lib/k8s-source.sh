# shellcheck shell=bash
# k8s-source.sh: shared by hack/setup-envtest.sh and hack/setup-cluster-bins.sh,
# which build Kubernetes binaries from source through the Go module proxy in
# throwaway modules. Source it after defining log(); it defines no globals
# beyond its functions.

# k8s_write_gomod DIR MODULE K8S_VERSION: writes DIR/go.mod for a throwaway
# module MODULE that requires k8s.io/kubernetes@K8S_VERSION, with every staging
# module named in the replace block of kubernetes' own go.mod
# (k8s.io/foo => ./staging/src/k8s.io/foo) pinned to its published tag
# (v0.X.Y for v1.X.Y).
k8s_write_gomod() {
  local dir="$1" module="$2" version="$3" gomod staging m
  local staging_version="v0.${version#v1.}"
  log "resolving k8s.io/kubernetes@${version} from the module proxy"
  gomod="$(cd "${dir}" && go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [[ -f "${gomod}" ]] || { log "could not download the go.mod of k8s.io/kubernetes@${version}"; return 1; }
  staging="$(awk '/^replace \(/{r=1;next} r&&/^\)/{r=0} r&&/=> \.\/staging\/src\//{print $1}' "${gomod}" | sort -u)"
  [[ -n "${staging}" ]] || { log "no staging modules found in ${gomod}"; return 1; }
  log "pinning $(wc -l <<<"${staging}") staging modules to ${staging_version}"
  {
    echo "module ${module}"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes ${version}"
    echo
    echo "replace ("
    while read -r m; do echo "	${m} => ${m} ${staging_version}"; done <<<"${staging}"
    echo ")"
  } >"${dir}/go.mod"
}

# k8s_tidy_locked DIR LOCK UPDATE SCRIPT: runs `go mod tidy` in the throwaway
# module DIR starting from the locked go.sum LOCK, then fails if tidy had to
# add a checksum the lock does not hold. With UPDATE=1 (or no lock yet) it
# writes the lock instead. SCRIPT names the script for the --update-lock hint.
k8s_tidy_locked() {
  local dir="$1" lock="$2" update="$3" script="$4"
  if [[ -f "${lock}" && ${update} == 0 ]]; then cp "${lock}" "${dir}/go.sum"; fi
  (cd "${dir}" && go mod tidy) || return 1
  if [[ ${update} == 1 || ! -f "${lock}" ]]; then
    mkdir -p "$(dirname "${lock}")"
    cp "${dir}/go.sum" "${lock}"
    log "wrote lock ${lock}"
    return 0
  fi
  if ! diff -q <(sort -u "${dir}/go.sum") <(sort -u "${lock}") >/dev/null; then
    log "go.sum of ${dir##*/} differs from the lock ${lock};"
    log "run ${script} --update-lock if the versions changed on purpose"
    diff <(sort -u "${lock}") <(sort -u "${dir}/go.sum") >&2 || true
    return 1
  fi
}

# k8s_ldflags K8S_VERSION: the linker flags that strip the binaries and stamp
# the version kubectl and the components report.
k8s_ldflags() {
  echo "-s -w -X k8s.io/component-base/version.gitVersion=$1 -X k8s.io/client-go/pkg/version.gitVersion=$1"
}

# k8s_build_lock DIR: hold an exclusive lock on DIR/.build.lock for the rest of
# the script, so that two runs sharing the cache (two test binaries, or a test
# beside CI) build one after the other instead of into each other's files.
k8s_build_lock() {
  mkdir -p "$1"
  exec 9>"$1/.build.lock"
  if ! flock -n 9; then
    log "another build is running in $1; waiting for it"
    flock 9
  fi
}
