package bus

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// HeaderCarrier adapts NATS message headers to OpenTelemetry's
// TextMapCarrier. nats.Header is case-sensitive, unlike HTTP headers: Set
// writes lowercase keys (traceparent, tracestate) and Get reads any case.
// Set needs a non-nil header.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key, matched without regard to case.
func (c HeaderCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// Set replaces every value of key, in any case, by value under the
// lowercase key.
func (c HeaderCarrier) Set(key, value string) {
	lower := strings.ToLower(key)
	for k := range c {
		if k != lower && strings.EqualFold(k, key) {
			delete(c, k)
		}
	}
	c[lower] = []string{value}
}

// Keys returns the header keys as they are stored.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// tracePropagator moves W3C trace context. bus uses it explicitly instead of
// otel's global propagator, which is a no-op until a program sets one: a
// launcher's traceparent must reach the sidecar whatever the program's OTel
// setup.
var tracePropagator = propagation.TraceContext{}

// injectTrace writes ctx's span context into h (non-nil).
func injectTrace(ctx context.Context, h nats.Header) {
	tracePropagator.Inject(ctx, HeaderCarrier(h))
}

// extractTrace returns ctx with the remote span context found in h, if any.
func extractTrace(ctx context.Context, h nats.Header) context.Context {
	return tracePropagator.Extract(ctx, HeaderCarrier(h))
}

// TraceFromEnv returns ctx with the span context that the environment
// carries in TRACEPARENT and TRACESTATE (OpenTelemetry's names for an
// environment carrier), if any: a launcher started inside a traced job
// parents its requests on the job's span.
func TraceFromEnv(ctx context.Context, getenv func(string) string) context.Context {
	c := propagation.MapCarrier{}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v := getenv(strings.ToUpper(k)); v != "" {
			c[k] = v
		}
	}
	return tracePropagator.Extract(ctx, c)
}
