package launch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/internal/natstest"
)

// TestSendProfileFallsBackInline: with no JetStream to hold the profile,
// auto sends it inline and says why; ref fails with the reason.
func TestSendProfileFallsBackInline(t *testing.T) {
	ns := natstest.Start(t, &server.Options{Host: "127.0.0.1", Port: -1}) // JetStream off
	c := bus.NewClient(natstest.Connect(t, ns), bus.WithTimeout(2*time.Second))
	big := json.RawMessage(`{"pad":"` + strings.Repeat("x", RefAbove(c)) + `"}`)
	req := &v1.AdmitRequest{Profile: big}
	var warn strings.Builder
	if err := SendProfile(context.Background(), c, "", req, SendAuto, &warn); err != nil {
		t.Fatalf("auto: %v", err)
	}
	if string(req.Profile) != string(big) || req.ProfileRef != "" || !strings.Contains(warn.String(), "sending the profile inline") {
		t.Errorf("auto without JetStream: ref %q, warning %q", req.ProfileRef, warn.String())
	}
	if err := SendProfile(context.Background(), c, "", req, SendRef, &warn); err == nil || !strings.Contains(err.Error(), "--send-profile ref") {
		t.Errorf("ref without JetStream: %v", err)
	}
	small := &v1.AdmitRequest{Profile: json.RawMessage(`{}`)}
	if err := SendProfile(context.Background(), c, "", small, SendAuto, &warn); err != nil || small.ProfileRef != "" {
		t.Errorf("a small profile goes inline without asking the store: %v %q", err, small.ProfileRef)
	}
}
