# Aether — `make run` starts the app, `make test` runs every test CI runs.
SHELL := /bin/bash
GO_TAGS_DESKTOP := desktop,production,webkit2_41

.PHONY: run serve deps build desktop test lint go-test ui-check gui-test bench clean

run: ## get what is needed and start the app on the example policy
	scripts/run.sh

serve: ## the headless node on the example policy
	go run . node serve --policy examples/policy.json --data-dir ./.aether/node --port 0 --admin-port 3000 --pact-listen 127.0.0.1:8080

build: ## the headless binary (no GTK needed)
	go build -o bin/aether .

desktop: ## the desktop app (needs libgtk-3-dev libwebkit2gtk-4.1-dev)
	go build -tags $(GO_TAGS_DESKTOP) -o bin/aether-desktop .

test: lint go-test ui-check gui-test ## everything CI runs

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...
	go vet -tags $(GO_TAGS_DESKTOP) ./app/... .

go-test:
	go test -count=1 ./...

ui-check: ## the committed frontend/dist must be what the sources build
	cd frontend && npm run typecheck && npm run build
	@if [ -n "$$(git status --porcelain -- frontend/dist)" ]; then git status --short -- frontend/dist; echo "frontend/dist is stale: run 'cd frontend && npm run build' and commit it"; exit 1; fi

gui-test:
	scripts/gui-test.sh

bench: ## prints the benchmark ratios B1–B6 (never fails on a timing)
	@AETHER_BENCH=1 go test -p 1 -count=1 -run 'TestPrint' -v ./backend/... | grep -E '^B[0-9]' || true
	@scripts/bench-desktop.sh

clean:
	rm -rf bin test-results
