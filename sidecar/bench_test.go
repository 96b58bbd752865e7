package sidecar

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/colocd/colocd/bus"
	"github.com/nats-io/nats.go"
)

// BenchmarkRoundTrip puts a warm admission decision over NATS next to a
// bare NATS echo on the same server and connection, and reports the ratio
// (goal: ≤ 2×). The decision is a request on colocd.v1.quote: the whole
// decision path (decode, validate the inline 870-op profile, constraints,
// the percentage search on cached predictions, encode) without taking a
// lease, so every iteration decides again. The profile travels inline, or
// by reference to the object store (profile_ref).
func BenchmarkRoundTrip(b *testing.B) {
	small, err := os.ReadFile("../testdata/profiles/summary-train.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		profile json.RawMessage
		byRef   bool
	}{{"profile=v100-step-870-ops", trainJSON, false}, {"profile=v100-step-870-ops-by-ref", trainJSON, true}, {"profile=summary", small, false}} {
		b.Run(tc.name, func(b *testing.B) { benchRoundTrip(b, tc.profile, tc.byRef) })
	}
}

func benchRoundTrip(b *testing.B, profile json.RawMessage, byRef bool) {
	s, err := New(context.Background(), testConfig(b, "gpu-bench", 10000), Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	nc, err := s.Conn()
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	echo, err := nc.Subscribe("bench.echo", func(m *nats.Msg) { m.Respond(m.Data) })
	if err != nil {
		b.Fatal(err)
	}
	defer echo.Unsubscribe()
	ar := admitReq("job-bench", 10, 100)
	ar.Profile = profile
	if byRef { // the profile travels once, to the object store
		if ar.ProfileRef, err = bus.NewClient(nc).PutProfile(context.Background(), profile); err != nil {
			b.Fatal(err)
		}
		ar.Profile = nil
	}
	req, _ := json.Marshal(ar)
	b.ReportMetric(float64(len(req)), "request-bytes")
	call := func(subject string, body []byte) {
		if _, err := nc.Request(subject, body, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
	call("colocd.v1.quote", req) // warms the prediction cache
	measure := func(n int, subject string, body []byte) (p50, p99, mean float64) {
		ds := make([]float64, n)
		start := time.Now()
		for i := range ds {
			t0 := time.Now()
			call(subject, body)
			ds[i] = float64(time.Since(t0).Microseconds())
		}
		mean = float64(time.Since(start).Microseconds()) / float64(n)
		slices.Sort(ds)
		return ds[n/2], ds[n*99/100], mean
	}
	var eP50, eMean, qP50, qP99, qMean float64
	for b.Loop() {
		eP50, _, eMean = measure(200, "bench.echo", req) // the same bytes both ways
		qP50, qP99, qMean = measure(200, "colocd.v1.quote", req)
	}
	b.ReportMetric(eP50, "echo-p50-µs")
	b.ReportMetric(qP50, "decision-p50-µs")
	b.ReportMetric(qP99, "decision-p99-µs")
	b.ReportMetric(qMean/eMean, "decision/echo")
}
