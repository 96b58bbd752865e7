# colocd — build, run, test. Everything the targets need is installed by them.
GO        ?= go
BIN       ?= bin/colocd
PKGS      := ./...
FUZZTIME  ?= 10s
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck

.PHONY: build run predict test vet lint fmt-check staticcheck fuzz bench clean

build:
	$(GO) build -o $(BIN) ./cmd/colocd

# The main job on the embedded default: the sidecar with an embedded NATS
# server, a simulated GPU (and MPS daemon) when no driver is present, and the
# example SLO config. Ask it for a slot from another shell:
#   eval "$$(bin/colocd admit --sidecar <id> --job demo --profile testdata/profiles/v100-train-step.json)"
run: build
	$(BIN) serve --config configs/colocd.yaml

# What the predictor says for the example: one step of a real training job
# next to a real inference service, time-sliced and under MPS at 50 %.
predict: build
	$(BIN) predict --inference testdata/profiles/v100-infer-200.json \
		--training testdata/profiles/v100-train-step.json --mode timeslice --load 0.2
	$(BIN) predict --inference testdata/profiles/v100-infer-200.json \
		--training testdata/profiles/v100-train-step.json --mode mps --pct 50 --load 0.2

# The one command CI and newcomers run.
test: lint
	$(GO) test -race -count=1 $(PKGS)
	$(MAKE) fuzz FUZZTIME=5s

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(STATICCHECK)
	$(STATICCHECK) $(PKGS)

lint: vet fmt-check staticcheck

# A short pass of every native fuzz test (go test -fuzz takes one target at a time).
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

# Speed goals: Go benchmarks with their own metrics (events/s, ms/prediction).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1 $(PKGS)

clean:
	rm -rf bin
