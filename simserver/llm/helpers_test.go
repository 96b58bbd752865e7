package llm

import (
	"os"
	"testing"
	"time"
)

// azureConv is the recorded Azure LLM conversation trace (with its notice).
const azureConv = "../../testdata/traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv"

// azureRequests is every request of the Azure conversation trace, parsed.
func azureRequests(tb testing.TB) []Request {
	tb.Helper()
	f, err := os.Open(azureConv)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	reqs, err := ParseTrace(f)
	if err != nil {
		tb.Fatal(err)
	}
	return reqs
}

// newEngine is New(cfg), failing tb if it refuses cfg.
func newEngine(tb testing.TB, cfg Config) *Engine {
	tb.Helper()
	e, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// advanceBy advances e to d after its config's start, failing tb on an
// error.
func advanceBy(tb testing.TB, e *Engine, d time.Duration) {
	tb.Helper()
	if err := e.Advance(e.cfg.Start.Add(d)); err != nil {
		tb.Fatal(err)
	}
}
