# runtimetruth — run `make help` for the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

MODULE  := github.com/runtimetruth/runtimetruth
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
BIN     := $(CURDIR)/bin
# Every module of the workspace, as package patterns (go.work has no root module).
MODULES := $(shell go list -m -f '{{.Path}}/...' 2>/dev/null)
GOTEST  ?= go test
# Services that have a binary (services/<name>/cmd/runtimetruth-<name>).
SERVICES := $(notdir $(patsubst %/cmd,%,$(wildcard services/*/cmd)))
FUZZTIME ?= 20s

export RUNTIMETRUTH_CODEX_BIN ?=

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the binaries into ./bin/
	@mkdir -p $(BIN)
	go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/runtimetruth $(MODULE)/cmd/runtimetruth
	@for s in $(SERVICES); do \
	  go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/runtimetruth-$$s $(MODULE)/services/$$s/cmd/runtimetruth-$$s || exit 1; done
	@echo "built $(BIN)/runtimetruth $(foreach s,$(SERVICES),$(BIN)/runtimetruth-$(s))"

.PHONY: deps
deps: ## Install what the tests need (idempotent): git, python3-venv, npm, the pinned Codex, cosign and helm CLIs, chromium and axe-core, Alertmanager
	scripts/test-deps.sh
	scripts/install-helm.sh
	scripts/install-browser.sh
	scripts/install-alertmanager.sh

.PHONY: test
test: deps ## Install test dependencies, start ClickHouse and rsyslog on loopback, vet, run every test (race detector)
	go vet $(MODULES)
	RUNTIMETRUTH_CODEX_BIN="$$(scripts/install-codex.sh --print-bin)" \
	RUNTIMETRUTH_COSIGN_BIN="$$(scripts/install-cosign.sh --print-bin)" \
	RUNTIMETRUTH_HELM_BIN="$$(scripts/install-helm.sh --print-bin)" \
	RUNTIMETRUTH_AXE="$$(scripts/install-browser.sh --print-axe)" \
	RUNTIMETRUTH_ALERTMANAGER_BIN="$$(scripts/install-alertmanager.sh --print-bin)" \
	  scripts/test-services.sh $(GOTEST) -race -count=1 -timeout 25m $(MODULES)
	for d in $$(go list -m -f '{{.Dir}}'); do (cd $$d && GOWORK=off go build ./...) || exit 1; done

.PHONY: bench
bench: deps ## Run the benchmarks and print ratios against the in-run references
	RUNTIMETRUTH_CODEX_BIN="$$(scripts/install-codex.sh --print-bin)" scripts/bench.sh

.PHONY: fuzz
fuzz: ## Fuzz every parser of untrusted input for FUZZTIME each (default 20s)
	scripts/fuzz.sh $(FUZZTIME)

# golangci-lint is pinned by a tool directive in tools/go.mod, which stays out of
# go.work; `go tool -n` builds it once into GOCACHE and prints its path. It is
# then run in each module directory with the workspace on, because it takes
# directories rather than module-path patterns. Every module is linted before
# the target fails.
.PHONY: lint
lint: ## go vet plus the pinned golangci-lint (tools/go.mod), module by module
	go vet $(MODULES)
	@lint="$$(cd tools && GOWORK=off go tool -n golangci-lint)" || exit 1; \
	failed=; \
	for d in $$(go list -m -f '{{.Dir}}'); do \
	  echo "golangci-lint run ./... in $${d#$(CURDIR)/}"; \
	  (cd "$$d" && "$$lint" run --config "$(CURDIR)/.golangci.yml" ./...) || failed="$$failed $${d#$(CURDIR)/}"; \
	done; \
	if [ -n "$$failed" ]; then echo "golangci-lint failed in:$$failed" >&2; exit 1; fi

# Formatting and module tidiness, as CI checks them: gofmt -l lists nothing,
# and `go mod tidy -diff` finds nothing to change in any module (tools/
# included), each module on its own as go mod tidy works.
.PHONY: check
check: ## gofmt and go mod tidy checks (no changes): what CI runs beside lint
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt: these files need gofmt -w:" >&2; echo "$$out" >&2; exit 1; fi
	@failed=; \
	for d in $$(go list -m -f '{{.Dir}}') $(CURDIR)/tools; do \
	  (cd "$$d" && GOWORK=off GOFLAGS=-mod=mod go mod tidy -diff) || failed="$$failed $${d#$(CURDIR)/}"; \
	done; \
	if [ -n "$$failed" ]; then echo "go mod tidy would change:$$failed" >&2; exit 1; fi

.PHONY: run
run: build ## Build, then run the embedded default: runtimetruth up (Ctrl-C stops it)
	$(BIN)/runtimetruth up

.PHONY: demo
demo: build ## The single-machine walkthrough: baseline, PASS, DRIFT, JSON report
	RUNTIMETRUTH=$(BIN)/runtimetruth scripts/demo.sh

.PHONY: tidy
tidy: ## go mod tidy in every module (tools/ included), as make check checks it
	@for d in $$(go list -m -f '{{.Dir}}') $(CURDIR)/tools; do (cd $$d && GOWORK=off GOFLAGS=-mod=mod go mod tidy) || exit 1; done

.PHONY: clean
clean: ## Remove build output
	rm -rf $(BIN)
