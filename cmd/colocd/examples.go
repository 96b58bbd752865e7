package main

import "github.com/spf13/cobra"

// examples are what each command's --help shows under "Examples", by the
// command's path. They live together so that one test checks them all: every
// command has one, and each names only flags the command has.
var examples = map[string]string{
	"colocd serve": `  # the sidecar with an embedded NATS server (a simulated GPU when no driver is present)
  colocd serve --config configs/colocd.yaml
  # next to a NATS cluster, with three replicas
  colocd serve --config /etc/colocd/colocd.yaml --set nats.url=nats://nats-1:4222,nats://nats-2:4222 --set nats.replicas=3`,
	"colocd profile": `  colocd profile import --format kineto --out train.json trace.json.gz
  colocd profile validate train.json infer.json`,
	"colocd profile import": `  # one training step or one inference request, recorded with torch.profiler
  colocd profile import --format kineto --out train.json trace.json.gz`,
	"colocd profile validate": `  colocd profile validate testdata/profiles/*.json`,
	"colocd predict": `  colocd predict --inference bert.json --training resnet.json --load 0.5
  colocd predict --inference testdata/profiles/v100-infer-200.json \
      --training testdata/profiles/v100-train-step.json --mode mps --pct 30 --rate 8
  # p99 against the trainer's percentage, with the SLO and the percentage chosen
  colocd predict --inference bert.json --training resnet.json --mode mps --rate 120 --sweep --slo-p99-ms 15
  # the same as an SVG chart
  colocd predict --inference bert.json --training resnet.json --mode mps --rate 120 --sweep --slo-p99-ms 15 --svg sweep.svg
  # an LLM engine: the profile is one step, in bursts of 128
  colocd predict --inference llama-step.json --burst-steps 128 --load 0.6 \
      --training gpt2.json --mode mps --pct 30 --json`,
	"colocd calibrate": `  colocd calibrate --measurements measured.json --out h200.json
  # from what a running sidecar observed
  colocd calibrate --from-observations /var/lib/colocd/observations --out h200.json`,
	"colocd admit": `  eval "$(colocd admit --sidecar gpu-0 --job resnet-42 --profile train.json --memory-mib 16000)"`,
	"colocd place": `  eval "$(colocd place --job resnet-42 --profile train.json --memory-mib 16000 --k 5)"`,
	"colocd quote": `  colocd quote --job resnet-42 --profile train.json --wait 2s --json`,
	"colocd renew": `  # with COLOCD_LEASE_ID, COLOCD_LEASE_TOKEN and COLOCD_SIDECAR from admit's output
  colocd renew
  colocd renew --sidecar gpu-0 --lease LEASE --token TOKEN`,
	"colocd release":  `  colocd release --sidecar gpu-0 --lease LEASE --token TOKEN`,
	"colocd register": `  colocd register --sidecar gpu-0 --lease LEASE --token TOKEN 4242 4243`,
	"colocd status": `  # the one sidecar on the bus (several: they are listed, name one with --sidecar)
  colocd status
  colocd status --sidecar gpu-0 --json`,
	"colocd run": `  # a training job under a lease for its whole life: renewed, restarted on a throttle, released at its end
  colocd run --sidecar gpu-0 --job resnet-42 --profile train.json --memory-mib 16000 -- python train.py
  # torchrun with 4 workers that checkpoint on SIGUSR1; wait up to 30 minutes for a slot
  colocd run --place --job llm-7 --profile train.json --memory-mib 40000 --processes 4 \
      --on-throttle signal:SIGUSR1 --grace 90s --wait-for-slot 30m --readmit -- torchrun --nproc-per-node 4 train.py`,
	"colocd watch": `  # every lease event of a sidecar from now on
  colocd watch --sidecar gpu-0
  # one job's events, those the sidecar still keeps first, as JSON lines
  colocd watch --sidecar gpu-0 --job resnet-42 --all --json`,
	"colocd loadtest": `  colocd loadtest --embedded --launchers 50 --duration 30s`,
	"colocd simserve": `  colocd simserve --inference testdata/profiles/v100-infer-200.json \
      --training testdata/profiles/v100-train-step.json --rate 8 --sidecar gpu-0`,
	"colocd mig":         `  colocd mig layouts --gpu "NVIDIA H200"`,
	"colocd mig layouts": `  colocd mig layouts --gpu "NVIDIA H200" --json`,
	"colocd mig plan": `  colocd mig plan --gpu "NVIDIA H200" --inference bert.json \
      --training resnet.json --rate 120 --slo-p99-ms 15`,
	"colocd replay": `  # what colocd would have done with last week's traffic, the predictor right and 1.3x too low
  colocd replay --config colocd.yaml --service chat --trace arrivals.csv
  colocd replay --config colocd.yaml --service chat --trace arrivals.csv --error 1.3 --json --svg replay.svg`,
	"colocd probe": `  colocd probe --url http://127.0.0.1:9464/readyz --timeout 1s`,
	"colocd demo": `  # from the repository's root: about a minute, nothing left behind
  colocd demo
  colocd demo --json > demo.json`,
	"colocd launcher": `  colocd launcher add team-vision --out team-vision.nk
  colocd launcher list`,
	"colocd launcher add": `  # the seed goes to the team alone; the sidecar lets it in within seconds
  colocd launcher add team-vision --config /etc/colocd/colocd.yaml --out team-vision.nk`,
	"colocd launcher remove": `  colocd launcher remove team-vision --config /etc/colocd/colocd.yaml`,
	"colocd launcher list":   `  colocd launcher list --json`,
	"colocd drain": `  # before the GPU's driver is upgraded: no admits, the leases revoked with their deadline
  colocd drain --config /etc/colocd/colocd.yaml --reason "driver upgrade"`,
	"colocd undrain": `  colocd undrain --config /etc/colocd/colocd.yaml`,
	"colocd version": `  colocd version
  colocd version --json`,
}

// addExamples sets each command's Example from examples.
func addExamples(c *cobra.Command) {
	if ex, ok := examples[c.CommandPath()]; ok && c.Example == "" {
		c.Example = ex
	}
	for _, sub := range c.Commands() {
		addExamples(sub)
	}
}
