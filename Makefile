# colocd — build, run, test. Everything the targets need is installed by them.
GO        ?= go
BIN       ?= bin/colocd
PKGS      := ./...
# Fuzz budgets are execution counts, not durations: with a duration, go1.26's
# fuzz coordinator can report a spurious "context deadline exceeded" failure
# at the deadline (golang/go#75804, fixed in go1.27), which failed CI once.
FUZZTIME  ?= 100000x
STATICCHECK_VERSION := v0.8.2
# go-nvml's cgo prologue calls NVML functions the header marks deprecated:
# hundreds of warnings on every build would hide a real one. Go's default
# flags, without that warning.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck

.PHONY: deploy-check attack build run demo predict replay calibration-study test test-race test-plain bench-once harness-test harness-e2e harness-bin accuracy accuracy-public vet lint fmt-check staticcheck fuzz bench fleet clean

build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/colocd

# The main job on the embedded default: the sidecar with an embedded NATS
# server, a simulated GPU (and MPS daemon) when no driver is present, and the
# example SLO config. Ask it for a slot from another shell:
#   bin/colocd run --sidecar <id> --job demo --profile testdata/profiles/v100-train-step.json --memory-mib 20000 -- sleep 600
run: build
	$(BIN) serve --config configs/colocd.yaml

# A scripted scenario on a simulated GPU, about a minute: a grant, a throttle,
# a deny for the SLO and one for memory, the guard throttling as the load
# rises, a lease expiring; each with what was predicted and why
# (docs/demo.md). It removes everything it made.
demo: build
	$(BIN) demo

# What the predictor says for the example: one step of a real training job
# next to a real inference service, time-sliced and under MPS at 50 %.
predict: build
	$(BIN) predict --inference testdata/profiles/v100-infer-200.json \
		--training testdata/profiles/v100-train-step.json --mode timeslice --load 0.2
	$(BIN) predict --inference testdata/profiles/v100-infer-200.json \
		--training testdata/profiles/v100-train-step.json --mode mps --pct 50 --load 0.2

# The SLO guard over the whole Azure trace (docs/guard.md#replay): minutes over
# the SLO and training work for static admission, the reactive guard and the
# forecast guard, on the LLM engine as fast as its law says and 1.3x slower.
REPLAY_TRACE ?= testdata/traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv
replay: build
	$(BIN) replay --trace $(REPLAY_TRACE)
	$(BIN) replay --trace $(REPLAY_TRACE) --error 1.3

# What the calibration's objective buys (docs/predictor.md#what-the-objective-buys):
# two records fitted, seven held out, before and after p99 weights, seeds and the prior.
calibration-study:
	$(GO) test -count=1 -run '^TestCalibrationStudy$$' -v ./predictor/calibrate/ -args -study

# The one command CI and newcomers run. Tests that the race detector makes
# too slow or would measure wrongly (the calibration fits, the guard's
# replay, the predictor's slow numeric checks, the demo's minute of wall
# time, memory figures) live in files tagged //go:build !race: the race pass
# leaves them out, and the plain pass runs exactly those (found by their
# tag, not named here), with the slow tag, which the longest of them also
# carry so that a plain go test ./... stays quick; and every benchmark runs
# once (bench-once), so that none rots between two `make bench` (figures come
# from `make bench` alone). The benchmarks are a pass of their own because
# go test runs the packages of a -bench invocation one after another: in one
# pass with the plain tests they made the demo's minute, the calibration
# fits and the admission benchmarks run in a row (194 s against 131 s for
# the race pass). The passes and the GPU harness's tests run side by side
# (each one's output kept together): the race pass's longest tests mostly
# wait, and the fuzz targets (3,000 inputs each beyond the corpus, one at a
# time) fill the gaps.
test: lint
	$(MAKE) -j5 --output-sync=target test-race test-plain bench-once harness-test fuzz FUZZTIME=3000x FUZZ_JOBS=1
	$(MAKE) attack

# The attack suite (docs/security.md#containment): a launcher with valid
# credentials floods renews, sends slow profiles, opens 5,000 idle HTTP
# connections and makes 1,000 watches, against a real sidecar, while an
# honest launcher's figures are checked. Wall-clock goals, so it runs on
# its own, after the unit tests; a few seconds.
attack:
	$(GO) test -tags attack -count=1 -run '^TestAttack' -v ./sidecar/

# Each deployment file read by its own tool (docs/deployment.md): the
# systemd unit by systemd-analyze (verify, and security at most 5.0), the
# alerting rules by promtool (check rules, test rules). A missing tool is
# fetched from Debian's packages (promtool is unpacked under bin/tools, not
# installed); one still missing fails here (in make test its tests skip).
PROMTOOL_DIR := bin/tools/prometheus
deploy-check:
	@command -v systemd-analyze >/dev/null || (apt-get update -qq && apt-get install -y -qq systemd)
	@command -v promtool >/dev/null || test -x $(PROMTOOL_DIR)/usr/bin/promtool || \
		(apt-get update -qq && d=$$(mktemp -d) && (cd $$d && apt-get download -qq prometheus) && \
		 mkdir -p $(PROMTOOL_DIR) && dpkg-deb -x $$d/prometheus_*.deb $(PROMTOOL_DIR) && rm -rf $$d)
	PATH="$(CURDIR)/$(PROMTOOL_DIR)/usr/bin:$$PATH" COLOCD_DEPLOY_TOOLS=1 $(GO) test -count=1 -run 'Systemd|Prometheus' -v ./deploy/

# The passes of make test. NORACE_* are the files tagged !race and their
# tests; the plain pass builds only the packages that have such files, four
# at a time (the demo's minute mostly waits); bench-once only those with
# benchmarks.
NORACE_FILES := $(shell grep -rl --include='*_test.go' '^//go:build.*!race' . 2>/dev/null)
BENCH_FILES  := $(shell grep -rl --include='*_test.go' '^func Benchmark' . 2>/dev/null)
PLAIN_PKGS   := $(sort $(dir $(NORACE_FILES)))
BENCH_PKGS   := $(sort $(dir $(BENCH_FILES)))
NORACE_TESTS := $(shell sed -n 's/^func \(Test[A-Za-z0-9_]*\).*/\1/p' $(NORACE_FILES) /dev/null | sort -u | paste -sd'|' -)
test-race:
	$(GO) test -race -count=1 -p 4 $(PKGS)
test-plain:
	$(GO) test -tags slow -count=1 -p 4 -run '^($(NORACE_TESTS))$$' $(PLAIN_PKGS)
bench-once:
	$(GO) test -tags slow -count=1 -run '^$$' -bench . -benchtime 1x $(BENCH_PKGS)

# The GPU harness's logic (no torch, no GPU needed), run against the real binary,
# and its end-to-end script dry-run (harness-e2e).
harness-test: build harness-e2e
	COLOCD_BIN=$(abspath $(BIN)) python3 -m unittest discover -s tools/gpu-harness/tests
	python3 -m unittest discover -s tools/public/tests

# colocd itself end to end (tools/gpu-harness/README.md#end-to-end): on a GPU
# host `OUT=dir bash tools/gpu-harness/e2e.sh` runs it on the real GPU and MPS
# daemon; here it runs the same steps against the simulated GPU, the fake MPS
# control program and the harness's fake workers, and fails when a step does
# not give what a dry run must (about 45 s). The results: $(E2E_OUT)/results.md.
E2E_OUT := bin/e2e-dry
harness-e2e: build
	@rm -rf $(E2E_OUT) && mkdir -p $(E2E_OUT)
	@BACKEND=fake COLOCD=$(abspath $(BIN)) OUT=$(abspath $(E2E_OUT)) bash tools/gpu-harness/e2e.sh >/dev/null 2>&1 \
		&& cat $(E2E_OUT)/results.md || { tail -80 $(E2E_OUT)/e2e.log; exit 1; }

# The binary the GPU harness carries to the device machine (cgo: go-nvml needs
# it, so build on linux/amd64 like the device).
harness-bin:
	GOOS=linux GOARCH=amd64 $(GO) build -ldflags "-s -w" -o tools/gpu-harness/bin/colocd ./cmd/colocd

# The predictor's accuracy on real GPU measurements (docs/accuracy.md):
# calibrate on all but one training workload, predict its records, MAPE per mode.
ACCURACY_DATA ?= testdata/gpu/h200/measurements.json
accuracy: build
	@test -f $(ACCURACY_DATA) || { echo "accuracy: no dataset at $(ACCURACY_DATA) yet (see docs/accuracy.md)"; exit 1; }
	python3 tools/gpu-harness/accuracy.py --colocd $(BIN) --measurements $(ACCURACY_DATA) --check --fold-cv
	$(MAKE) --no-print-directory accuracy-public

# The public measurements (testdata/public, docs/accuracy.md#public-measurements):
# each source converted afresh from its raw files, then predicted with nothing
# fitted on it.
accuracy-public: build
	python3 tools/public/orion.py --check
	python3 tools/gpu-harness/accuracy.py --colocd $(BIN) --measurements testdata/public/orion-v100/measurements.json --no-fit -q

# With the attack and slow tags every file is checked: they add the attack
# suite's file and the slow tests, and leave out none.
vet:
	$(GO) vet -tags attack,slow $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(STATICCHECK)
	$(STATICCHECK) -tags attack,slow $(PKGS)

# vet, gofmt and staticcheck are independent: side by side, each fills the
# others' waits (379 s for make test with them in a row, 330 s beside each
# other, both after a change that makes them check most packages again).
lint:
	$(MAKE) -j3 --output-sync=target vet fmt-check staticcheck

# A short pass of every native fuzz test (a fuzz run takes one target at a
# time). The targets are found in the test files, without building every
# package's tests to list them. Each package's fuzz-instrumented test binary
# is built once and runs each of its targets, as go test -fuzz would (the
# same seed corpus and cache, failures written to the package's
# testdata/fuzz): going through go test -fuzz, which links it again for each
# target, made the pass a sixth longer (78–81 s against 67–71 s, alone, on
# two cores).
# Two targets run at once, one worker each, so that one's start and coverage
# baseline overlap the other's fuzzing.
FUZZ_JOBS ?= 2
FUZZ_BIN  := bin/fuzz
fuzz:
	@set -e; rm -rf $(FUZZ_BIN); mkdir -p $(FUZZ_BIN); \
	files=$$(grep -rl --include='*_test.go' '^func Fuzz' .); \
	for d in $$(dirname $$files | sort -u); do \
		$(GO) test -c -fuzz . -o $(FUZZ_BIN)/$$(echo $${d#./} | tr / _).test $$d; \
	done; \
	cache=$$($(GO) env GOCACHE)/fuzz/$$($(GO) list -m); \
	for f in $$files; do d=$$(dirname $$f); \
		for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/p' $$f); do \
			echo "$$d $$t $(CURDIR)/$(FUZZ_BIN)/$$(echo $${d#./} | tr / _).test $$cache/$${d#./}"; \
		done; \
	done | xargs -P $(FUZZ_JOBS) -L 1 sh -c 'echo "fuzz $$0 $$1 ($(FUZZTIME))" && cd $$0 && \
		$$2 -test.run "^$$" -test.fuzz "^$$1$$" -test.fuzztime $(FUZZTIME) -test.parallel 1 -test.timeout 10m -test.fuzzcachedir $$3'

# Speed goals: Go benchmarks with their own metrics (events/s, ms/prediction).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1 $(PKGS)

# The fleet simulation (docs/fleet.md#simulation): a three-node nats-server
# cluster on loopback and 10, 100, then 1,000 simulated sidecars in one process;
# 20 placements each, one node killed midway. COLOCD_FLEET=10 for a quick one.
fleet:
	COLOCD_FLEET=$${COLOCD_FLEET:-10,100,1000} $(GO) test ./sidecar -run '^$$' -bench BenchmarkFleet -benchtime 20x -timeout 30m

clean:
	rm -rf bin

# The Slurm recipe of docs/launchers.md, extracted from the page and run as
# written on a one-node Slurm started here (munged, slurmctld and slurmd from
# a generated slurm.conf in a temporary directory, no systemd) against a
# sidecar on the simulated GPU: a grant, a revoke with requeue, scancel and
# the time limit, each asserted with its figures (about 7 minutes; as root).
# Not part of make test.
.PHONY: slurm-test
slurm-test: build
	@command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null && \
		command -v munged >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm slurmctld slurmd munge)
	COLOCD=$(abspath $(BIN)) bash tools/slurm/slurm-test.sh
