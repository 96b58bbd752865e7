package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"sync"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/observe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// watchedServices runs one observer of the server's own metrics per service
// that has a metrics section, restarts them when a reload changes the
// section, and answers admission and status about what they see.
type watchedServices struct {
	log     *slog.Logger
	updates chan []configs.Service // the newest services, for Run

	mu     sync.Mutex
	byName map[string]*watched
	// coarse is, per service, the histogram bucket around its limit last
	// warned of (coarseLimit): a warning once per bucket, not each second.
	coarse map[string][2]float64
}

type watched struct {
	ep   observe.Endpoint
	obs  *observe.Observer
	stop context.CancelFunc
	done chan struct{}
}

var _ admission.LatencyObserver = (*watchedServices)(nil)

func newWatchedServices(log *slog.Logger, services []configs.Service) *watchedServices {
	w := &watchedServices{log: log, updates: make(chan []configs.Service, 1), byName: map[string]*watched{}, coarse: map[string][2]float64{}}
	w.set(services)
	return w
}

// set hands Run the services of a (re)loaded configuration; only the newest
// set waits.
func (w *watchedServices) set(services []configs.Service) {
	select {
	case <-w.updates:
	default:
	}
	w.updates <- services
}

// Run starts and stops the observers until ctx is done, then stops them all.
func (w *watchedServices) Run(ctx context.Context) error {
	defer w.apply(ctx, nil)
	for {
		select {
		case <-ctx.Done():
			return nil
		case services := <-w.updates:
			w.apply(ctx, services)
		}
	}
}

// apply makes the running observers those of services: a section that is
// gone or changed stops its observer, a new one starts one.
func (w *watchedServices) apply(ctx context.Context, services []configs.Service) {
	want := map[string]observe.Endpoint{}
	for _, s := range services {
		if s.Metrics.Set() {
			ep := s.Metrics
			ep.Steps = s.IsEngine() // an engine's load and latency are its steps'
			want[s.Name] = ep
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, cur := range w.byName {
		if ep, ok := want[name]; !ok || !reflect.DeepEqual(ep, cur.ep) {
			cur.stop()
			<-cur.done
			delete(w.byName, name)
		}
	}
	if ctx.Err() != nil {
		return
	}
	for name, ep := range want {
		if _, ok := w.byName[name]; ok {
			continue
		}
		obs, err := ep.Observer(w.log.With("service", name))
		if err != nil { // validated with the config: not reached
			w.log.Error("metrics observer", "service", name, "err", err)
			continue
		}
		octx, stop := context.WithCancel(ctx)
		x := &watched{ep: ep, obs: obs, stop: stop, done: make(chan struct{})}
		go func() {
			defer close(x.done)
			_ = obs.Run(octx)
		}()
		w.byName[name] = x
	}
}

// Observe returns what the service's server reports, if it is observed.
func (w *watchedServices) Observe(service string) (observe.Observation, bool) {
	w.mu.Lock()
	x := w.byName[service]
	w.mu.Unlock()
	if x == nil {
		return observe.Observation{}, false
	}
	return x.obs.Observe(), true
}

// ObservedRate is admission.Observer: the load to plan for, when it may be
// used (observe.Observation.PlannedRate, with the forecast).
func (w *watchedServices) ObservedRate(service string) (float64, bool) {
	o, ok := w.Observe(service)
	if !ok {
		return 0, false
	}
	return o.PlannedRate(true)
}

// Watches is admission.LatencyObserver: whether the service's metrics are
// read.
func (w *watchedServices) Watches(service string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byName[service] != nil
}

// ObservedWindow is admission.LatencyObserver: the service's figures from
// since on, once they hold observe.MinRequestsForP99 requests.
func (w *watchedServices) ObservedWindow(service string, since time.Time) (admission.ObservedWindow, bool) {
	w.mu.Lock()
	x := w.byName[service]
	w.mu.Unlock()
	if x == nil {
		return admission.ObservedWindow{}, false
	}
	o := x.obs.ObserveSince(since)
	from, end, ok := o.Span(time.Now())
	if !ok {
		return admission.ObservedWindow{}, false
	}
	return admission.ObservedWindow{Since: from, End: end, Requests: o.Requests, RateRPS: o.RateRPS,
		MeanMS: o.MeanMS, P50MS: o.P50MS, P90MS: o.P90MS, P99MS: o.P99MS, P99SureMS: o.P99SureMS}, true
}

// coarseShare is how wide, as a share of the SLO, a histogram bucket
// that holds a service's limit may be before the guard warns that it
// cannot see the p99 there.
const coarseShare = 0.1

// coarseLimit says, when o's p99 lies in a histogram bucket that holds
// the service's limit ((1 − headroom) × its SLO) and is wider than
// coarseShare of the SLO, what the guard cannot tell there; "" otherwise.
// The p99 in that bucket is interpolated as if its requests spread
// evenly across it (as histogram_quantile does): where they crowd its
// lower end, as a tail's do, the guard reads the p99 high and holds the
// training job lower than the server needs; where they crowd its upper
// end, it reads it low.
func coarseLimit(svc admission.ServiceSpec, headroom float64, o observe.Observation) string {
	lo, hi, limit := o.P99LowMS, o.P99HighMS, (1-headroom)*svc.SLOP99MS
	if !(hi > lo) || math.IsInf(hi, 0) || !(limit > lo && limit <= hi) || hi-lo <= coarseShare*svc.SLOP99MS {
		return ""
	}
	return fmt.Sprintf("service %s: its server's latency histogram has no bound between %g and %g ms, where the guard's limit (%.4g ms, the SLO less the headroom) lies: "+
		"a p99 there is interpolated, and the guard cannot tell %g ms from %g ms; a bound at the SLO, or finer ones near it, lets it see (docs/guard.md#what-the-guard-sees-of-the-p99)",
		svc.Name, lo, hi, limit, lo, hi)
}

// warnCoarse logs coarseLimit's warning when a service's p99 comes to lie
// in a bucket other than the one last warned of: once, not each second.
func (w *watchedServices) warnCoarse(svc admission.ServiceSpec, headroom float64, o observe.Observation) {
	msg := coarseLimit(svc, headroom, o)
	if msg == "" {
		return
	}
	w.mu.Lock()
	seen := w.coarse[svc.Name] == [2]float64{o.P99LowMS, o.P99HighMS}
	w.coarse[svc.Name] = [2]float64{o.P99LowMS, o.P99HighMS}
	w.mu.Unlock()
	if !seen {
		w.log.Warn(msg)
	}
}

// recordMeasured adds each new measurement of a prediction against a
// server's p99 to /metrics and to the observations log (records.go), and
// sets the corrections.
func (s *Sidecar) recordMeasured(ctx context.Context, seen map[string]time.Time) {
	m := s.tel.metrics
	corr := s.adm.Corrections()
	measured := s.adm.Measurements()
	for _, svc := range s.services() {
		ms, ok := measured[svc.Name]
		if ok && !seen[svc.Name].Equal(ms.Window.Since) && ms.PredictedP99MS > 0 {
			seen[svc.Name] = ms.Window.Since
			m.observedOverPredicted.Record(ctx, ms.Window.P99MS/ms.PredictedP99MS, metricAttrs("service", svc.Name))
			s.observations.record(svc, ms)
		}
	}
	for _, svc := range s.services() {
		m.correction.Record(ctx, max(1, corr[svc.Name]), metricAttrs("service", svc.Name))
	}
}

// recordObserved sets the observed gauges of /metrics; a figure the
// window cannot give (NaN) is not recorded.
func (s *Sidecar) recordObserved(ctx context.Context) {
	m := s.tel.metrics
	for _, svc := range s.services() {
		o, ok := s.watched.Observe(svc.Name)
		if !ok {
			continue
		}
		if o.State != observe.StateNoData {
			s.watched.warnCoarse(svc, s.adm.Config().Headroom, o)
		}
		attrs := metricAttrs("service", svc.Name)
		for _, g := range []struct {
			gauge metric.Float64Gauge
			v     float64
		}{{m.observedRate, o.RateRPS}, {m.forecastRate, o.ForecastRPS}, {m.observedP99, o.P99MS / 1000}, {m.observedAge, o.Age.Seconds()}} {
			if !math.IsNaN(g.v) && !math.IsInf(g.v, 0) && o.State != observe.StateNoData {
				g.gauge.Record(ctx, g.v, attrs)
			}
		}
	}
}

// observedStatus is the wire form of an observation; NaN becomes null.
func observedStatus(o observe.Observation) *v1.ObservedStatus {
	num := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	out := &v1.ObservedStatus{State: string(o.State), Reason: o.Reason, AgeSeconds: o.Age.Seconds(), WindowSeconds: o.Elapsed.Seconds(),
		RateRPS: num(o.RateRPS), ForecastRPS: num(o.ForecastRPS), MeanMS: num(o.MeanMS), P99MS: num(o.P99MS), P99LowMS: num(o.P99LowMS), P99HighMS: num(o.P99HighMS)}
	if o.State == observe.StateNoData {
		out.RateRPS, out.ForecastRPS, out.MeanMS, out.P99MS, out.P99LowMS, out.P99HighMS = nil, nil, nil, nil, nil, nil
	}
	return out
}

// guardTick is how often the guard looks for a service whose observed load
// moved to another band; a look that finds none predicts nothing.
const guardTick = time.Second

// guardLoop has admission re-plan the live leases when a service's observed
// load moves (admission.Controller.Guard), and traces each plan that
// changed a lease as a colocd.guard span.
func (s *Sidecar) guardLoop(ctx context.Context) error {
	t := time.NewTicker(guardTick)
	defer t.Stop()
	measured := map[string]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		s.recordObserved(ctx)
		start := time.Now()
		events, err := s.adm.Guard(ctx)
		s.recordMeasured(ctx, measured)
		s.saveLearned()
		if len(events) == 0 && err == nil {
			continue // nothing moved: no span, or one a second would drown the traces
		}
		_, span := s.tel.Tracer.Start(ctx, "colocd.guard", trace.WithTimestamp(start))
		measurements, corrections := s.adm.Measurements(), s.adm.Corrections()
		for _, svc := range s.services() {
			attrs := []attribute.KeyValue{attribute.String("colocd.service", svc.Name), attribute.Float64("colocd.configured_rate_rps", svc.RateRPS),
				attribute.Float64("colocd.correction", max(1, corrections[svc.Name]))}
			if m, ok := measurements[svc.Name]; ok {
				attrs = append(attrs, attribute.Float64("colocd.measured_observed_p99_ms", m.Window.P99MS),
					attribute.Float64("colocd.measured_predicted_p99_ms", m.PredictedP99MS), attribute.Int("colocd.measured_leases", len(m.Trainers)))
			}
			if o, ok := s.watched.Observe(svc.Name); ok {
				attrs = append(attrs, attribute.String("colocd.observed_state", string(o.State)), attribute.Float64("colocd.observed_rate_rps", o.RateRPS))
				if !math.IsNaN(o.P99MS) {
					attrs = append(attrs, attribute.Float64("colocd.observed_p99_ms", o.P99MS))
				}
			}
			span.AddEvent("service", trace.WithAttributes(attrs...))
		}
		for _, e := range events {
			span.AddEvent(string(e.Type), trace.WithAttributes(attribute.String("colocd.lease", e.LeaseID),
				attribute.String("colocd.job", e.JobID), attribute.Int("colocd.pct", e.Pct), attribute.String("colocd.reason", e.Reason)))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
			s.log.Error("guard: re-planning the leases failed", "err", err)
		}
		span.End()
	}
}
