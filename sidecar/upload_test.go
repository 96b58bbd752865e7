package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats.go"
)

// bigTrainingProfile is the V100 training step with its kernels repeated
// until the profile is larger than a NATS message may be: a real job of
// many steps' worth of kernels.
func bigTrainingProfile(t *testing.T, over int) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(trainJSON, &p); err != nil {
		t.Fatal(err)
	}
	ops := p["ops"].([]any)
	all := ops
	for {
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) > over {
			return raw
		}
		all = append(all, ops...)
		p["ops"] = all
	}
}

// TestProfileUploadThroughTheSidecar: a launcher, which may not write the
// profile store, adds a profile larger than one message through the
// sidecar and admits with its reference; what it uploads must be a valid
// training profile, and nothing else reaches the store.
func TestProfileUploadThroughTheSidecar(t *testing.T) {
	t.Parallel()
	s := start(t, testConfig(t, "", 1e6), Options{})
	c := client(t, s)
	ctx := context.Background()
	nc := launcherConn(t, s)
	big := bigTrainingProfile(t, int(nc.MaxPayload())+1)

	// A launcher cannot put the profile in the store itself (the server
	// refuses its JetStream API call, which then times out).
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := c.PutProfile(short, big); err == nil {
		t.Fatal("a launcher wrote the profile store directly")
	}
	// Inline, it does not fit in a message.
	inline := admitReq("job-inline-big", 10, 100)
	inline.Profile = big
	if _, err := c.Admit(ctx, s.ID(), inline); !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("inline admit of %d bytes: %v, want %v", len(big), err, nats.ErrMaxPayload)
	}

	ref, err := c.UploadProfile(ctx, s.ID(), big)
	if err != nil {
		t.Fatal(err)
	}
	if ref != v1.ProfileRef(big) {
		t.Fatalf("ref %s, want %s", ref, v1.ProfileRef(big))
	}
	stored, err := s.profs.Get(ctx, ref)
	if err != nil || !bytes.Equal(stored, big) {
		t.Fatalf("the store holds %d bytes, %v; want the %d uploaded", len(stored), err, len(big))
	}
	again, err := c.UploadProfile(ctx, s.ID(), big)
	if err != nil || again != ref {
		t.Fatalf("a second upload: %q, %v", again, err)
	}
	r := admitReq("job-uploaded", 10, 100)
	r.Profile, r.ProfileRef = nil, ref
	leased(ctx, t, c, s.ID(), r)

	infer, err := os.ReadFile(serviceProfile)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		raw    []byte
		phrase string
	}{
		{"not JSON", []byte("#!/bin/sh\nrm -rf /\n"), "profile upload: "},
		{"not a profile", []byte(`{"format": "colocd.profile/v1"}`), "profile upload: "},
		{"an inference profile", infer, `kind: want "training"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.UploadProfile(ctx, s.ID(), tt.raw)
			if v1.CodeOf(err) != v1.CodeBadRequest || !strings.Contains(err.Error(), tt.phrase) {
				t.Fatalf("got %v (code %d), want a 400 with %q", err, v1.CodeOf(err), tt.phrase)
			}
			if ok, err := s.profs.Has(ctx, v1.ProfileRef(tt.raw)); ok || err != nil {
				t.Errorf("the refused upload is in the store (%v, %v)", ok, err)
			}
		})
	}
}
