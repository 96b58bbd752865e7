package sidecar

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/internal/runtest"
	"github.com/nats-io/nats.go"
)

// BenchmarkRoundTrip puts a warm admission decision over NATS next to a
// bare NATS echo on the same server and connection, and reports the ratio
// of their medians and of their means (goal: ≤ 2×). The decision is a request on colocd.v1.quote: the whole
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
	stop := runtest.Background(s.Run)
	defer stop()
	nc, err := s.Conn() // a launcher
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	side, err := s.embed.Conn() // the sidecar's own identity: echo and the profile store
	if err != nil {
		b.Fatal(err)
	}
	defer side.Close()
	// The echo answers on a subject launchers may send to, so that both
	// round trips pass the same permission checks.
	const echoSubject = "colocd.v1.bench-echo.status"
	echoSub, err := side.Subscribe(echoSubject, func(m *nats.Msg) { m.Respond(m.Data) })
	if err != nil {
		b.Fatal(err)
	}
	defer echoSub.Unsubscribe()
	ar := admitReq("job-bench", 10, 100)
	ar.Profile = profile
	if byRef { // the profile travels once, to the object store
		if ar.ProfileRef, err = bus.NewClient(side).PutProfile(context.Background(), profile); err != nil {
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
	// Echo and decision alternate, so that both see the same machine
	// (other load, GC, scheduling); every round trip of every iteration
	// counts.
	var echo, quote []float64
	timed := func(subject string) float64 {
		t0 := time.Now()
		call(subject, req) // the same bytes both ways
		return float64(time.Since(t0).Nanoseconds()) / 1000
	}
	for b.Loop() {
		for range 200 {
			echo = append(echo, timed(echoSubject))
			quote = append(quote, timed("colocd.v1.quote"))
		}
	}
	mean := func(xs []float64) float64 {
		var s float64
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	eMean, qMean := mean(echo), mean(quote)
	slices.Sort(echo)
	slices.Sort(quote)
	q := func(xs []float64, p float64) float64 { return xs[int(p*float64(len(xs)-1))] }
	b.ReportMetric(q(echo, 0.5), "echo-p50-µs")
	b.ReportMetric(q(quote, 0.5), "decision-p50-µs")
	b.ReportMetric(q(quote, 0.99), "decision-p99-µs")
	b.ReportMetric(q(quote, 0.5)/q(echo, 0.5), "decision/echo-p50")
	b.ReportMetric(qMean/eMean, "decision/echo")
}
