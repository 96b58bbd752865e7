package v1_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/jsontest"
	"github.com/colocd/colocd/internal/wiretest"
	"github.com/google/go-cmp/cmp"
)

func TestDecodeAdmitRequest(t *testing.T) {
	t.Parallel()
	got, err := v1.DecodeAdmitRequest([]byte(wiretest.AdmitExample))
	if err != nil {
		t.Fatal(err)
	}
	want := &v1.AdmitRequest{
		RequestID: "7f9c1e2a-launch-42",
		Job:       v1.Job{ID: "resnet50-ft-42", Owner: "vision-team", Priority: 1},
		MemoryMiB: 12000, Processes: 1,
		Compute:      v1.Compute{MinPct: 10, MaxPct: 40},
		LeaseSeconds: 900, Checkpointable: true,
	}
	var profile map[string]any
	if err := json.Unmarshal(got.Profile, &profile); err != nil || profile["name"] != "resnet50-train" {
		t.Errorf("profile passed through as %s (%v)", got.Profile, err)
	}
	got.Profile = nil
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(v1.AdmitRequest{})); diff != "" {
		t.Errorf("decoded admit request (-want +got):\n%s", diff)
	}
	// "profile": null, as Python and JavaScript clients write it, is no profile.
	ref := v1.ProfileRef([]byte("p"))
	byRef, err := v1.DecodeAdmitRequest([]byte(`{"profile": null, "profile_ref": "` + ref + `"}`))
	if err != nil || byRef.Profile != nil || byRef.ProfileRef != ref {
		t.Errorf("profile null: %+v, %v", byRef, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		decode func([]byte) error
		body   string
		want   string
	}{
		{"admit wrong type nested", admit, `{"compute":{"min_pct":"10"}}`, `invalid admit request: compute.min_pct: want a whole number, got the string "10"`},
		{"admit fraction", admit, `{"memory_mib":1.5}`, `memory_mib: want a whole number, got the number 1.5`},
		{"admit unknown", admit, `{"request_id":"r","extra":1}`, `invalid admit request: extra: want a known key, got an unknown key`},
		{"admit unknown nested", admit, `{"job":{"name":"x"}}`, `job.name: want a known key`},
		{"admit bool", admit, `{"checkpointable":"yes"}`, `checkpointable: want true or false, got the string "yes"`},
		{"admit trailing", admit, `{} {}`, "more data after it"},
		{"admit null", admit, `null`, "must be a JSON object"},
		{"admit empty", admit, "  \n", "want a JSON document, got nothing"},
		{"admit truncated", admit, `{"job":{`, "job: want valid JSON: a key in double quotes, got the end of the document (cut off)"},
		{"lease ref wrong type", leaseRef, `{"lease_id":7}`, `invalid lease request: lease_id: want a string, got the number 7`},
		{"register pids object", register, `{"pids":{"a":1}}`, `pids: want an array, got an object`},
		{"admit key in another case", admit, `{"MEMORY_MIB":1}`, `MEMORY_MIB: want the key "memory_mib" (keys are case-sensitive)`},
		{"admit key twice", admit, `{"memory_mib":1,"memory_mib":2}`, `memory_mib: want each key once per object, got it again`},
		{"register pid too large", register, `{"pids":[1e30]}`, `pids[0]: want a whole number`},
		// The shape the wire alone says (CheckShape), checked where it is decoded.
		{"admit neither profile", admit, `{"request_id":"r"}`, `profile: want an inline colocd.profile/v1 training profile, or a profile_ref`},
		{"admit both profiles", admit, `{"profile":{"kind":"training"},"profile_ref":"` + v1.ProfileRef([]byte("p")) + `"}`, `profile, profile_ref: want one of the two, got both`},
		{"admit bad profile ref", admit, `{"profile_ref":"md5:00"}`, `profile_ref: want "sha256:" and 64 lower-case hex digits, got "md5:00"`},
		{"admit bad token digest", admit, `{"profile":{"kind":"training"},"token_sha256":"ABC"}`, `token_sha256: want 64 lower-case hex digits`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode([]byte(tt.body))
			if err == nil {
				t.Fatal("decoded without error")
			}
			if v1.CodeOf(err) != v1.CodeBadRequest {
				t.Errorf("code %d, want 400", v1.CodeOf(err))
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func admit(b []byte) error    { _, err := v1.DecodeAdmitRequest(b); return err }
func leaseRef(b []byte) error { _, err := v1.DecodeLeaseRef(b); return err }
func register(b []byte) error { _, err := v1.DecodeRegisterRequest(b); return err }

func TestDecodeEventIgnoresNewFields(t *testing.T) {
	t.Parallel()
	ev, err := v1.DecodeEvent([]byte(`{"type":"throttle","lease_id":"l-1","job_id":"j","active_thread_pct":20,
		"deadline":"2026-03-01T12:05:00Z","reason":"bert p99 rose","time":"2026-03-01T12:00:00Z","new_field":true}`))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Date(2026, 3, 1, 12, 5, 0, 0, time.UTC)
	want := &v1.Event{Type: v1.EventThrottle, LeaseID: "l-1", JobID: "j", ActiveThreadPct: 20, Deadline: &deadline,
		Reason: "bert p99 rose", Time: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Errorf("decoded event (-want +got):\n%s", diff)
	}
}

// The JSON keys are the contract of DESIGN.md; a renamed field fails here.
func TestWireKeys(t *testing.T) {
	t.Parallel()
	deadline := wiretest.Expiry
	tests := []struct {
		name string
		v    any
		want []string
	}{
		{"admit", wiretest.AdmitRequest(), []string{"request_id", "job", "profile", "memory_mib", "processes", "compute", "lease_seconds", "checkpointable"}},
		{"job", v1.Job{}, []string{"id", "owner", "priority"}},
		{"compute", v1.Compute{}, []string{"min_pct", "max_pct"}},
		{"decision", wiretest.Decision(), []string{"decision", "reason", "predictions", "lease", "sidecar"}},
		{"decision without lease", v1.Decision{}, []string{"decision", "reason", "predictions", "sidecar"}},
		{"reason", v1.Reason{}, []string{"code", "message"}},
		{"prediction", v1.ServicePrediction{}, []string{"service", "rate_rps", "slo_p99_ms", "solo_p99_ms", "predicted_p99_ms"}},
		{"prediction corrected", v1.ServicePrediction{Correction: 1.5}, []string{"service", "rate_rps", "slo_p99_ms", "solo_p99_ms", "predicted_p99_ms", "correction"}},
		{"lease: its token is never encoded", v1.Lease{Token: "t", PIDs: []int{1}}, []string{"id", "job_id", "owner", "expires_at", "active_thread_pct", "pinned_mem_limit_mib", "env", "pids"}},
		{"lease without pids", v1.Lease{}, []string{"id", "job_id", "owner", "expires_at", "active_thread_pct", "pinned_mem_limit_mib", "env"}},
		{"lease with the mps server's user", v1.Lease{MPSServerUID: new(int)}, []string{"id", "job_id", "owner", "expires_at", "active_thread_pct", "pinned_mem_limit_mib", "env", "mps_server_uid"}},
		{"lease ref", v1.LeaseRef{}, []string{"lease_id", "token"}},
		{"register", v1.RegisterRequest{}, []string{"lease_id", "token", "pids"}},
		{"status", v1.Status{}, []string{"sidecar", "gpu", "mode", "ready", "health", "services", "leases"}},
		{"status in mps mode", v1.Status{MPS: &v1.MPSStatus{}}, []string{"sidecar", "gpu", "mode", "ready", "health", "services", "leases", "mps"}},
		{"mps", v1.MPSStatus{}, []string{"servers"}},
		{"mps server", v1.MPSServer{UID: new(int)}, []string{"pid", "uid", "state"}},
		{"mps server of unknown user", v1.MPSServer{}, []string{"pid", "state"}},
		{"service status", v1.ServiceStatus{}, []string{"name", "rate_rps", "slo_p99_ms", "predicted_p99_ms", "predicted_at_rps", "guard"}},
		{"service status observed", v1.ServiceStatus{Observed: &v1.ObservedStatus{}, Correction: 1.5}, []string{"name", "rate_rps", "slo_p99_ms", "predicted_p99_ms", "predicted_at_rps", "correction", "guard", "observed"}},
		{"observed", v1.ObservedStatus{}, []string{"state", "reason", "age_s", "window_s", "rate_rps", "forecast_rps", "mean_ms", "p99_ms"}},
		{"event", v1.Event{ActiveThreadPct: 1, Deadline: &deadline, Env: map[string]string{"A": "1"}}, []string{"type", "lease_id", "job_id", "active_thread_pct", "deadline", "env", "reason", "time"}},
		{"event minimal", v1.Event{}, []string{"type", "lease_id", "job_id", "reason", "time"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := jsontest.RoundTrip[map[string]json.RawMessage](t, tt.v)
			var got []string
			for k := range m {
				got = append(got, k)
			}
			if !sameSet(got, tt.want) {
				t.Errorf("keys %v, want %v", got, tt.want)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]bool{}
	for _, s := range a {
		seen[s] = true
	}
	for _, s := range b {
		if !seen[s] {
			return false
		}
	}
	return true
}
