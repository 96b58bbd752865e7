package bus

import (
	"testing"

	"github.com/nats-io/nats.go"
)

func TestHeaderCarrier(t *testing.T) {
	t.Parallel()
	h := nats.Header{"Traceparent": {"00-old"}, "Other": {"x"}}
	c := HeaderCarrier(h)
	if got := c.Get("traceparent"); got != "00-old" {
		t.Errorf("Get across case = %q", got)
	}
	c.Set("TraceParent", "00-new")
	if _, ok := h["Traceparent"]; ok {
		t.Error("Set kept the old-case key")
	}
	if got := h["traceparent"]; len(got) != 1 || got[0] != "00-new" {
		t.Errorf("Set stored %v under traceparent", got)
	}
	if got := c.Get("TRACEPARENT"); got != "00-new" {
		t.Errorf("Get = %q", got)
	}
	if got := c.Get("missing"); got != "" {
		t.Errorf("Get(missing) = %q", got)
	}
	if n := len(c.Keys()); n != 2 {
		t.Errorf("Keys = %v", c.Keys())
	}
}
