package bus

import (
	"context"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/colocd/colocd/internal/wiretest"

	"github.com/nats-io/nats.go"
)

// The two benchmarks run in one process against the same kind of server so
// that the admit round trip (client → micro service → handler → client)
// can be compared with a bare NATS request/reply echo.

func reportMicros(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/op")
}

func BenchmarkEchoRoundTrip(b *testing.B) {
	e := startServer(b)
	srv := connect(b, e)
	if _, err := srv.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
		b.Fatal(err)
	}
	// The subscription must reach the server before the other connection
	// asks, or the first request finds no responder.
	if err := srv.Flush(); err != nil {
		b.Fatal(err)
	}
	nc := connect(b, e)
	body := []byte(wiretest.AdmitExample)
	for b.Loop() {
		if _, err := nc.Request("bench.echo", body, 5*time.Second); err != nil {
			b.Fatal(err)
		}
	}
	reportMicros(b)
}

// trivial decides instantly.
type trivial struct{ *fakeHandler }

func (trivial) Admit(context.Context, *v1.AdmitRequest) (*v1.Decision, error) {
	return wiretest.Decision(), nil
}

func BenchmarkAdmitRoundTrip(b *testing.B) {
	e := startServer(b)
	serve(b, e, "gpu-a", trivial{newFakeHandler()})
	c := NewClient(connect(b, e))
	req := wiretest.AdmitRequest()
	ctx := context.Background()
	for b.Loop() {
		if _, err := c.Admit(ctx, "gpu-a", req); err != nil {
			b.Fatal(err)
		}
	}
	reportMicros(b)
}
