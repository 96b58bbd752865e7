package launch

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/fleet"
)

// A quote's joint allocation is printed under its row: each live job's
// percentage and speed now and after, the job's own, and the weighted
// throughput. A job id from the wire loses its control characters.
func TestWriteJointCost(t *testing.T) {
	var b strings.Builder
	WriteJointCost(&b, &v1.Joint{Prices: v1.JointPrices{SLO: 1.39}, WeightedThroughput: 2.163, WeightedThroughputBefore: 0.789,
		Jobs: []v1.JointJob{
			{JobID: "job-a\x1b[2J", LeaseID: "L1", Weight: 1, Pct: 10, WasPct: 100, Throughput: 0.07, WasThroughput: 0.79},
			{JobID: "job-b", Weight: 3, Pct: 90, Throughput: 0.7},
		}})
	want := "\t\t  job job-a[2J: 100 % → 10 %, 79 % → 7 % of its solo speed (weight 1)\n" +
		"\t\t  this job: 90 %, 70 % of its solo speed (weight 3)\n" +
		"\t\t  weighted throughput: 0.789 → 2.163 (SLO slack priced at 1.39)\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	b.Reset()
	WriteJointCost(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no joint allocation printed %q", b.String())
	}
}

// A renew tells a script holding a lease by hand of a revoke, and of a
// percentage other than the one its processes started at; a lent instance
// or an unknown start says nothing.
func TestRenewNotice(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    v1.Lease
		was  string
		want string
	}{
		{"revoked", v1.Lease{ID: "L1", State: "revoked"}, "", "lease L1 is revoked: stop its processes by the deadline of its event"},
		{"throttled", v1.Lease{ID: "L1", ActiveThreadPct: 20}, "50", "lease L1 is now at 20 % (the job's processes started at 50 %)"},
		{"same", v1.Lease{ID: "L1", ActiveThreadPct: 50}, "50", ""},
		{"lent instance", v1.Lease{ID: "L1", ActiveThreadPct: 100, Instance: &v1.Instance{}}, "50", ""},
		{"unknown start", v1.Lease{ID: "L1", ActiveThreadPct: 20}, "", ""},
	} {
		var b strings.Builder
		RenewNotice(&b, &tc.l, tc.was)
		if (tc.want == "") != (b.Len() == 0) || !strings.Contains(b.String(), tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, b.String(), tc.want)
		}
	}
}

// A quote's table has a row per sidecar, words from the wire on one line,
// and the joint cost under a row that has one.
func TestWriteQuotes(t *testing.T) {
	var b strings.Builder
	err := WriteQuotes(&b, []*v1.Decision{
		{Sidecar: "gpu-a", Decision: v1.DecisionGrant, Reason: v1.Reason{Message: "fits\nrm -rf"}},
		{Sidecar: "gpu-b", Decision: v1.DecisionDeny, Reason: v1.Reason{Message: "max jobs"},
			Joint: &v1.Joint{Jobs: []v1.JointJob{{JobID: "j", Weight: 1, Pct: 50, Throughput: 0.5}}}},
	})
	want := "sidecar  decision  reason\n" +
		"gpu-a    grant     fitsrm -rf\n" +
		"gpu-b    deny      max jobs\n" +
		"                     this job: 50 %, 50 % of its solo speed (weight 1)\n" +
		"                     weighted throughput: 0.000 → 0.000 (SLO slack priced at 0)\n"
	if got := b.String(); err != nil || got != want {
		t.Errorf("got\n%q\nwant\n%q (%v)", got, want, err)
	}
}

func TestPlacedLineAndNoOffer(t *testing.T) {
	p := &fleet.Placement{Sidecar: "gpu\n-b", Summaries: 5, Candidates: make([]string, 3), Quotes: make([]*v1.Decision, 2), Tried: []string{"gpu-a", "gpu-b"}}
	want := "# placed on gpu-b: 5 sidecars summarised, 3 could take it, 2 quoted, admitted at the second tried"
	if got := PlacedLine(p); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !NoOffer(fmt.Errorf("place: %w", fleet.ErrEveryOfferLost)) || !NoOffer(v1.ErrNoSidecar) || NoOffer(errors.New("timeout")) {
		t.Error("NoOffer: want every offer lost and no sidecar, and nothing else")
	}
}

// colocd status names the user each MPS server serves: a job must run as
// it.
func TestWriteStatusShowsTheMPSUser(t *testing.T) {
	uid := 10001
	tests := []struct {
		name string
		mps  *v1.MPSStatus
		want string // "" : no mps line
	}{
		{name: "time slicing", mps: nil},
		{name: "no server", mps: &v1.MPSStatus{Servers: []v1.MPSServer{}}, want: "mps: no server runs (the first CUDA client's user gets one)\n"},
		{name: "one server", mps: &v1.MPSStatus{Servers: []v1.MPSServer{{PID: 5012, UID: &uid, State: "ACTIVE"}}}, want: "mps: server 5012 serves uid 10001 (ACTIVE)\n"},
		{name: "user unknown", mps: &v1.MPSStatus{Servers: []v1.MPSServer{{PID: 5012, State: "ACTIVE"}}}, want: "mps: server 5012 serves user unknown (ACTIVE)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteStatus(&b, &v1.Status{Sidecar: "gpu-0", Ready: true, MPS: tt.mps}); err != nil {
				t.Fatal(err)
			}
			_, line, _ := strings.Cut(b.String(), "\nmps: ")
			got := ""
			if line != "" || strings.Contains(b.String(), "\nmps: ") {
				got = "mps: " + line[:strings.IndexByte(line, '\n')+1]
			}
			if got != tt.want {
				t.Errorf("mps line %q, want %q in:\n%s", got, tt.want, b.String())
			}
		})
	}
}

func TestWriteStatusShowsTheLearnedResponse(t *testing.T) {
	var b strings.Builder
	st := &v1.Status{Sidecar: "gpu-a", Services: []v1.ServiceStatus{{Name: "chat", Response: []v1.ResponsePoint{
		{Trainer: "v100-train", Pct: 20, Ratio: 1.1, Windows: 6}, {Trainer: "v100-train", Pct: 30, Ratio: 1.254, Windows: 2}}}}}
	if err := WriteStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	want := "learned beside chat: v100-train at 20 %: ×1.10 (6 windows); v100-train at 30 %: ×1.25 (2 windows)\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("status:\n%s\nwant the line %q", b.String(), want)
	}
}
