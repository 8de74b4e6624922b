# Aether — `make run` starts the app, `make test` runs every test CI runs.
# Both get what they need first (scripts/deps.sh); CI runs `make test CI=1` (.ci/run).
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO_TAGS_DESKTOP := desktop,production,webkit2_41
VERSION := $(shell scripts/version.sh)
LDFLAGS := -X github.com/aether/aether/backend/version.version=$(VERSION)
ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB := dist/aether_$(VERSION)_$(ARCH).deb

# CI=1: the tests that need a browser or caddy fail instead of skipping when those are missing
# (the real-Codex tests always run: the pinned codex is installed and handed to them).
ifeq ($(CI),1)
export AETHER_REQUIRE_BROWSER := 1
export AETHER_REQUIRE_CADDY := 1
endif

.PHONY: run serve deps build desktop package package-test test lint go-test ui-check gui-test bench fuzz soak version clean

run: ## get what is needed and start the app on the example policy
	scripts/run.sh

serve: ## the headless node on the example policy
	go run -ldflags "$(LDFLAGS)" . node serve --policy examples/policy.json --data-dir ./.aether/node --port 0 --admin-port 3000 --pact-listen 127.0.0.1:8080

deps: ## everything the tests need (apt, npm, the pinned codex); quick when it is all there
	scripts/deps.sh test

build: ## the headless binary (no GTK needed)
	go build -ldflags "$(LDFLAGS)" -o bin/aether .

desktop: ## the desktop app (needs libgtk-3-dev libwebkit2gtk-4.1-dev)
	go build -tags $(GO_TAGS_DESKTOP) -ldflags "$(LDFLAGS)" -o bin/aether-desktop .

package: ## dist/aether_<version>_<arch>.deb
	scripts/deps.sh package
	VERSION=$(VERSION) scripts/package.sh $(DEB)

package-test: package ## install the .deb with apt, start it from its desktop entry, remove it
	scripts/package-test.sh $(DEB)

version:
	@echo $(VERSION)

test: deps lint go-test ui-check gui-test package-test ## everything CI runs

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...
	go vet -tags $(GO_TAGS_DESKTOP) ./app/... .

# go-test runs the packages GO_TEST_P at a time (-p): no two packages share a resource. Each test
# makes its own temp dirs, data dirs, CODEX_HOMEs and private D-Bus, listens on loopback port 0,
# and the pinned Codex package is read-only in .cache/codex-registry once there. What must be
# serial stays inside one package, where go test runs tests one after another: backend/codex's
# TestConfinementAsOwner (it creates the aether-owner account and runs the confinement tests
# again as it), and bench below (-p 1: its ratios are timings, which sharing the CPU would skew).
# No test waits on a clock: every wait is for an event, and the waits' hang guards
# (backend/e2e waitLimit) are far inside GO_TEST_TIMEOUT. -count=1 only turns off go's cache
# of passed results: nothing is retried.
GO_TEST_P ?= 4
GO_TEST_TIMEOUT ?= 30m
go-test: ## AETHER_REAL_CODEX: the pinned codex (scripts/install-codex.sh), unless one is given
	@mkdir -p test-results
	@codex="$${AETHER_REAL_CODEX:-$$(scripts/install-codex.sh 2>/dev/null)}" || { echo "no pinned codex: run make deps"; exit 1; }; \
	echo "AETHER_REAL_CODEX=$$codex go test -p $(GO_TEST_P) -timeout $(GO_TEST_TIMEOUT) -count=1 ./..."; \
	AETHER_REAL_CODEX="$$codex" go test -p $(GO_TEST_P) -timeout $(GO_TEST_TIMEOUT) -count=1 ./...

ui-check: ## the committed frontend/dist must be what the sources build
	cd frontend && npm run typecheck && npm run build
	@if [ -n "$$(git status --porcelain -- frontend/dist)" ]; then git status --short -- frontend/dist; echo "frontend/dist is stale: run 'cd frontend && npm run build' and commit it"; exit 1; fi

gui-test:
	scripts/gui-test.sh

bench: ## prints the benchmark ratios B1–B9 (never fails on a timing)
	@AETHER_BENCH=1 go test -p 1 -count=1 -run 'TestPrint' -v ./backend/... | grep -E '^B[0-9]' || true
	@scripts/bench-desktop.sh

# The fuzz targets, package:name (README.md, "Fuzzing"). `go test` runs their seed corpora in
# testdata/fuzz/<name>/ (so CI does); `make fuzz` fuzzes each in turn for FUZZTIME.
FUZZ_TARGETS := \
	backend/gateway:FuzzBodyGuard backend/gateway:FuzzDeviceForm \
	backend/identity:FuzzIdentityPrepass backend/identity:FuzzIdentityVerify \
	backend/consent:FuzzUserCode backend/policy:FuzzPolicyParse \
	backend/receipts:FuzzReceiptsVerify backend/receipts:FuzzReceiptsExport \
	backend/agent:FuzzAgentCard backend/codex:FuzzCodexEvents \
	backend/site:FuzzDescribe
FUZZTIME ?= 10m
# Go minimizes every new interesting input for up to 60s, which stalls a target fed large seeds.
FUZZMINIMIZETIME ?= 5s

fuzz: ## fuzzes every target for FUZZTIME (10m each); a crasher is written to its package's testdata/fuzz/<name>/
	@failed=""; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
		echo "go test -run '^$$' -fuzz '^$$name$$' -fuzztime $(FUZZTIME) ./$$pkg"; \
		go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) ./$$pkg || failed="$$failed $$name"; \
	done; if [ -n "$$failed" ]; then echo "fuzz: failed:$$failed (the crashers are in testdata/fuzz/<name>/)"; exit 1; fi

# A real node under load, killed with -9 half-way (README.md, "Soak"); not part of make test.
soak: ## SOAK_AGENTS agents (200) for SOAK_DURATION (60s) on `aether node serve`; its last line is the verdict
	go build -o bin/soak ./tools/soak && bin/soak

clean:
	rm -rf bin dist test-results
