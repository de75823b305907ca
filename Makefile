# Corral's build. `make run` and `make test` work on a fresh clone; `make ci`
# is what .ci/run calls: it installs the engines and runs every test with
# CORRAL_REQUIRE_ENGINES=1, so a test that would skip fails instead.

SHELL := /bin/bash
GO ?= go
# libvirt's Go bindings dlopen libvirt.so.0 at run time: no headers needed,
# and a host without libvirt still runs the binary.
export GOFLAGS := -tags=libvirt_dlopen
export CGO_ENABLED := 1

BIN := bin/corral
ARGS ?=
# Test artifacts (browser screenshots) go here, not into the tree.
export CORRAL_TEST_ARTIFACTS ?= $(CURDIR)/testdata-out
TEST_FLAGS ?= -timeout 20m

.PHONY: all run demo build test ci assets generate check-generated vet fmt-check deps-ci kube bench clean

# The KubeVirt tests need a real API server: when its binaries are built
# (hack/kube-build.sh, cached outside the tree), hack/testenv.sh starts one
# around the whole test run and exports TEST_KUBECONFIG; otherwise those
# tests skip (and fail under CORRAL_REQUIRE_ENGINES=1).
KUBE_WRAP = $(shell hack/kube-build.sh --cached >/dev/null 2>&1 && echo hack/testenv.sh)

all: build

# Front-end packages: pinned in static/package.json and e2e/package.json,
# installed with npm ci (only when the lock file changed).
static/node_modules/.stamp: static/package.json static/package-lock.json static/build.mjs
	cd static && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build
	touch $@

e2e/node_modules/.stamp: e2e/package.json e2e/package-lock.json
	cd e2e && npm ci --no-audit --no-fund --loglevel=error
	touch $@

assets: static/node_modules/.stamp

generate:
	$(GO) tool templ generate -path views

# Fails when the committed *_templ.go files differ from their .templ sources.
check-generated: generate
	@if ! git diff --quiet -- views || [ -n "$$(git ls-files --others --exclude-standard views)" ]; then \
		echo "views/*_templ.go drift from the .templ sources: run 'make generate' and commit"; \
		git status --short views; exit 1; fi

build: assets
	$(GO) build -trimpath -o $(BIN) .

run: build
	./$(BIN) serve $(ARGS)

demo: build
	./$(BIN) serve --demo $(ARGS)

test: assets e2e/node_modules/.stamp
	@mkdir -p $(CORRAL_TEST_ARTIFACTS)
	$(KUBE_WRAP) $(GO) tool gotestsum --format pkgname-and-test-fails --format-hide-empty-pkg -- $(TEST_FLAGS) ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ\.go$$')); \
	if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi

bench: assets
	$(GO) test -run '^$$' -bench . -benchmem ./handlers/ui/ ./app/fleet/

# The engines and tools the tests need, from Debian's packages.
deps-ci:
	hack/install-deps.sh

# kube-apiserver and etcd from the Go module proxy: 10-25 min cold, then
# cached for every clone on the machine.
kube:
	hack/kube-build.sh

ci: deps-ci check-generated fmt-check vet kube
	CORRAL_REQUIRE_ENGINES=1 $(MAKE) test

clean:
	rm -rf bin $(CORRAL_TEST_ARTIFACTS) static/dist/*.js static/node_modules e2e/node_modules
