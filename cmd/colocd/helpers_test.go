package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/internal/natstest"
	"github.com/colocd/colocd/internal/runtest"
	"github.com/colocd/colocd/sidecar"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// startSidecar runs a sidecar with id on a simulated H200, an embedded NATS
// server on a free port and a small service, after mutate (nil: none) has
// changed the config; it stops when the test ends.
func startSidecar(t *testing.T, id string, mutate func(*configs.Config)) *sidecar.Sidecar {
	t.Helper()
	c := configs.Default()
	c.Sidecar.ID = id
	c.Sidecar.DataDir = t.TempDir()
	c.NATS.Listen = "127.0.0.1:0"
	c.GPU.Backend = configs.BackendSim
	c.Telemetry.HTTP = "127.0.0.1:0"
	c.Predictor.Requests = 300
	c.Services = []configs.Service{{Name: "v100-infer", Profile: profilesDir + "/v100-infer-200.json", RateRPS: 8, SLO: configs.SLO{P99MS: 10000}}}
	if mutate != nil {
		mutate(&c)
	}
	s, err := sidecar.New(context.Background(), &c, sidecar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runtest.Background(t, s.Run)
	return s
}

// refusal is a command line colocd refuses, and what its error must say.
type refusal struct {
	name string
	args []string
	want string
}

// wantRefusals runs colocd with command and each refusal's args, one
// subtest a refusal, and fails those that do not fail with an error
// containing want.
func wantRefusals(t *testing.T, command []string, refusals []refusal) {
	t.Helper()
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			_, _, err := runCLI(t, append(slices.Clone(command), r.args...)...)
			if err == nil || !strings.Contains(err.Error(), r.want) {
				t.Errorf("%v: err = %v, want it to contain %q", r.args, err, r.want)
			}
		})
	}
}

// plainNATS runs a bare nats-server (no JetStream, no colocd) on a free port
// and connects to it; both stop when the test ends.
func plainNATS(t *testing.T) *nats.Conn {
	t.Helper()
	return connectNATS(t, &server.Options{Host: "127.0.0.1", Port: -1})
}

// connectNATS runs a nats-server from opts and connects to it; both stop
// when the test ends.
func connectNATS(t *testing.T, opts *server.Options) *nats.Conn {
	t.Helper()
	ns := natstest.Start(t, opts)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
