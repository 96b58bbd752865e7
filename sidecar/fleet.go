package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"reflect"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/fleet"
	"github.com/colocd/colocd/predictor"
	"github.com/nats-io/nats.go/jetstream"
)

// typicalTrainer is the built-in typical trainer of the capacity summary
// (fleet.typical_profile ""): one 100 ms iteration that keeps the GPU 90 %
// busy and its memory 40 %, in 16 GiB.
const typicalTrainer = `{"format": "colocd.profile/v1", "name": "typical-trainer", "kind": "training", "memory_mib": 16384,
 "summary": {"iteration_ms": 100, "gpu_util": 0.9, "mem_util": 0.4}}`

// fleetPublisher keeps the sidecar's capacity summary in the fleet's
// bucket: at start, at once after a change (poke), and on the heartbeat.
type fleetPublisher struct {
	s       *Sidecar
	open    func(context.Context) (*fleet.Capacities, error)
	caps    *fleet.Capacities // nil until open succeeds (a leaf whose hub is away)
	typical admission.Request
	poke    chan struct{}
	last    *fleet.Capacity // the last published, UpdatedAt aside
	sent    time.Time
}

// openFleet opens the capacity bucket and the typical trainer. A leaf
// node whose hub is out of reach starts without the bucket: it admits on
// its own and opens the bucket when the hub is back.
func (s *Sidecar) openFleet(ctx context.Context) error {
	f := s.cfg.Fleet
	js, replicas := s.js, s.replicas
	if d := s.hubDomain(); d != "" {
		var err error
		if js, err = jetstream.NewWithDomain(s.nc, d); err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
		replicas = s.cfg.NATS.Leaf.HubReplicas
	}
	pub := &fleetPublisher{s: s, poke: make(chan struct{}, 1),
		open: func(ctx context.Context) (*fleet.Capacities, error) {
			return fleet.OpenCapacities(ctx, js, replicas, f.TTL)
		}}
	if err := pub.ensureOpen(ctx); err != nil {
		if !s.isLeaf() {
			return fmt.Errorf("fleet: %w", err)
		}
		s.log.Warn("fleet: the hub's capacity bucket is out of reach: this host admits on its own and publishes its summary when the hub is back", "err", err)
	}
	var (
		prof *predictor.Profile
		err  error
	)
	if f.TypicalProfile == "" {
		prof, err = predictor.ParseProfile([]byte(typicalTrainer))
	} else {
		prof, err = predictor.LoadProfile(f.TypicalProfile)
	}
	if err != nil {
		return fmt.Errorf("fleet.typical_profile: %w", err)
	}
	mem := int(prof.MemoryMiB)
	if mem < 1 {
		mem = 16384
	}
	pub.typical = admission.Request{RequestID: "typical-trainer-of-the-fleet-summary", JobID: "typical", Profile: prof,
		MemoryMiB: mem, MinPct: 1, MaxPct: 100}
	s.fleet = pub
	return nil
}

// ensureOpen opens the capacity bucket unless it is open.
func (f *fleetPublisher) ensureOpen(ctx context.Context) error {
	if f.caps != nil {
		return nil
	}
	caps, err := f.open(ctx)
	if err != nil {
		return err
	}
	hb := f.s.cfg.Fleet.Heartbeat
	if ttl, err := caps.TTL(ctx); err == nil && ttl > 0 && ttl < 2*hb {
		f.s.log.Warn("fleet: the capacity bucket's ttl, set by the sidecar that created it, is under twice this sidecar's heartbeat: its summary will come and go",
			"ttl", ttl, "heartbeat", hb)
	}
	f.caps = caps
	return nil
}

// changed asks for a summary now (a lease or the config moved).
func (f *fleetPublisher) changed() {
	if f == nil {
		return
	}
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

// run publishes until ctx ends, then withdraws the summary (a clean stop:
// the sidecar takes no more jobs).
func (f *fleetPublisher) run(ctx context.Context) error {
	heartbeat := f.s.cfg.Fleet.Heartbeat
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	log := f.s.log.With("component", "fleet")
	f.publish(ctx, heartbeat, log)
	// Changes are coalesced: at most one summary per fleetMinGap, since
	// each costs a quote (cached predictions, unless the leases moved).
	gap := time.NewTimer(fleetMinGap)
	defer gap.Stop()
	waiting := false
	for {
		select {
		case <-ctx.Done():
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := f.ensureOpen(wctx); err != nil {
				log.Warn("withdraw the capacity summary", "err", err)
				return nil
			}
			if err := f.caps.Withdraw(wctx, f.s.id); err != nil {
				log.Warn("withdraw the capacity summary", "err", err)
			}
			return nil
		case <-f.poke:
			if wait := fleetMinGap - time.Since(f.sent); wait > 0 {
				if !waiting {
					gap.Reset(wait)
					waiting = true
				}
				continue
			}
		case <-gap.C:
			if !waiting {
				continue
			}
		case <-t.C:
		}
		waiting = false
		f.publish(ctx, heartbeat, log)
	}
}

// fleetMinGap is the least time between two summaries a change causes.
const fleetMinGap = time.Second

// publish writes the summary when it changed or the heartbeat is due.
func (f *fleetPublisher) publish(ctx context.Context, heartbeat time.Duration, log *slog.Logger) {
	c, err := f.summary(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("capacity summary", "err", err)
		}
		return
	}
	same := f.last != nil && reflect.DeepEqual(*f.last, *c)
	if same && time.Since(f.sent) < heartbeat*9/10 {
		return
	}
	if err := f.ensureOpen(ctx); err != nil {
		if ctx.Err() == nil {
			log.Warn("open the capacity bucket", "err", err)
		}
		return
	}
	stamped := *c
	stamped.UpdatedAt = time.Now().UTC()
	if err := f.caps.Publish(ctx, &stamped); err != nil {
		if ctx.Err() == nil {
			log.Warn("publish the capacity summary", "err", err)
		}
		// The bucket is in memory: a hub or cluster that restarted whole
		// lost it. Open it again (creating it) on the next try.
		if ctx.Err() == nil {
			f.caps = nil
		}
		return
	}
	f.last, f.sent = c, time.Now()
}

// summary is the sidecar's capacity now, without its time stamp.
func (f *fleetPublisher) summary(ctx context.Context) (*fleet.Capacity, error) {
	s := f.s
	ctx, span := s.tel.Tracer.Start(ctx, "colocd.fleet.summary", trace.WithAttributes(attribute.String("colocd.sidecar", s.id)))
	defer span.End()
	sum, err := s.adm.Summarize(ctx, f.typical)
	if err != nil {
		return nil, err
	}
	reason := sum.Reason
	if len(reason) > 200 { // readers refuse more than 256 bytes
		reason = reason[:200] + "…"
	}
	c := &fleet.Capacity{Format: fleet.CapacityFormat, Sidecar: s.id, Mode: string(s.adm.Config().Mode), Healthy: sum.Healthy, Draining: sum.Draining, Reason: reason,
		FreeMemoryMiB: sum.AvailableMiB, Leases: sum.Leases, MaxJobs: sum.MaxJobs, FreeInstances: sum.FreeInstances,
		Margin: round3(sum.Margin), TypicalPct: sum.TypicalPct, Services: []fleet.CapacityService{}}
	c.Node = s.cfg.Sidecar.Node
	if c.Node == "" {
		c.Node, _ = os.Hostname()
	}
	c.GPU.Name, c.GPU.UUID, c.GPU.SMs = s.gpuInfo.Name, s.gpuInfo.UUID, s.gpuInfo.SMs
	if m := s.gpuInfo.MIG; m != nil {
		c.GPU.MIG = m.Profile
	}
	for i, sp := range sum.Services {
		c.Services = append(c.Services, fleet.CapacityService{Name: sp.Service, SLOP99MS: sp.SLOP99MS,
			PredictedP99MS: round3(sp.PredictedP99MS), Margin: round3(sum.Margins[i])})
	}
	return c, nil
}

// round3 keeps three decimals: a summary changes when a figure moves, not
// when the last float bit does.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
