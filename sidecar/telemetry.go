package sidecar

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/gpu"
	"github.com/colocd/colocd/internal/frontdoor"
)

// Tracing modes of telemetry.tracing.
const (
	TracingNone    = "none"
	TracingConsole = "console"
	TracingOTLP    = "otlp"
)

// Telemetry holds the OpenTelemetry providers the sidecar uses: a tracer
// for decisions and a meter whose instruments Prometheus scrapes.
type Telemetry struct {
	Tracer   trace.Tracer
	Registry *prometheus.Registry
	metrics  *metrics
	shutdown []func(context.Context) error
}

// NewTelemetry builds the tracer provider and the Prometheus metrics.
// Spans go where the standard OTEL_TRACES_EXPORTER variable says (otlp,
// console, none), and when it is unset, where mode says: none (the default
// for a local run, so nothing tries to reach a missing collector), console
// (stderr) or otlp (OTEL_EXPORTER_OTLP_* variables). The resource honours
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. tp, when not nil,
// replaces all of that (tests pass a recorder).
func NewTelemetry(ctx context.Context, mode, version, sidecarID string, tp trace.TracerProvider) (*Telemetry, error) {
	t := &Telemetry{Registry: prometheus.NewRegistry()}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("colocd"), semconv.ServiceVersion(version), semconv.ServiceInstanceID(sidecarID)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	if tp == nil {
		exp, err := spanExporter(ctx, mode)
		if err != nil {
			return nil, err
		}
		if exp == nil {
			tp = noop.NewTracerProvider()
		} else {
			sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
			t.shutdown = append(t.shutdown, sdk.Shutdown)
			tp = sdk
		}
	}
	t.Tracer = tp.Tracer("github.com/colocd/colocd/sidecar")
	// The launcher's traceparent arrives over NATS; make the W3C propagator
	// the global one so the bus package's carrier finds it.
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	reader, err := otelprom.New(otelprom.WithRegisterer(t.Registry))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
	t.shutdown = append(t.shutdown, mp.Shutdown)
	if t.metrics, err = newMetrics(mp.Meter("github.com/colocd/colocd/sidecar")); err != nil {
		return nil, err
	}
	return t, nil
}

// spanExporter picks the exporter; nil means spans are not exported.
func spanExporter(ctx context.Context, mode string) (sdktrace.SpanExporter, error) {
	fallback := func(context.Context) (sdktrace.SpanExporter, error) { return nil, nil }
	switch mode {
	case TracingNone, "":
	case TracingConsole:
		fallback = func(context.Context) (sdktrace.SpanExporter, error) {
			return stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
		}
	case TracingOTLP:
		fallback = nil // autoexport's own default is OTLP
	default:
		return nil, fmt.Errorf("telemetry.tracing: want none, console or otlp, got %q", mode)
	}
	var opts []autoexport.SpanOption
	if fallback != nil {
		opts = append(opts, autoexport.WithFallbackSpanExporter(fallback))
	}
	exp, err := autoexport.NewSpanExporter(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("trace exporter: %w", err)
	}
	if exp == nil || autoexport.IsNoneSpanExporter(exp) {
		return nil, nil
	}
	return exp, nil
}

// Shutdown flushes and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// metrics are the instruments /metrics shows.
type metrics struct {
	decisions    metric.Int64Counter
	predictionS  metric.Float64Histogram
	decisionS    metric.Float64Histogram
	predictedP99 metric.Float64Gauge
	leases       metric.Int64Gauge
	events       metric.Int64Counter
	// What each service's server reports (observers.go), once a second.
	observedRate, forecastRate, observedP99, observedAge metric.Float64Gauge
	// observedOverPredicted is each measurement's observed p99 over the
	// prediction for the leases that ran: how far to trust the model here.
	observedOverPredicted metric.Float64Histogram
	correction            metric.Float64Gauge
	leasePct              metric.Int64Gauge
	// slo is each service's SLO, read when /metrics is scraped
	// (observeSLOs).
	slo   metric.Float64ObservableGauge
	ready metric.Int64ObservableGauge
	// The embedded listener's front door (observeFrontDoor).
	doorConns   metric.Int64ObservableGauge
	doorRefused metric.Int64ObservableCounter
	// learned is the guard's learned response (observeLearned).
	learned metric.Float64ObservableGauge
	// The GPU's memory and the leases by identity (observeGPU,
	// observeIdentities).
	gpuMemory   metric.Int64ObservableGauge
	idLeases    metric.Int64ObservableGauge
	idActivePct metric.Int64ObservableGauge
	meter       metric.Meter
}

// observeLearned makes /metrics show what the guard learned of each
// service's response, as colocd_guard_learned_ratio{service, trainer,
// pct}: the observed p99 over the point prediction at that percentage,
// read at each scrape.
func (ms *metrics) observeLearned(points func() []admission.ResponsePoint) error {
	_, err := ms.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, p := range wireResponsePoints(points()) {
			o.ObserveFloat64(ms.learned, p.Ratio, metricAttrs("service", p.service, "trainer", p.Trainer, "pct", strconv.Itoa(p.Pct)))
		}
		return nil
	}, ms.learned)
	if err != nil {
		return fmt.Errorf("metrics: the learned response gauge: %w", err)
	}
	return nil
}

// observeFrontDoor makes /metrics show the embedded listener's connections
// as colocd_nats_connections{state: pending, authenticated} and those it
// closed before they authenticated as
// colocd_nats_refused_connections_total{reason}, read at each scrape.
func (ms *metrics) observeFrontDoor(door *frontdoor.Door) error {
	_, err := ms.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := door.Stats()
		o.ObserveInt64(ms.doorConns, int64(st.Pending), metricAttrs("state", "pending"))
		o.ObserveInt64(ms.doorConns, int64(st.Open-st.Pending), metricAttrs("state", "authenticated"))
		for _, r := range frontdoor.Refusals() {
			o.ObserveInt64(ms.doorRefused, int64(st.Refused[r]), metricAttrs("reason", r.String()))
		}
		return nil
	}, ms.doorConns, ms.doorRefused)
	if err != nil {
		return fmt.Errorf("metrics: the front door's instruments: %w", err)
	}
	return nil
}

// observeReadiness makes /metrics show each component /readyz checks as
// colocd_ready{component}: 1 ready, 0 not (the MPS daemon's health among
// them), asked at each scrape.
func (ms *metrics) observeReadiness(cs Checks) error {
	_, err := ms.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		failed := cs.run()
		for name := range cs {
			v := int64(1)
			if _, bad := failed[name]; bad {
				v = 0
			}
			o.ObserveInt64(ms.ready, v, metricAttrs("component", name))
		}
		return nil
	}, ms.ready)
	if err != nil {
		return fmt.Errorf("metrics: the readiness gauge: %w", err)
	}
	return nil
}

// observeSLOs makes /metrics show each service's SLO p99, in the unit of
// the predicted and observed p99 beside it, as specs returns them at each
// scrape (a reload changes them).
func (ms *metrics) observeSLOs(specs func() []admission.ServiceSpec) error {
	_, err := ms.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, s := range specs() {
			o.ObserveFloat64(ms.slo, s.SLOP99MS/1000, metricAttrs("service", s.Name))
		}
		return nil
	}, ms.slo)
	if err != nil {
		return fmt.Errorf("metrics: the SLO gauge: %w", err)
	}
	return nil
}

// gpuReadTimeout bounds the device read of one scrape: /metrics must
// answer while a driver call hangs.
const gpuReadTimeout = 2 * time.Second

// observeGPU makes /metrics show the GPU's memory as
// colocd_gpu_memory_bytes{state}: total and free as dev reads them at each
// scrape (total from the device's identity when the read fails, and then
// no free), and granted, the sum of the memory the live leases on this
// device may pin (a lease that holds a MIG instance whole pins its own
// instance's, not this device's).
func (ms *metrics) observeGPU(dev gpu.Device, leases func() []admission.Lease) error {
	_, err := ms.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, gpuReadTimeout)
		defer cancel()
		total := dev.Info().MemoryTotalMiB
		if st, err := dev.State(ctx); err == nil {
			total = st.Memory.TotalMiB
			o.ObserveInt64(ms.gpuMemory, mibBytes(st.Memory.FreeMiB), metricAttrs("state", "free"))
		}
		o.ObserveInt64(ms.gpuMemory, mibBytes(total), metricAttrs("state", "total"))
		var granted uint64
		for _, l := range leases() {
			if l.Instance == nil && l.MemoryMiB > 0 {
				granted += uint64(l.MemoryMiB)
			}
		}
		o.ObserveInt64(ms.gpuMemory, mibBytes(granted), metricAttrs("state", "granted"))
		return nil
	}, ms.gpuMemory)
	if err != nil {
		return fmt.Errorf("metrics: the gpu memory gauge: %w", err)
	}
	return nil
}

// mibBytes is n MiB in bytes, bounded to what an int64 holds.
func mibBytes(n uint64) int64 {
	if n > math.MaxInt64>>20 {
		return math.MaxInt64
	}
	return int64(n << 20)
}

// observeIdentities makes /metrics show the live leases and their MPS
// percentages by launcher identity, as colocd_identity_leases{identity}
// and colocd_identity_active_thread_pct{identity}, read at each scrape.
// The registered identities (registered, at each scrape) are shown at 0
// when they hold nothing, so that their series do not come and go.
// Identities are bounded (identityUses): a remote server's users may be
// many.
func (ms *metrics) observeIdentities(leases func() []admission.Lease, registered func() []string) error {
	_, err := ms.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, u := range identityUses(leases(), registered(), maxIdentitySeries) {
			attrs := metricAttrs("identity", u.identity)
			o.ObserveInt64(ms.idLeases, u.leases, attrs)
			o.ObserveInt64(ms.idActivePct, u.pct, attrs)
		}
		return nil
	}, ms.idLeases, ms.idActivePct)
	if err != nil {
		return fmt.Errorf("metrics: the identity gauges: %w", err)
	}
	return nil
}

// maxIdentitySeries bounds the identities /metrics names one by one; the
// rest are summed under identityOther.
const maxIdentitySeries = 64

// Identity label values that no launcher name can be (a launcher's name
// starts with a letter or a digit, natsserver.ValidateLauncherName).
const (
	// identityLocal is the sidecars' own account (Lease.Tenant "").
	identityLocal = "_local"
	// identityOther sums the identities past maxIdentitySeries.
	identityOther = "_other"
)

// identityUse is one identity's live leases and the sum of their
// percentages.
type identityUse struct {
	identity    string
	leases, pct int64
}

// identityUses sums leases by identity, with each of registered that holds
// none at zero, and keeps at most max of them, those with the most leases
// (then the highest percentage, then by name); the rest are summed into
// one identityOther. The result is sorted as kept, identityOther last.
func identityUses(leases []admission.Lease, registered []string, max int) []identityUse {
	by := make(map[string]*identityUse, len(registered)+len(leases))
	use := func(id string) *identityUse {
		u, ok := by[id]
		if !ok {
			u = &identityUse{identity: id}
			by[id] = u
		}
		return u
	}
	for _, r := range registered {
		use(r)
	}
	for _, l := range leases {
		id := l.Tenant
		if id == "" {
			id = identityLocal
		}
		u := use(id)
		u.leases++
		u.pct += int64(l.Pct)
	}
	out := make([]identityUse, 0, len(by))
	for _, u := range by {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b identityUse) int {
		return cmp.Or(cmp.Compare(b.leases, a.leases), cmp.Compare(b.pct, a.pct), cmp.Compare(a.identity, b.identity))
	})
	if len(out) <= max {
		return out
	}
	other := identityUse{identity: identityOther}
	for _, u := range out[max:] {
		other.leases += u.leases
		other.pct += u.pct
	}
	return append(out[:max], other)
}

func newMetrics(m metric.Meter) (*metrics, error) {
	ms := metrics{meter: m}
	var errs [21]error
	ms.decisions, errs[0] = m.Int64Counter("colocd.decisions", metric.WithDescription("admission decisions by outcome and reason code"))
	ms.predictionS, errs[1] = m.Float64Histogram("colocd.prediction.duration", metric.WithUnit("s"),
		metric.WithDescription("time to predict one service under one co-location"),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1))
	ms.decisionS, errs[2] = m.Float64Histogram("colocd.decision.duration", metric.WithUnit("s"),
		metric.WithDescription("time to decide one admission request"),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1))
	ms.predictedP99, errs[3] = m.Float64Gauge("colocd.predicted.p99", metric.WithUnit("s"),
		metric.WithDescription("the latest predicted latency p99 of each inference service with the leases it has (an LLM engine's: its step latency)"))
	ms.leases, errs[4] = m.Int64Gauge("colocd.leases", metric.WithDescription("live leases"))
	ms.events, errs[5] = m.Int64Counter("colocd.events", metric.WithDescription("lease events published, by type"))
	ms.observedRate, errs[6] = m.Float64Gauge("colocd.observed.rate", metric.WithUnit("1/s"),
		metric.WithDescription("the request rate each inference service's server reports, over the observer's window"))
	ms.forecastRate, errs[7] = m.Float64Gauge("colocd.observed.forecast", metric.WithUnit("1/s"),
		metric.WithDescription("the request rate forecast 30 s ahead from the server's own metrics"))
	ms.observedP99, errs[8] = m.Float64Gauge("colocd.observed.p99", metric.WithUnit("s"),
		metric.WithDescription("the latency p99 each inference service's server reports, over the observer's window (an LLM engine's: its step latency)"))
	ms.observedAge, errs[9] = m.Float64Gauge("colocd.observed.age", metric.WithUnit("s"),
		metric.WithDescription("time since the last good scrape of each service's metrics"))
	ms.observedOverPredicted, errs[10] = m.Float64Histogram("colocd.observed.over_predicted",
		metric.WithDescription("each observed window's latency p99 over the p99 predicted for the leases that ran in it (1: the model was right)"),
		metric.WithExplicitBucketBoundaries(0.5, 0.67, 0.8, 0.9, 0.95, 1, 1.05, 1.1, 1.25, 1.5, 2, 3))
	ms.correction, errs[11] = m.Float64Gauge("colocd.guard.correction",
		metric.WithDescription("the factor decisions multiply each service's predicted p99 by, from its observed p99 (1: none)"))
	ms.leasePct, errs[12] = m.Int64Gauge("colocd.leases.active_thread_pct",
		metric.WithDescription("the sum of the live leases' MPS active-thread percentages: how much of the GPU training may take"))
	ms.slo, errs[13] = m.Float64ObservableGauge("colocd.slo.p99", metric.WithUnit("s"),
		metric.WithDescription("each inference service's latency p99 SLO (an LLM engine's: its step p99), to draw and alert on beside colocd_predicted_p99_seconds and colocd_observed_p99_seconds"))
	ms.ready, errs[14] = m.Int64ObservableGauge("colocd.ready",
		metric.WithDescription("1 while the component /readyz checks (gpu, mps, nats, store, admits, fds, predictor) is ready, 0 while not"))
	ms.doorConns, errs[15] = m.Int64ObservableGauge("colocd.nats.connections",
		metric.WithDescription("connections open on the embedded server's listener (nats.listen), by state: pending (not yet authenticated) or authenticated"))
	ms.doorRefused, errs[16] = m.Int64ObservableCounter("colocd.nats.refused_connections",
		metric.WithDescription("connections on the embedded server's listener closed before they authenticated, by reason: max_connections, max_pending, max_pending_per_address, handshake_timeout, upstream"))
	ms.learned, errs[17] = m.Float64ObservableGauge("colocd.guard.learned_ratio",
		metric.WithDescription("what the guard learned (admission.guard.learn_response): each service's observed p99 over the point prediction beside one training job, by trainer and MPS percentage"))
	ms.gpuMemory, errs[18] = m.Int64ObservableGauge("colocd.gpu.memory", metric.WithUnit("By"),
		metric.WithDescription("the GPU's memory, by state: total and free as the device reports them at the scrape, granted the memory the live leases on it may pin"))
	ms.idLeases, errs[19] = m.Int64ObservableGauge("colocd.identity.leases",
		metric.WithDescription("live leases by launcher identity (at most 64 named; the rest summed under identity _other; _local: the sidecars' own account)"))
	ms.idActivePct, errs[20] = m.Int64ObservableGauge("colocd.identity.active_thread_pct",
		metric.WithDescription("the sum of the live leases' MPS active-thread percentages by launcher identity (at most 64 named; the rest summed under identity _other)"))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &ms, nil
}

// since returns the seconds elapsed since t.
func since(t time.Time) float64 { return time.Since(t).Seconds() }

// metricAttrs is a measurement option with string attributes in key, value
// pairs. Building an attribute set sorts and hashes it, which on the warm
// decision path costs more than the decision; the label values come from
// small sets (services, outcomes, codes, event types), so the options are
// kept, up to attrCacheMax of them.
func metricAttrs(kv ...string) metric.MeasurementOption {
	key := strings.Join(kv, "\x00")
	if o, ok := attrCache.Load(key); ok {
		return o.(metric.MeasurementOption)
	}
	attrs := make([]attribute.KeyValue, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		attrs = append(attrs, attribute.String(kv[i], kv[i+1]))
	}
	o := metric.WithAttributeSet(attribute.NewSet(attrs...))
	if attrCacheSize.Add(1) <= attrCacheMax {
		attrCache.Store(key, o)
	}
	return o
}

const attrCacheMax = 1024

var (
	attrCache     sync.Map // string → metric.MeasurementOption
	attrCacheSize atomic.Int64
)
