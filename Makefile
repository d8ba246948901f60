# Tollgate. Run `make help` for the targets.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --warn-undefined-variables --no-builtin-rules

GO        ?= go
BIN       := bin
GOTESTFLAGS ?=
FUZZTIME  ?= 10s
PKGS      := ./...

.PHONY: help
help: ## Show this help.
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-16s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build the binaries into bin/.
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./controlplane/cmd/controlplane ./dataplane/cmd/dataplane ./deploy/mockupstream/cmd/mockupstream ./deploy/dev/cmd/devstack

.PHONY: run
run: build ## Start a local stack (Postgres, Redis, control plane, data plane, mock upstream) and print a working curl line.
	$(BIN)/devstack -bin $(BIN)

.PHONY: test-tools
test-tools: ## Locate, or install with apt, every program the tests need; check ../shared, Postgres and Redis.
	GO=$(GO) .ci/testtools

# -timeout bounds each package's test binary (go test's default is 10m).
.PHONY: test
test: test-tools ## Run the whole test suite with -race against real Postgres and Redis (plus the build-tag variants).
	$(GO) test -race -count=1 -timeout 20m $(GOTESTFLAGS) $(PKGS)
	$(GO) test -race -count=1 -timeout 10m -tags edge $(GOTESTFLAGS) ./dataplane/translate/...
	$(GO) test -race -count=1 -timeout 10m -tags notokenizer $(GOTESTFLAGS) ./dataplane/tokencount/ ./dataplane/settle/ ./dataplane/proxy/

.PHONY: test-short
test-short: ## Unit tests only (no Postgres/Redis).
	$(GO) test -race -short $(PKGS)

.PHONY: lint
lint: ## gofmt, go vet, staticcheck, buf lint and buf breaking against main.
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^shared/gen/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	$(GO) tool buf lint
	@if git rev-parse --verify -q main >/dev/null && git cat-file -e main:buf.yaml 2>/dev/null; then \
		$(GO) tool buf breaking --against '.git#branch=main'; else echo "buf breaking: no main with buf.yaml yet"; fi

.PHONY: generate
generate: ## Regenerate the protobuf Go code under shared/gen.
	$(GO) tool buf generate

.PHONY: check-generate
check-generate: generate ## Fail if the committed generated code is not current.
	@if [ -n "$$(git status --porcelain -- shared/gen)" ]; then \
		echo "shared/gen is out of date; run make generate and commit:"; git status --porcelain -- shared/gen; exit 1; fi

.PHONY: bench
bench: ## Run the Go benchmarks (figures go to docs/benchmarks.md).
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each.
	@for pkg in $$($(GO) list $(PKGS)); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
			echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; done

.PHONY: clean
clean: ## Remove build output.
	rm -rf $(BIN)
