# toolhooks Makefile. Tools are pinned and installed into ./bin with `go install`;
# the envtest control plane is built from source by hack/setup-envtest.sh and
# cached outside the clone.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

IMG ?= toolhooks/controller:dev
GATEWAY_IMG ?= toolhooks/gateway:dev

## Pinned tool versions.
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
KUSTOMIZE_VERSION ?= v5.8.1
HELM_VERSION ?= v3.22.0

LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
KUSTOMIZE ?= $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)

# Packages tested by `make test`: everything but the kind-style e2e suite.
TEST_PKGS ?= ./...
TEST_FLAGS ?= -race -count=1 -timeout 30m
BENCH ?= .
BENCH_PKGS ?= ./...

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate CRDs and RBAC from the API types and markers.
	"$(CONTROLLER_GEN)" rbac:roleName=manager-role crd paths="./api/...;./internal/controller/..." output:crd:artifacts:config=config/crd/bases
	"$(CONTROLLER_GEN)" rbac:roleName=gateway-role paths="./internal/gatewayk8s/..." output:rbac:artifacts:config=config/rbac/gateway
	@mkdir -p charts/toolhooks/crds
	@rm -f charts/toolhooks/crds/*.yaml
	@cp config/crd/bases/*.yaml charts/toolhooks/crds/
	@mkdir -p charts/toolhooks/files/rbac
	@cp config/rbac/role.yaml charts/toolhooks/files/rbac/manager-role.yaml
	@cp config/rbac/gateway/role.yaml charts/toolhooks/files/rbac/gateway-role.yaml
	@cp config/rbac/leader_election_role.yaml charts/toolhooks/files/rbac/leader-election-role.yaml
	@cp config/rbac/metrics_auth_role.yaml charts/toolhooks/files/rbac/metrics-auth-role.yaml
	@cp config/rbac/metrics_reader_role.yaml charts/toolhooks/files/rbac/metrics-reader-role.yaml
	@cp config/rbac/toolcallapproval_approver_role.yaml charts/toolhooks/files/rbac/approver-role.yaml
	@cp config/rbac/toolcallapproval_viewer_role.yaml charts/toolhooks/files/rbac/approval-viewer-role.yaml
	@mkdir -p charts/toolhooks/files/approval
	@cp config/approval/validating_admission_policy.yaml charts/toolhooks/files/approval/validating-admission-policy.yaml

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods.
	"$(CONTROLLER_GEN)" object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: fmt
fmt: ## Run gofmt -s over the tree.
	gofmt -s -w $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...
	go vet -tags e2e ./test/...

.PHONY: lint
lint: golangci-lint ## Run golangci-lint (includes the depguard rule keeping internal/hooks free of Kubernetes).
	"$(GOLANGCI_LINT)" run ./...

.PHONY: lint-fix
lint-fix: golangci-lint ## Run golangci-lint and apply fixes.
	"$(GOLANGCI_LINT)" run --fix ./...

.PHONY: verify
verify: generate manifests ## Fail when generated code or manifests are out of date.
	@if [ -n "$$(git status --porcelain -- api config charts)" ]; then \
		echo "Generated files are out of date; run 'make generate manifests' and commit:"; \
		git status --porcelain -- api config charts; git --no-pager diff --stat -- api config charts; exit 1; \
	fi
	@go run ./hack/crd-ref --check
	@echo "Generated code and manifests are up to date"

.PHONY: docs
docs: ## Regenerate the CRD reference in README.md from the CRDs in config/crd/bases.
	go run ./hack/crd-ref

.PHONY: envtest
envtest: ## Build (once) the envtest kube-apiserver, etcd and kubectl from source and print their directory.
	@hack/setup-envtest.sh

.PHONY: test
test: generate manifests fmt vet helm kustomize test-deps mcp-npm ## Run all unit and envtest suites with -race.
	@assets="$$(hack/setup-envtest.sh)"; \
	echo "Running tests with KUBEBUILDER_ASSETS=$$assets"; \
	KUBEBUILDER_ASSETS="$$assets" go test $(TEST_FLAGS) $(TEST_PKGS)

.PHONY: test-deps
test-deps: ## Install (from Debian, when missing) the programs the tests run: node, npm, bash, dash, strace, redis-server.
	@hack/test-deps.sh

# The third-party MCP packages the gateway's MCP tests run (internal/mcpgate),
# pinned by hack/mcp-npm/package-lock.json.
MCP_NPM_DIR := hack/mcp-npm

.PHONY: mcp-npm
mcp-npm: $(MCP_NPM_DIR)/node_modules/.package-lock.json ## Install the pinned MCP npm packages for the tests (npm ci).
$(MCP_NPM_DIR)/node_modules/.package-lock.json: $(MCP_NPM_DIR)/package.json $(MCP_NPM_DIR)/package-lock.json
	@command -v npm >/dev/null || hack/test-deps.sh
	cd $(MCP_NPM_DIR) && npm ci --no-audit --no-fund
	@touch $@

# Bounded fuzz runs in CI: the shell checker's differential oracle (real bash
# and dash under strace) and analysis (no panic, both readings), and the
# result scanner (every secret redacted wherever it sits).
FUZZ_TIME ?= 30s

.PHONY: fuzz-ci
fuzz-ci: test-deps ## Run the shell checker's, ask rules', result scanner's and decision log masking's fuzz targets for FUZZ_TIME each.
	go test -run '^$$' -fuzz '^FuzzOracle$$' -fuzztime $(FUZZ_TIME) ./internal/hooks/autonomy
	go test -run '^$$' -fuzz '^FuzzAskSinglePass$$' -fuzztime $(FUZZ_TIME) ./internal/hooks/autonomy
	go test -run '^$$' -fuzz '^FuzzAnalyze$$' -fuzztime $(FUZZ_TIME) ./internal/hooks/shellcheck
	go test -run '^$$' -fuzz '^FuzzSedReader$$' -fuzztime $(FUZZ_TIME) ./internal/hooks/shellcheck
	go test -run '^$$' -fuzz '^FuzzRedactsEverySecret$$' -fuzztime $(FUZZ_TIME) ./internal/hooks/resultscan
	go test -run '^$$' -fuzz '^FuzzRemovePathsLeaveNothingSelected$$' -fuzztime $(FUZZ_TIME) ./internal/hooks/resultscan
	go test -run '^$$' -fuzz '^FuzzMaskNeverLogsASecret$$' -fuzztime $(FUZZ_TIME) ./internal/hooks/argmask
	go test -run '^$$' -fuzz '^FuzzKernelRulesMatchThePolicy$$' -fuzztime $(FUZZ_TIME) ./internal/sandbox

.PHONY: ci
ci: verify lint test fuzz-ci ci-e2e ## What CI runs: generated code current, lint, all tests, then the e2e suite.

.PHONY: ci-e2e
ci-e2e: ## Run make e2e when this machine can run a local cluster; fail loudly otherwise unless TOOLHOOKS_SKIP_E2E=1.
	@hack/ci-e2e.sh

.PHONY: e2e
e2e: helm ## Run the e2e suite on a local single-node cluster (root; installs containerd; see hack/e2e.sh).
	HELM="$(HELM)" hack/e2e.sh

.PHONY: bench
bench: ## Run benchmarks with -benchmem (BENCH=regexp BENCH_PKGS=./internal/...).
	go test -run '^$$' -bench '$(BENCH)' -benchmem $(BENCH_PKGS)

.PHONY: bench-decisions
bench-decisions: ## Load-test POST /v1/decisions with wrk on the built-in chain (CONNS, DURATION, THREADS, GATEWAY_ENV).
	hack/bench-decisions.sh

.PHONY: bench-state-store
bench-state-store: ## bench-decisions with budgets and rate limits in process, then in a loopback redis-server, at 16, 64 and 256 connections: false denials, throughput, p50/p99, Redis's count against the calls that ran (about a minute).
	STATE_STORE=memory,redis CONNS_LIST="$${CONNS_LIST:-16 64 256}" DURATION="$${DURATION:-5s}" WARMUP="$${WARMUP:-1s}" hack/bench-decisions.sh

.PHONY: bench-mcp
bench-mcp: ## Measure the gateway's MCP overhead, direct vs gated, in separate processes (RATES, INFLIGHT, DURATION, BENCH_LOCK).
	hack/bench-mcp.sh

.PHONY: callgrind-decisions
callgrind-decisions: ## Count instructions per decision with valgrind's callgrind (repeatable under load).
	hack/callgrind-decisions.sh

##@ Build

.PHONY: build
build: generate fmt vet ## Build the binaries into ./bin.
	go build -o $(LOCALBIN)/manager ./cmd/main.go
	go build -o $(LOCALBIN)/gateway ./cmd/gateway
	go build -o $(LOCALBIN)/toolhooks-sandbox ./cmd/toolhooks-sandbox
	go build -o $(LOCALBIN)/kubectl-toolhooks ./cmd/kubectl-toolhooks

.PHONY: run
run: generate manifests fmt vet ## Run the controller against the cluster in ~/.kube/config.
	go run ./cmd/main.go

.PHONY: demo
demo: | $(LOCALBIN) ## Build the gateway and play a scripted agent session through it, enforcing config/samples.
	@echo "Building the gateway and the demo into $(LOCALBIN) (the first build takes a minute or two)..."
	go build -o "$(LOCALBIN)/gateway" ./cmd/gateway
	go build -o "$(LOCALBIN)/demo" ./cmd/demo
	"$(LOCALBIN)/demo" --gateway "$(LOCALBIN)/gateway" $(DEMO_ARGS)

.PHONY: demo-cluster
demo-cluster: | $(LOCALBIN) ## The demo against a local envtest control plane, with the controller pushing the samples.
	@echo "Building the controller, the gateway and the demo into $(LOCALBIN)..."
	go build -o "$(LOCALBIN)/manager" ./cmd/main.go
	go build -o "$(LOCALBIN)/gateway" ./cmd/gateway
	go build -o "$(LOCALBIN)/demo" ./cmd/demo
	@assets="$$(hack/setup-envtest.sh)"; \
	KUBEBUILDER_ASSETS="$$assets" "$(LOCALBIN)/demo" --cluster --gateway "$(LOCALBIN)/gateway" --manager "$(LOCALBIN)/manager" $(DEMO_ARGS)

.PHONY: docker-build
docker-build: ## Build the controller and gateway images (needs a Docker engine).
	docker build --target controller -t $(IMG) .
	docker build --target gateway -t $(GATEWAY_IMG) .

##@ Deployment

ifndef ignore-not-found
  ignore-not-found = false
endif

.PHONY: install
install: manifests kustomize ## Install CRDs into the cluster in ~/.kube/config.
	"$(KUSTOMIZE)" build config/crd | kubectl apply -f -

.PHONY: uninstall
uninstall: manifests kustomize ## Uninstall CRDs from the cluster in ~/.kube/config.
	"$(KUSTOMIZE)" build config/crd | kubectl delete --ignore-not-found=$(ignore-not-found) -f -

.PHONY: deploy
deploy: manifests kustomize ## Deploy the controller to the cluster in ~/.kube/config.
	cd config/manager && "$(KUSTOMIZE)" edit set image controller=$(IMG)
	"$(KUSTOMIZE)" build config/default | kubectl apply -f -

.PHONY: undeploy
undeploy: kustomize ## Undeploy the controller from the cluster in ~/.kube/config.
	"$(KUSTOMIZE)" build config/default | kubectl delete --ignore-not-found=$(ignore-not-found) -f -

##@ Tools

$(LOCALBIN):
	mkdir -p "$(LOCALBIN)"

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Install controller-gen into ./bin.
$(CONTROLLER_GEN): | $(LOCALBIN)
	$(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Install golangci-lint into ./bin.
$(GOLANGCI_LINT): | $(LOCALBIN)
	$(call go-install-tool,$(GOLANGCI_LINT),github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

.PHONY: kustomize
kustomize: $(KUSTOMIZE) ## Install kustomize into ./bin.
$(KUSTOMIZE): | $(LOCALBIN)
	$(call go-install-tool,$(KUSTOMIZE),sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_VERSION))

.PHONY: helm
helm: $(HELM) ## Install helm into ./bin (the chart tests run it).
$(HELM): | $(LOCALBIN)
	$(call go-install-tool,$(HELM),helm.sh/helm/v3/cmd/helm,$(HELM_VERSION))

# go-install-tool installs package $(2)@$(3) into $(1) (a versioned file name),
# with a symlink without the version beside it.
define go-install-tool
@[ -f "$(1)" ] || { \
set -e; \
package=$(2)@$(3) ; \
echo "Installing $${package} into $(LOCALBIN)" ; \
rm -f "$(1)" ; \
GOBIN="$(LOCALBIN)" go install $${package} ; \
bin=$$(basename "$(2)"); case "$$bin" in v[0-9]*) bin=$$(basename "$$(dirname "$(2)")");; esac; \
mv "$(LOCALBIN)/$$bin" "$(1)" ; \
} ; \
ln -sf "$$(basename "$(1)")" "$$(echo "$(1)" | sed "s/-$(3)$$//")"
endef
