# HyperFleet — build, generate, test.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

# Toolchain cache: kube-apiserver, etcd, kubectl, the Cluster API manager, clusterctl and
# controller-gen are built from the Go module proxy by hack/tools.sh and kept here.
TOOLS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/hyperfleet/tools
KUBEBUILDER_ASSETS ?= $(TOOLS_CACHE)/k8s
CAPI_DIR ?= $(TOOLS_CACHE)/capi
CONTROLLER_GEN ?= $(TOOLS_CACHE)/bin/controller-gen
STATICCHECK ?= $(TOOLS_CACHE)/bin/staticcheck
export KUBEBUILDER_ASSETS CAPI_DIR

# Build outputs that do not name the checkout's directory. Without -trimpath the go command keys
# every compile of this module's packages by their absolute path, so a fresh clone (as CI makes)
# compiled, vetted and staticchecked all of them again with a warm cache: in a new clone go vet
# took 61 s and staticcheck 95 s against 3 s each. Stack traces name files by import path.
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)

GO_TEST_FLAGS ?=
# Envtest-backed packages start a real kube-apiserver; keep them from running all at once on small
# machines. Three lanes on two cores: most packages wait (on API servers, VMs booting, polls) more
# than they compute, and with two lanes the cores idled a third of the run (42 of 60 core-minutes
# used, 30 min); three lanes (and test/installed beside) took 21.5 min.
TEST_PARALLEL ?= 3

.PHONY: all
all: build

##@ Development

.PHONY: tools
tools: ## Build (or reuse) the offline toolchain: envtest binaries, the test node's Kubernetes binaries, CAPI manager, clusterctl, controller-gen, staticcheck, helm, SPIRE, and the runner template the real-guest tests boot.
	hack/prereqs.sh
	@# The runner template (hack/template.sh, about 13 minutes cold, mostly debootstrap's downloads
	@# and dpkg) is built beside the toolchain's compiles, outside any test's timeout; status 3 means
	@# this machine cannot build it, and test/realguest then skips with the reason.
	@log=$$(mktemp); hack/template.sh >/dev/null 2>$$log & guest=$$!; \
	hack/tools.sh --node "$(TOOLS_CACHE)" && hack/helm.sh "$(TOOLS_CACHE)" && hack/spire.sh "$(TOOLS_CACHE)"; rc=$$?; \
	wait $$guest; g=$$?; sed 's/^/[guest] /' $$log; rm -f $$log; \
	if [ $$g -ne 0 ] && [ $$g -ne 3 ]; then echo "hack/template.sh failed (status $$g)"; exit $$g; fi; \
	exit $$rc

# Code generation needs controller-gen alone, not the whole toolchain (SPIRE takes minutes cold).
.PHONY: controller-gen
controller-gen:
	hack/tools.sh "$(TOOLS_CACHE)" >/dev/null

.PHONY: generate
generate: controller-gen ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: controller-gen ## Generate CRDs and RBAC.
	$(CONTROLLER_GEN) crd rbac:roleName=manager-role paths=./api/... paths=./controllers/... paths=./pkg/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: verify-generated
verify-generated: generate manifests ## Fail when generated files are stale.
	@if [ -n "$$(git status --porcelain -- api config)" ]; then \
		echo "generated files are stale; run 'make generate manifests' and commit:"; \
		git status --porcelain -- api config; git --no-pager diff -- api config | head -50; exit 1; fi

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: lint
lint: vet controller-gen ## Static checks: gofmt, go vet, go mod tidy, staticcheck (staticcheck.conf).
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@if ! go mod tidy -diff >/dev/null 2>&1; then echo "go.mod or go.sum is not tidy; run 'go mod tidy':"; go mod tidy -diff; exit 1; fi
	$(STATICCHECK) ./...

##@ Test

.PHONY: test
# Each package of the main run may take 40 minutes: test/realguest boots three guests under QEMU
# without KVM and took 27 of 30 in a full run whose three lanes kept both cores busy.
# The longest packages first: go test starts packages in the order it is given them (each once),
# so the lanes finish together instead of one waiting on a long tail.
TEST_LONGEST := ./test/realguest ./controllers/runnerpool ./controllers/machineclaim ./test/packaging ./test/e2e \
	./test/console ./controllers ./controllers/bootstrapconfig ./hack/imagebuild ./controllers/hostdrain \
	./controllers/hypervisorcluster ./test/scale ./test/e2e/mixedplatforms
# test/installed mostly waits on a Kubernetes node's pods: it runs in a go test of its own beside
# the others, its output printed after theirs. internal/node, which needs the same node (a lock),
# comes last in the others' run. It gets 45 minutes: a full run on a cold machine took it 31.5
# (its images built from a cold build cache, two cores shared with the other lanes).
TEST_BESIDE := ./test/installed
TEST_LAST := ./internal/node
# What the test run leaves out because CI pays for it and nobody reads it: go vet (lint has just
# vetted every package, its tests included, with all of vet's analyzers) and the test binaries'
# DWARF (a quarter of each link; stack traces do not need it). Both cores are busy for the whole
# run, so every CPU-second saved is wall time.
TEST_BUILD_FLAGS := -vet=off -ldflags=-w

test: tools verify-generated lint ## Everything CI runs: generated files, lint, unit, integration (envtest) and e2e tests.
	@log=$$(mktemp); rc=0; \
	go test -count=1 -timeout 45m $(TEST_BUILD_FLAGS) $(GO_TEST_FLAGS) $(TEST_BESIDE) > $$log 2>&1 & beside=$$!; \
	trap 'kill $$beside 2>/dev/null; rm -f $$log' INT TERM; \
	others=$$(go list ./... | grep -v $(foreach p,$(TEST_BESIDE) $(TEST_LAST),-e '/$(p:./%=%)$$')); \
	echo "go test -p $(TEST_PARALLEL) -count=1 -timeout 40m $(TEST_BUILD_FLAGS) $(GO_TEST_FLAGS) $(TEST_LONGEST) <the other packages> $(TEST_LAST)  (and $(TEST_BESIDE) beside them)"; \
	go test -p $(TEST_PARALLEL) -count=1 -timeout 40m $(TEST_BUILD_FLAGS) $(GO_TEST_FLAGS) $(TEST_LONGEST) $$others $(TEST_LAST) || rc=$$?; \
	wait $$beside || rc=$$?; \
	echo "--- $(TEST_BESIDE), run beside the others:"; cat $$log; rm -f $$log; \
	exit $$rc

.PHONY: test-unit
test-unit: ## Tests that need no API server (packages whose tests all need one say "skipped in -short mode").
	go test -short -count=1 $(GO_TEST_FLAGS) ./...

.PHONY: test-integration
test-integration: tools ## envtest-backed controller tests.
	go test -count=1 $(GO_TEST_FLAGS) ./controllers/... ./test/integration/...

.PHONY: test-e2e
test-e2e: tools ## End-to-end tests on the local fleet.
	go test -count=1 -timeout 30m $(GO_TEST_FLAGS) ./test/e2e/...

.PHONY: test-console
test-console: tools ## The console's API, attacker and browser tests (Chromium from hack/prereqs.sh); CONSOLE_ARTIFACTS=dir keeps the screenshots.
	go test -count=1 $(GO_TEST_FLAGS) ./pkg/console/... ./test/fakeoidc/... ./test/console/...

.PHONY: fuzz
FUZZTIME ?= 30s
fuzz: ## Run every fuzz target for $(FUZZTIME) each (go test runs their seed corpora on every change).
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

.PHONY: bench
bench: tools ## Benchmarks and their reports (API calls per VM, reconcile cost).
	go test -run '^$$' -bench . -benchmem ./pkg/... ./test/... | tee bench.txt
	go test -count=1 -run '^TestCallsPerVMEndToEnd$$' -v ./controllers/ | tee -a bench.txt

# Cluster API's Machine controller as a platform team running thousand-runner bursts sets it
# (docs/performance.md); BENCH_SCALE_CAPI_ARGS= runs it on its defaults.
BENCH_SCALE_CAPI_ARGS ?= --kube-api-qps=200 --kube-api-burst=400 --machine-concurrency=20

.PHONY: bench-scale
bench-scale: tools ## BENCH_SCALE_N (default 1000) jobs at once through the controllers, CAPI and the simulator's load model; writes bench-scale.md.
	HYPERFLEET_BENCH_SCALE=1 HYPERFLEET_BENCH_SCALE_N=$(or $(BENCH_SCALE_N),1000) HYPERFLEET_BENCH_SCALE_TIME_SCALE=$(or $(BENCH_SCALE_TIME_SCALE),1) \
		HYPERFLEET_BENCH_SCALE_CAPI_ARGS="$(BENCH_SCALE_CAPI_ARGS)" \
		HYPERFLEET_BENCH_SCALE_REPORT=$(CURDIR)/bench-scale.md \
		go test -count=1 -timeout 50m -run '^TestBenchScale$$' -v ./test/scale/

.PHONY: bench-scale-provider
bench-scale-provider: ## Provider level only: a burst of BENCH_SCALE_N (default 1000) clones straight through the Proxmox provider; writes bench-scale-provider.md.
	HYPERFLEET_BENCH_SCALE=1 HYPERFLEET_BENCH_SCALE_N=$(or $(BENCH_SCALE_N),1000) HYPERFLEET_BENCH_SCALE_REPORT=$(CURDIR)/bench-scale-provider.md \
		go test -count=1 -timeout 30m -run '^TestBenchScale$$' -v ./pkg/hypervisor/proxmox/

.PHONY: soak
soak: tools ## SOAK_N (default 300; 2000 for the full run) VM lifecycles through the controllers on Proxmox and Hyper-V pools under faults and restarts; writes soak.md.
	HYPERFLEET_SOAK_N=$(or $(SOAK_N),300) HYPERFLEET_SOAK_MAX=$(or $(SOAK_MAX),10) HYPERFLEET_SOAK_TIMEOUT_MINUTES=$(or $(SOAK_TIMEOUT_MINUTES),150) \
		HYPERFLEET_SOAK_REPORT=$(CURDIR)/soak.md go test -count=1 -timeout 160m -run '^TestSoak$$' -v ./test/scale/

.PHONY: soak-provider
soak-provider: ## Provider level only: SOAK_N (default 300) VM lifecycles straight through the Proxmox provider under faults and restarts.
	HYPERFLEET_SOAK_N=$(or $(SOAK_N),300) go test -count=1 -timeout 20m -run '^TestSoak$$' -v ./pkg/hypervisor/proxmox/

##@ Build

.PHONY: build
build: ## Build all binaries into bin/.
	go build -o bin/ ./cmd/...

.PHONY: dev
dev: tools ## Run the whole fleet on this machine (API server, CAPI, HyperFleet, Proxmox simulator, fake GitHub; DEV_FLAGS=--hypervisor=hyperv|vsphere|both|all adds the Hyper-V or vCenter simulator); Ctrl-C stops it.
	go run ./cmd/hyperfleet-dev up $(DEV_FLAGS)

NODE_IMAGES ?= $(wildcard $(IMAGES_DIR)/*-linux-amd64.tar)
.PHONY: node
node: tools ## Run a real single-node Kubernetes (etcd, API server, controllers, scheduler, kubelet on containerd, kube-proxy; needs root) with the images of `make images` imported; Ctrl-C stops it.
	go run ./cmd/hyperfleet-dev node $(foreach i,$(NODE_IMAGES),--import $(i))

JOBS ?= 20
JOB_LABELS ?=
JOB_PLATFORM ?=
.PHONY: jobs
jobs: ## Queue $(JOBS) jobs on the local fleet's fake platform (make dev must be running); JOB_LABELS: runs-on labels (GitLab: tags; default linux,x64), Buildkite agent query rules (default queue=linux); JOB_PLATFORM: github, gitlab or buildkite in a mixed fleet.
	go run ./cmd/hyperfleet-dev jobs --count $(JOBS) $(if $(JOB_LABELS),--labels $(JOB_LABELS)) $(if $(JOB_PLATFORM),--platform $(JOB_PLATFORM))

.PHONY: run
run: ## Run the manager against the current kubeconfig.
	go run ./cmd/manager

.PHONY: install
install: manifests ## Install CRDs into the current cluster.
	$(KUBEBUILDER_ASSETS)/kubectl apply --server-side -f config/crd/bases

.PHONY: uninstall
uninstall: ## Remove CRDs from the current cluster.
	$(KUBEBUILDER_ASSETS)/kubectl delete --ignore-not-found -f config/crd/bases

.PHONY: deploy
deploy: manifests ## Deploy HyperFleet into the current cluster with kustomize.
	$(KUBEBUILDER_ASSETS)/kubectl apply --server-side -k config/default

# Images are tagged $(IMAGE_REGISTRY)/<name>:$(RELEASE_TAG), the names the chart and config/ pull.
IMAGE_REGISTRY ?= ghcr.io/hyperfleet-io
IMAGES_DIR ?= bin/images
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64

.PHONY: images
images: ## Build the manager, bootstrap service and console images (no container engine): OCI layouts and per-platform tarballs in $(IMAGES_DIR)/.
	go run ./hack/imagebuild -out "$(IMAGES_DIR)" -registry "$(IMAGE_REGISTRY)" -version "$(RELEASE_TAG)" \
		-platforms "$(IMAGE_PLATFORMS)" $(if $(SOURCE_DATE_EPOCH),-source-date-epoch "$(SOURCE_DATE_EPOCH)")

##@ Release

RELEASE_TAG ?= v0.1.0
RELEASE_DIR ?= out
HELM ?= $(TOOLS_CACHE)/bin/helm

.PHONY: release-manifests
release-manifests: ## Render clusterctl release assets into $(RELEASE_DIR)/: infrastructure- and bootstrap-components.yaml, metadata.yaml, cluster templates.
	RELEASE_TAG=$(RELEASE_TAG) hack/release-manifests.sh "$(RELEASE_DIR)"

.PHONY: release-agent
release-agent: ## Build the in-VM agent as static Linux binaries (amd64, arm64) with SHA256SUMS into $(RELEASE_DIR)/.
	RELEASE_TAG=$(RELEASE_TAG) hack/release-agent.sh "$(RELEASE_DIR)"

.PHONY: template
template: ## Build (or reuse) the Debian 12 runner template, a qcow2 made with debootstrap (needs root; cached under ~/.cache/hyperfleet/guest; docs/proxmox.md).
	hack/prereqs.sh
	hack/template.sh

.PHONY: helm
helm: ## Lint the Helm chart and package it into $(RELEASE_DIR)/.
	hack/helm.sh "$(TOOLS_CACHE)"
	$(HELM) lint charts/hyperfleet
	$(HELM) package charts/hyperfleet --version $(RELEASE_TAG:v%=%) --app-version $(RELEASE_TAG) -d "$(RELEASE_DIR)"

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
