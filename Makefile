# kcedar. GNU make; a machine with Go (and gcc, for -race) is all it needs:
# `make e2e` builds and caches etcd + kube-apiserver from the Go module proxy
# on first use (hack/kube-binaries.sh; ~5-8 min once, then cached under
# ${KUBE_E2E_CACHE:-$HOME/.cache/kube-e2e}).
#
#   make build            bin/kcedar, and bin/kubectl-cedar (the same binary: `kubectl cedar`)
#   make test             gofmt check, go mod tidy check, tracked-file check, then
#                         go test ./... without -race and without vet (no e2e), a line
#                         per package as it finishes; ~8 min from empty Go caches on
#                         2 cores (mostly compiling ~1,300 packages), ~2 min warm
#   make test-race        go test -race over RACE_PKGS, the packages with goroutines,
#                         locks and atomics; ~4 min warm on 2 cores
#   make lint             go vet (plain, e2e, soak and image tags); staticcheck (pinned,
#                         through the Go module proxy) over every package, e2e and soak
#                         tags included; the 80-line bound on production functions; the
#                         tracked-file check (no merge conflict marker); under a minute warm
#   make e2e              real-cluster tests: go test -tags e2e ./test/e2e/...
#                         (E2E_FLAGS='-run TestX -v' to narrow them down)
#   make e2e-cost         kcedar's cost through a real kube-apiserver vs RBAC alone and its floor
#                         (TestAPIServerCost, no -race; ~5 min; KCEDAR_E2E_COST_* knobs)
#   make image            bin/kcedar-image.tar: OCI image archive (static binary, no base image)
#   make image-test       the image package's round trip of that static binary, run from the image
#                         (go test -tags image; `make test` does not build the binary)
#   make release          bin/release/: static binaries for linux and darwin (amd64, arm64),
#                         the kubectl plugin's archives (plugins/krew/cedar.yaml), the
#                         image archive, SHA256SUMS
#   make fuzz             each fuzz target for its execution budget (FUZZTIME overrides)
#   make soak             soak tests against bin/kcedar (test/soak; ~4 min)
#   make bench            the load test report (test/bench): every test/load workload at 1,
#                         1k, 10k and 100k policies, HTTP/1.1 and HTTP/2, beside the bare
#                         transport server; the zoo's reload and every workload's start-up and
#                         validate at 1k, 10k and 100k; rewrites the generated section of
#                         docs/performance.md and docs/performance/*.svg. The full run: ~1.5 h
#                         on 2 cores (estimated: 58 load runs of 3 rounds, 22 start-up runs);
#                         BENCH_QUICK=1: 1 and 1k policies, 1 s phases, reloads and start-ups
#                         at 1k and 10k, ~11 min; BENCH_FLAGS go to test/bench (-workloads,
#                         -policies, -reload-sizes)
#   make bench-go         the go test -bench benchmarks (BENCH selects them)
#   make capture-default  internal/schemagen/default from a default kube-apiserver
#   make helm-lint        helm lint --strict of charts/kcedar (the real helm, pinned, through the Go
#                         module proxy; not in go.mod)
#   make kube138          test/kube138: bin/kcedar driven by Kubernetes 1.38's own code (k8s.io/*
#                         v0.38.0-beta.0: webhook authorizer, union, conditions enforcer), with
#                         KUBE138_GOTOOLCHAIN (Go 1.27, through the module proxy) for that module
#                         only; ~10 min from empty caches, about a minute warm
#   make fmt | vet | tidy-check | kube-binaries | clean

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build
MAKEFLAGS += --no-print-directory

GO ?= go
GOFMT ?= $(shell $(GO) env GOROOT)/bin/gofmt
TEST_FLAGS ?=
DIFF_CASES ?= 500
RACE_PKGS ?= ./cmd/... ./internal/store/... ./internal/cluster/... ./internal/lib/watch/... \
	./internal/lib/parallel/... ./internal/engine ./internal/conditions ./server/... ./internal/schemagen/... \
	./internal/entities/... ./internal/cedarlang/...
E2E_FLAGS ?=
E2E_PKGS ?= ./test/e2e/...
E2E_TIMEOUT ?= 60m
BENCH ?= .
# Budgets are execution counts, not durations: a duration-bounded run can end
# with a spurious "context deadline exceeded" when the deadline falls while a
# worker is minimizing a new input (go.dev/issue/75804), which is a red CI with
# nothing found. FUZZTIME=30s (or 10000x) overrides every target's budget.
FUZZTIME ?=
FUZZMINIMIZETIME ?= 10s
# package:FuzzTarget:budget, run one after the other (go test -fuzz takes one).
# Each budget is about 10-20 s of fuzzing on 2 quiet cores.
FUZZ_TARGETS ?= ./server:FuzzAuthorize:60000x ./server:FuzzConditions:60000x ./server:FuzzDecodeSAR:60000x ./internal/store:FuzzLoadPolicies:6000x \
	./internal/tools/rbacconvert:FuzzConvertHostileName:1500x ./internal/tools/generate:FuzzGenerateHostileEvent:2000x
SOAK_FLAGS ?=

# Go files to format-check: everything but VCS, build output, caches, testdata.
GO_FILES = find . -type d \( -name .git -o -name .cache -o -name bin -o -name testdata -o -name node_modules \) -prune \
	-o -type f -name '*.go' -print

.PHONY: build test test-race vet lint kube138 cedarx cedarx-check fmt fmt-check tidy-check tracked-check fuzz soak e2e e2e-cost kube-binaries bench bench-go capture-default clean image image-binary image-test release helm-lint

# bin/kubectl-cedar is the same binary under the name kubectl runs as the
# `kubectl cedar` plugin (it dispatches on its name; cmd/kcedar/plugin.go).
build:
	$(GO) build -o bin/kcedar ./cmd/kcedar
	cp bin/kcedar bin/kubectl-cedar

# go test prints a line per package as its tests finish, straight to make's
# stdout (nothing in between buffers it), in the order of its arguments:
# hack/test-packages.sh orders ./... so that on a cold cache (some 1,300
# packages to compile) results come from the first minutes on, and the long
# tests run while the rest compiles. Without -race (make test-race) and
# without vet (make lint).
#
# The property tests of kcedar diff (internal/tools/diff) check DIFF_CASES
# generated policy changes (KCEDAR_DIFF_CASES): 500 here, a quarter of their
# own default and of its cost (about 100 s of one core); .ci/run checks 2,000.
test: fmt-check tidy-check tracked-check
	@echo "== test: go test ./..., fewest dependencies first (a cold cache compiles for a few minutes before the first line)"
	@KCEDAR_DIFF_CASES=$(DIFF_CASES) $(GO) test -vet=off $(TEST_FLAGS) $$(bash hack/test-packages.sh)

# The race detector over the packages where goroutines, locks and atomics
# live (grep for `go func`, sync, sync/atomic): the command's serve loop, the
# store and its watcher, the cluster controllers, the engine and the server,
# the schema's parallel fetches, and the shared caches of the policy and
# entity packages.
test-race:
	@echo "== test-race: go test -race over RACE_PKGS"
	$(GO) test -race -vet=off $(TEST_FLAGS) $(RACE_PKGS)

# The e2e tests are vetted too (with their build tag), so `make lint` catches
# them not compiling without starting a cluster.
vet:
	@echo "== vet: go vet, plain and with the e2e, soak and image tags"
	$(GO) vet ./...
	$(GO) vet -tags e2e $(E2E_PKGS)
	$(GO) vet -tags soak ./test/soak/...
	$(GO) vet -tags image ./internal/lib/image/

# staticcheck runs as `go run module@version`: pinned, fetched through the Go
# module proxy on first use (then cached), and never in go.mod. v0.8.2 is
# staticcheck 2026.2.2, the newest release when it was pinned; it needs Go
# 1.26 or later. Bump it by hand, with the Go version.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# The tagged packages are linted with their tags (staticcheck.conf holds the
# checks' configuration, if any). The function-length bound is
# test/layout's TestProductionFunctionsAreShort (make test runs it too).
lint: vet cedarx-check tracked-check
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags e2e $(E2E_PKGS)
	$(STATICCHECK) -tags soak ./test/soak/...
	$(GO) test -count=1 -run '^TestProductionFunctionsAreShort$$' ./test/layout

# internal/lib/cedarx is the one adapter over cedar-go's experimental x/exp
# packages, generated from them: cedarx regenerates it (after a cedar-go
# upgrade), cedarx-check fails when the tree differs from what it generates.
cedarx:
	bash hack/cedarx-aliases.sh

cedarx-check: cedarx
	@if ! git diff --quiet -- internal/lib/cedarx; then \
		echo "internal/lib/cedarx differs from what cedar-go's x/exp generates (run make cedarx and commit):" >&2; \
		git diff --stat -- internal/lib/cedarx >&2; exit 1; \
	fi

fmt-check:
	@echo "== fmt-check: gofmt -l"
	@unformatted=$$($(GO_FILES) | xargs -r $(GOFMT) -l); \
	if [[ -n $$unformatted ]]; then \
		echo "gofmt: not formatted (run make fmt):" >&2; echo "$$unformatted" >&2; exit 1; \
	fi

# go.mod and go.sum must be what `go mod tidy` writes (direct dependencies
# without "// indirect", nothing unused), in the root module and in the test
# modules that replace it (a root change moves their requirements too).
# Works offline with a warm module cache. test/kube138 is tidied with its
# own toolchain, and with -e: client-go v0.38.0-beta.0's own tests import
# k8s.io/ktesting v0.38.0-beta.0, which the module proxy does not serve
# (go mod tidy looks at the tests of dependencies too).
TIDY_MODULES ?= . test/embed test/helm test/kube138
tidy-check:
	@echo "== tidy-check: go mod tidy -diff in $(TIDY_MODULES)"
	@for m in $(TIDY_MODULES); do \
		tidy="$(GO) mod tidy -diff"; \
		if [[ $$m == test/kube138 ]]; then tidy="env GOTOOLCHAIN=$(KUBE138_GOTOOLCHAIN) $(GO) mod tidy -e -diff"; fi; \
		if ! out=$$(cd $$m && $$tidy 2>&1); then \
			echo "$$m: go.mod/go.sum are not tidy (run go mod tidy there):" >&2; echo "$$out" >&2; exit 1; \
		fi; \
	done

# No build output is tracked: no executable binary, nothing over 2 MB outside
# the embedded schema and testdata; and no merge conflict is left in a tracked
# file (hack/check-tracked.sh; make test and make lint run it).
tracked-check:
	@echo "== tracked-check: hack/check-tracked.sh"
	@bash hack/check-tracked.sh

fmt:
	$(GO_FILES) | xargs -r $(GOFMT) -w

fuzz:
	for t in $(FUZZ_TARGETS); do \
		IFS=: read -r pkg fn budget <<<"$$t"; ft='$(FUZZTIME)'; budget=$${ft:-$$budget}; \
		echo "fuzz: $$fn in $$pkg for $$budget"; \
		$(GO) test $$pkg -run '^$$' -fuzz "^$$fn\$$" -fuzztime "$$budget" -fuzzminimizetime $(FUZZMINIMIZETIME); \
	done

# Soak tests run the built binary: a 1,000-policy set reloaded 300 times
# (RSS bar) and an in-place writer under load (answers bar). SOAK_FLAGS go to
# the test binary, e.g. SOAK_FLAGS='-reloads 50'.
soak: build
	$(GO) test -tags soak -count=1 -timeout 15m -v ./test/soak/... -args -kcedar $(CURDIR)/bin/kcedar $(SOAK_FLAGS)

# The chart's lint by the real helm, run as `go run module@version` like
# staticcheck: pinned, fetched through the Go module proxy on first use, never
# in go.mod (test/helm lints it through Helm's Go SDK too). The first run
# compiles helm (minutes on 2 cores); then about 30 s.
HELM_VERSION ?= v3.22.0
HELM ?= $(GO) run helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

helm-lint:
	$(HELM) lint --strict charts/kcedar
	$(HELM) template kcedar charts/kcedar --namespace kcedar-system >/dev/null

# test/kube138 is a module of its own pinned to Kubernetes 1.38's modules
# (k8s.io/* v0.38.0-beta.0, where KEP-5681 conditional authorization is
# alpha), which need Go 1.27: its go command runs with KUBE138_GOTOOLCHAIN
# (fetched through the module proxy on first use; the root module keeps its
# own toolchain). It drives bin/kcedar, built first with the root's.
KUBE138_GOTOOLCHAIN ?= go1.27.3
KUBE138_FLAGS ?=

kube138: build
	cd test/kube138 && GOTOOLCHAIN=$(KUBE138_GOTOOLCHAIN) $(GO) test -count=1 $(KUBE138_FLAGS) ./... -args -kcedar $(CURDIR)/bin/kcedar

kube-binaries:
	bash hack/kube-binaries.sh

e2e:
	bins=$$(bash hack/kube-binaries.sh); eval "$$bins"; export ETCD_BIN KUBE_APISERVER_BIN KUBECTL_BIN; \
	echo "e2e: ETCD_BIN=$$ETCD_BIN KUBE_APISERVER_BIN=$$KUBE_APISERVER_BIN KUBECTL_BIN=$$KUBECTL_BIN"; \
	$(GO) test -tags e2e -race -count=1 -timeout $(E2E_TIMEOUT) $(E2E_FLAGS) $(E2E_PKGS)

# The cost benchmark: two clusters (RBAC alone; kcedar before RBAC, webhook
# cache off) under the same client-go load, alternating phases, one of them
# kcedar's floor (the empty policy set); see docs/performance.md. Without -race: it measures. Knobs (environment):
# KCEDAR_E2E_COST_ROUNDS, _DURATION, _WARMUP, _CONCURRENCY, _POLICIES.
e2e-cost:
	bins=$$(bash hack/kube-binaries.sh); eval "$$bins"; export ETCD_BIN KUBE_APISERVER_BIN; \
	KCEDAR_E2E_COST=1 $(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) -run '^TestAPIServerCost$$' -v ./test/e2e/

IMAGE_TAG ?= kcedar:dev
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

LDFLAGS = -s -w -X github.com/kcedar/kcedar/internal/lib/version.Version=$(VERSION)
IMAGE_BIN = bin/kcedar-linux-$(IMAGE_ARCH)

image-binary:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(IMAGE_BIN) ./cmd/kcedar

image: image-binary
	$(GO) run ./hack/mkimage -binary $(IMAGE_BIN) -arch $(IMAGE_ARCH) -version $(VERSION) -tag $(IMAGE_TAG) -o bin/kcedar-image.tar

# The image package's round trip of the binary `make image` packs: packed,
# written, read back, and run from the image (kcedar version), so IMAGE_ARCH
# must be this machine's (the default).
image-test: image-binary
	$(GO) test -tags image -count=1 -run '^TestArchiveOfTheBinaryRuns$$' ./internal/lib/image/ -args -binary $(CURDIR)/$(IMAGE_BIN)

# A release: static binaries built as `make image` builds its own (-trimpath,
# the version ldflags), the image archive of IMAGE_ARCH, and SHA256SUMS over
# all of them, in bin/release/. VERSION=vX.Y.Z names the release; by default
# it is `git describe`.
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE_DIR ?= bin/release

release: image
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out=$(RELEASE_DIR)/kcedar-$(VERSION)-$$os-$$arch; \
		echo "release: $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $$out ./cmd/kcedar; \
		krew=$(RELEASE_DIR)/krew-$$os-$$arch && mkdir -p $$krew && cp $$out $$krew/kubectl-cedar && cp LICENSE $$krew/; \
		tar -C $$krew -czf $(RELEASE_DIR)/kubectl-cedar-$(VERSION)-$$os-$$arch.tar.gz kubectl-cedar LICENSE && rm -r $$krew; \
	done
	cp bin/kcedar-image.tar $(RELEASE_DIR)/kcedar-$(VERSION)-image-linux-$(IMAGE_ARCH).tar
	cd $(RELEASE_DIR) && sha256sum kcedar-* kubectl-cedar-* > SHA256SUMS && cat SHA256SUMS

BENCH_QUICK ?=
BENCH_FLAGS ?=

bench: build
	$(GO) run ./test/bench -kcedar $(CURDIR)/bin/kcedar $(if $(BENCH_QUICK),-quick) $(BENCH_FLAGS)

bench-go:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem ./...

capture-default:
	bash hack/capture-default.sh

clean:
	rm -rf bin/
