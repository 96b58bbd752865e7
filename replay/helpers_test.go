package replay

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/colocd/colocd/simserver/llm"
)

// conversationTrace is the Azure LLM conversation trace (with its notice).
const conversationTrace = "../testdata/traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv"

// conversation is the replay on the predicted server of minutes
// [from, from+n) of the conversation trace.
func conversation(t testing.TB, from, n int) Config {
	t.Helper()
	cfg, err := DefaultPredicted(conversationMinutes(t, from, n))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Service.RateRPS = 5.5 // the whole trace's mean, as an inference team would configure it
	return cfg
}

// coarse is the replay of minutes [20, 20+n) of the conversation trace
// under policies (none: the default ones), with a coarser prediction (200
// simulated requests): for tests of the loop, not of the guard.
func coarse(t testing.TB, n int, policies ...Policy) Config {
	t.Helper()
	cfg := conversation(t, 20, n)
	cfg.Requests, cfg.Policies = 200, policies
	return cfg
}

// conversationMinutes is minutes [from, from+n) of the conversation trace.
func conversationMinutes(t testing.TB, from, n int) []llm.Request {
	t.Helper()
	f, err := os.Open(conversationTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := llm.ParseTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	return Slice(all, time.Duration(from)*time.Minute, time.Duration(n)*time.Minute)
}

// mustRun runs the replay of cfg, failing t on an error.
func mustRun(t testing.TB, cfg Config) []Result {
	t.Helper()
	results, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return results
}
