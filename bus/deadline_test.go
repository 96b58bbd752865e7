package bus

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"
	"github.com/colocd/colocd/internal/wiretest"

	"github.com/nats-io/nats.go"
)

// TestCallerDeadlineTravels: the client sends how long it waits
// (TimeoutHeader), and the handler's context ends no later than that after
// the request arrived; a quote sends its wait.
func TestCallerDeadlineTravels(t *testing.T) {
	t.Parallel()
	e, h := servedFake(t)
	c := NewClient(connect(t, e))

	tests := []struct {
		name   string
		method string
		call   func(ctx context.Context) error
		wait   time.Duration // what the caller waits
	}{
		{"admit with the context's deadline", "admit", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			_, err := c.Admit(ctx, "gpu-a", wiretest.AdmitRequest())
			return err
		}, 3 * time.Second},
		{"renew with the client's default timeout", "renew", func(ctx context.Context) error {
			_, err := NewClient(connect(t, e), WithTimeout(7*time.Second)).Renew(context.Background(), "gpu-a", &v1.LeaseRef{LeaseID: "l-1", Token: "t"})
			return err
		}, 7 * time.Second},
		{"quote with its wait", "quote", func(ctx context.Context) error {
			_, err := c.Quote(ctx, wiretest.AdmitRequest(), 2*time.Second)
			return err
		}, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sent := time.Now()
			if err := tt.call(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			answered := time.Now()
			_, hctx := h.last(tt.method)
			d, ok := hctx.Deadline()
			if !ok {
				t.Fatal("the handler's context has no deadline")
			}
			// It arrived between the send and the answer, with at most
			// the wait left.
			if d.After(answered.Add(tt.wait)) || d.Before(sent.Add(tt.wait-time.Second)) {
				t.Errorf("handler deadline %s after the send, want about %s", d.Sub(sent), tt.wait)
			}
		})
	}
}

// TestNoTimeoutHeaderNoDeadline: a request without the header (nats req)
// gets a context without a deadline; the sidecar's cap applies.
func TestNoTimeoutHeaderNoDeadline(t *testing.T) {
	t.Parallel()
	e, h := servedFake(t)
	nc := connect(t, e)
	if _, err := nc.Request(v1.EndpointSubject("gpu-a", v1.EndpointStatus), []byte(`{}`), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	_, hctx := h.last("status")
	if d, ok := hctx.Deadline(); ok {
		t.Errorf("deadline %s without a header", d)
	}
}

func TestBadTimeoutHeaderIsABadRequest(t *testing.T) {
	t.Parallel()
	e, h := servedFake(t)
	nc := connect(t, e)
	for _, v := range []string{"soon", "0", "-5", "1.5", "3600001", "99999999999999999999"} {
		t.Run(v, func(t *testing.T) {
			msg := nats.NewMsg(v1.EndpointSubject("gpu-a", v1.EndpointRenew))
			msg.Data = []byte(`{"lease_id":"l-1","token":"t"}`)
			msg.Header.Set(TimeoutHeader, v)
			m, err := nc.RequestMsg(msg, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			be := responseError(m)
			if be == nil || be.Code != v1.CodeBadRequest || !strings.Contains(be.Description, TimeoutHeader) {
				t.Errorf("got %v, want a 400 naming %s", be, TimeoutHeader)
			}
		})
	}
	if req, _ := h.last("renew"); req != nil {
		t.Errorf("handler was called with %+v", req)
	}
}
