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

.PHONY: run serve deps build desktop desktop-release package package-test test lint go-test ui-check gui-test bench fuzz soak version clean

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

# The desktop app as the .deb ships it (version stamped, -trimpath, stripped). make test builds
# it once: gui-test runs it and package puts the same file in the .deb (both take it as
# AETHER_DESKTOP_BIN, and build it themselves when they run alone).
DESKTOP_BIN := bin/aether-release
desktop-release:
	VERSION=$(VERSION) scripts/build-desktop.sh $(DESKTOP_BIN)

package: ## dist/aether_<version>_<arch>.deb
	scripts/deps.sh package
	VERSION=$(VERSION) scripts/package.sh $(DEB)

package-test: package ## install the .deb with apt, start it from its desktop entry, remove it
	scripts/package-test.sh $(DEB)

version:
	@echo $(VERSION)

# make test runs deps, then ui-check, one after the other: deps installs what every part needs,
# and ui-check rewrites frontend/dist, which every Go build embeds, so nothing may compile
# beside it. Then, side by side (scripts/test-parts.sh; each part's output in
# test-results/<part>.log, printed whole when the part ends; make fails naming the part):
#   go       lint, then go-test (lint's vet warms the build cache go-test compiles from)
#   desktop  desktop-release, then, still beside go, these two side by side:
#   gui      gui-test
#   package  package, then package-test
# They share no resource. Each makes its own temp dirs, HOMEs and data dirs; the GUI and package
# tests each start their own Xvfb (a free display, -displayfd) and private session bus, with its
# own dunst and tray host; ports: the Go tests bind port 0, or pick below the ephemeral range
# where a port must outlive a restart (backend/agent 16000-19999, backend/e2e 20000-25999),
# gui-test 26000-28999, package-test 29000-31999 (scripts/lib/xsession.sh), and only
# package-test binds 3000 and 8080 (the user unit's defaults) or installs anything (the .deb,
# through apt: the GUI test runs its own copy of the binary, not /usr/bin/aether). The pinned Codex package is
# read-only in .cache/codex-registry once deps got it. What must be serial stays inside a part:
# see go-test. Most of each part's time is waiting on events (a turn, a page, a window), so on
# two cores they overlap; every wait is for an event, never a time, so load slows them only.
test: deps ## everything CI runs
	@DESKTOP_BIN=$(DESKTOP_BIN) scripts/test-parts.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...
	go vet -tags $(GO_TAGS_DESKTOP) ./app/... .

# go-test runs the packages GO_TEST_P at a time (-p): no two packages share a resource. Each test
# makes its own temp dirs, data dirs, CODEX_HOMEs and private D-Bus, listens on loopback port 0
# (or on a port backend/e2e's freePort hands out once per test binary), and the pinned Codex
# package is read-only in .cache/codex-registry once there. Inside a package, the tests that
# call t.Parallel run GO_TEST_PARALLEL at a time (-parallel): every backend/e2e test does (each
# has its own node, issuer, fake Codex and ports; they wait on turns, pages and subprocesses far
# more than they compute, so more of them than cores overlap), except TestConfinementUnavailable
# (it empties PATH, which the node searches for bubblewrap: go runs it before the parallel ones)
# and the bench printers. What must be serial stays serial, one test after another in its
# package: backend/codex's TestConfinementAsOwner (it creates the aether-owner account and runs
# the confinement tests again as it), and bench below (-p 1: its ratios are timings, which
# sharing the CPU would skew).
# No test waits on a clock: every wait is for an event, and the waits' hang guards
# (backend/e2e waitLimit) are far inside GO_TEST_TIMEOUT. -count=1 only turns off go's cache
# of passed results: nothing is retried.
GO_TEST_P ?= 4
GO_TEST_PARALLEL ?= 4
GO_TEST_TIMEOUT ?= 30m
go-test: ## AETHER_REAL_CODEX: the pinned codex (scripts/install-codex.sh), unless one is given
	@mkdir -p test-results
	@codex="$${AETHER_REAL_CODEX:-$$(scripts/install-codex.sh 2>/dev/null)}" || { echo "no pinned codex: run make deps"; exit 1; }; \
	echo "AETHER_REAL_CODEX=$$codex go test -p $(GO_TEST_P) -parallel $(GO_TEST_PARALLEL) -timeout $(GO_TEST_TIMEOUT) -count=1 ./..."; \
	AETHER_REAL_CODEX="$$codex" go test -p $(GO_TEST_P) -parallel $(GO_TEST_PARALLEL) -timeout $(GO_TEST_TIMEOUT) -count=1 ./...

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
