package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/fleet"
	"github.com/colocd/colocd/internal/termtext"
)

// What the launcher commands (colocd admit, quote, status, watch, run)
// show a person of a sidecar's answers; every word from the wire goes
// through termtext.

// RetryHint tells w how to retry req at sidecar when err says no answer
// came: the sidecar may hold a lease, which only the same request_id and
// token get back (a new admit would take a second one).
func RetryHint(w io.Writer, sidecar string, req *v1.AdmitRequest, err error) {
	if !errors.Is(err, v1.ErrNoAnswer) || sidecar == "" {
		return
	}
	fmt.Fprintf(w, "colocd: no answer from %s: it may hold a lease for job %s. Get that decision with colocd admit, the same job flags, and\n"+
		"  --sidecar %s --request-id %s --token %s\n"+
		"or let the lease expire. An admit without them may take a second lease.\n",
		sidecar, req.Job.ID, sidecar, req.RequestID, req.Token())
}

// WriteJointCost prints, under a quote's row, what a joint allocation
// gives each job: the live leases' percentages and speeds now and after,
// then the job's own.
func WriteJointCost(w io.Writer, j *v1.Joint) {
	if j == nil {
		return
	}
	for _, job := range j.Jobs {
		if job.LeaseID == "" {
			fmt.Fprintf(w, "\t\t  this job: %d %%, %.0f %% of its solo speed (weight %g)\n", job.Pct, 100*job.Throughput, job.Weight)
			continue
		}
		fmt.Fprintf(w, "\t\t  job %s: %d %% → %d %%, %.0f %% → %.0f %% of its solo speed (weight %g)\n",
			termtext.Line(job.JobID), job.WasPct, job.Pct, 100*job.WasThroughput, 100*job.Throughput, job.Weight)
	}
	fmt.Fprintf(w, "\t\t  weighted throughput: %.3f → %.3f (SLO slack priced at %.3g)\n", j.WeightedThroughputBefore, j.WeightedThroughput, j.Prices.SLO)
}

// WriteStatus writes a sidecar's status for a person: its GPU, health and
// any rejected configuration, a table of its services (predicted beside
// observed) and one of its leases.
func WriteStatus(w io.Writer, st *v1.Status) error {
	ready := "ready"
	if !st.Ready {
		ready = "NOT READY"
	}
	fmt.Fprintf(w, "sidecar %s (%s, mode %s): %s\n", termtext.Line(st.Sidecar), termtext.Line(st.GPU.Name), termtext.Line(st.Mode), ready)
	fmt.Fprintf(w, "gpu %s: %d of %d MiB free\n", termtext.Line(st.GPU.UUID), st.GPU.MemoryFreeMiB, st.GPU.MemoryTotalMiB)
	if r := st.ConfigRejected; r != nil {
		fmt.Fprintf(w, "config: the edit at %s was rejected, the configuration before it is in force: %s\n", r.At.Format(time.RFC3339), termtext.Line(r.Error))
	}
	if m := st.MPS; m != nil {
		fmt.Fprintln(w, mpsLine(m))
	}
	if d := st.Draining; d != nil {
		line := "DRAINED by the operator since " + d.Since.Format(time.RFC3339) + ": admits are denied until colocd undrain"
		if d.Reason != "" {
			line += " (" + termtext.Line(d.Reason) + ")"
		}
		fmt.Fprintln(w, line)
	}
	names := make([]string, 0, len(st.Health))
	for n := range st.Health {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %s: %s\n", termtext.Line(n), termtext.Line(st.Health[n]))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "service\trate req/s\tSLO p99 ms\tpredicted p99 ms\tup to ms\tat req/s\tobserved req/s\tobserved p99 ms\tmetrics\tguard")
	for _, s := range st.Services {
		orate, op99, state := "—", "—", "not configured"
		if o := s.Observed; o != nil {
			orate, op99, state = termtext.Num(o.RateRPS), termtext.Num(o.P99MS), termtext.Line(o.State)
		}
		guard := termtext.Line(s.Guard)
		if s.Correction > 1 {
			guard += fmt.Sprintf(" ×%.2f", s.Correction)
		}
		upper := "—"
		if s.PredictedP99UpperMS > 0 {
			upper = fmt.Sprintf("%.2f", s.PredictedP99UpperMS)
		}
		name := termtext.Line(s.Name)
		if s.SLOMetric == "step" { // an LLM engine: steps/s and step latencies
			name += " (steps)"
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%s\t%.2f\t%s\t%s\t%s\t%s\n", name, s.RateRPS, s.SLOP99MS, s.PredictedP99MS,
			upper, s.PredictedAtRPS, orate, op99, state, guard)
	}
	tw.Flush()
	for _, s := range st.Services {
		if len(s.Response) == 0 {
			continue
		}
		var at []string
		for _, p := range s.Response {
			at = append(at, fmt.Sprintf("%s at %d %%: ×%.2f (%d windows)", termtext.Line(p.Trainer), p.Pct, p.Ratio, p.Windows))
		}
		fmt.Fprintf(w, "learned beside %s: %s\n", termtext.Line(s.Name), strings.Join(at, "; "))
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "lease\tjob\towner\tpct\tstate\texpires\tpids\ton")
	for _, l := range st.Leases {
		on, pct := "shared", strconv.Itoa(l.ActiveThreadPct)
		if l.Instance != nil {
			on, pct = "MIG "+termtext.Line(l.Instance.Profile)+" "+termtext.Line(l.Instance.UUID)+" (whole)", "—"
		}
		state := termtext.Line(l.State)
		if l.Deadline != nil {
			state += " until " + l.Deadline.Format(time.TimeOnly)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%v\t%s\n", termtext.Line(l.ID), termtext.Line(l.JobID), termtext.Line(l.Owner), pct, state, l.ExpiresAt.Format(time.RFC3339), l.PIDs, on)
	}
	return tw.Flush()
}

// mpsLine names the MPS servers and the user each serves: a job must run
// as that user, or it waits at CUDA init (docs/mps.md#one-user).
func mpsLine(m *v1.MPSStatus) string {
	if len(m.Servers) == 0 {
		return "mps: no server runs (the first CUDA client's user gets one)"
	}
	parts := make([]string, 0, len(m.Servers))
	for _, sv := range m.Servers {
		user := "user unknown"
		if sv.UID != nil {
			user = fmt.Sprintf("uid %d", *sv.UID)
		}
		parts = append(parts, fmt.Sprintf("server %d serves %s (%s)", sv.PID, user, termtext.Line(sv.State)))
	}
	return "mps: " + strings.Join(parts, "; ")
}

// EventLine is an event as one line for a person.
func EventLine(rec bus.EventRecord) string {
	ev := rec.Event
	s := fmt.Sprintf("%s  seq %d  %s  job %s  lease %s", ev.Time.Format(time.RFC3339), rec.Seq, ev.Type, termtext.Line(ev.JobID), termtext.Line(ev.LeaseID))
	if ev.ActiveThreadPct > 0 {
		s += fmt.Sprintf("  to %d %%", ev.ActiveThreadPct)
	}
	if ev.Deadline != nil {
		s += "  deadline " + ev.Deadline.Format(time.RFC3339)
	}
	return s + "  " + termtext.Line(ev.Reason)
}

// NewAdmitter asks for a lease once per call: at the sidecar, or placed on
// the fleet. The first call sends the request as the flags made it; each
// later one is a new request (a deny is remembered under its id). A request
// that got no answer is sent again as it was, so that a lease the sidecar
// granted comes back instead of a second one.
func NewAdmitter(c *bus.Client, base *v1.AdmitRequest, sidecar string, place bool, po fleet.PlaceOptions) Admitter {
	calls := 0
	return func(ctx context.Context) (*Grant, error) {
		req := *base
		req.TokenSHA256 = ""
		if calls > 0 {
			req.RequestID = ""
		}
		calls++
		for try := 1; ; try++ {
			var g Grant
			var err error
			if place {
				var p *fleet.Placement
				p, err = fleet.Place(ctx, c, &req, po)
				if p != nil {
					g = Grant{Sidecar: p.Sidecar, Decision: p.Decision}
				}
			} else {
				g.Sidecar = sidecar
				g.Decision, err = c.Admit(ctx, sidecar, &req)
			}
			if errors.Is(err, v1.ErrNoAnswer) && try < 3 && ctx.Err() == nil {
				continue
			}
			return &g, err
		}
	}
}

// RenewNotice tells w what a renewed lease l asks of a script that holds it
// by hand, where a renew is how it sees a throttle or a revoke it missed:
// stop its processes, or restart them at l's percentage when they started
// at was (the percentage admit exported; "" when unknown).
func RenewNotice(w io.Writer, l *v1.Lease, was string) {
	switch {
	case l.State == "revoked":
		fmt.Fprintf(w, "colocd: lease %s is revoked: stop its processes by %s\n", l.ID, deadlineOf(l))
	case was != "" && l.Instance == nil && was != strconv.Itoa(l.ActiveThreadPct):
		fmt.Fprintf(w, "colocd: lease %s is now at %d %% (the job's processes started at %s %%): restart them with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d and register them by %s, or use colocd run, which does\n",
			l.ID, l.ActiveThreadPct, termtext.Line(was), l.ActiveThreadPct, deadlineOf(l))
	}
}

// deadlineOf is a lease's deadline for a person, or "its next deadline".
func deadlineOf(l *v1.Lease) string {
	if l.Deadline == nil {
		return "the deadline of its event"
	}
	return l.Deadline.Format(time.RFC3339)
}

// Quote asks every sidecar what it would decide for req, without a lease:
// every live sidecar's capacity summary says how many answers to expect,
// so that the quote ends when they are in, not at wait. The decisions come
// in sidecar order.
func Quote(ctx context.Context, c *bus.Client, req *v1.AdmitRequest, wait time.Duration) ([]*v1.Decision, error) {
	var expect []string
	rctx, cancel := context.WithTimeout(ctx, wait)
	if caps, _, err := c.Capacities(rctx); err == nil {
		for _, cp := range caps {
			expect = append(expect, cp.Sidecar)
		}
	}
	cancel()
	ds, err := c.QuoteExpect(ctx, req, wait, expect)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ds, func(a, b *v1.Decision) int { return strings.Compare(a.Sidecar, b.Sidecar) })
	return ds, nil
}

// WriteQuotes writes a quote's decisions as a table, each with the cost
// of its joint allocation under its row.
func WriteQuotes(w io.Writer, ds []*v1.Decision) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "sidecar\tdecision\treason")
	for _, d := range ds {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", termtext.Line(d.Sidecar), termtext.Line(d.Decision), termtext.Line(d.Reason.Message))
		WriteJointCost(tw, d.Joint)
	}
	return tw.Flush()
}

// NoOffer reports whether a placement's error means no GPU would take the
// job (no candidate, no quote that grants, every offer lost), not a
// failure.
func NoOffer(err error) bool {
	return errors.Is(err, v1.ErrNoSidecar) || errors.Is(err, fleet.ErrEveryOfferLost) || errors.Is(err, fleet.ErrEveryQuoteDenied)
}

// PlacedLine is the comment colocd place prints above admit's lines: where
// the job went and how the fleet was asked.
func PlacedLine(p *fleet.Placement) string {
	return fmt.Sprintf("# placed on %s: %d sidecars summarised, %d could take it, %d quoted, admitted at the %s tried",
		termtext.Line(p.Sidecar), p.Summaries, len(p.Candidates), len(p.Quotes), ordinal(len(p.Tried)))
}

func ordinal(n int) string {
	switch n {
	case 1:
		return "first"
	case 2:
		return "second"
	case 3:
		return "third"
	}
	return fmt.Sprintf("%dth", n)
}
