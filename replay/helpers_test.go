package replay

import (
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
	f, err := os.Open(conversationTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := llm.ParseTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := DefaultPredicted(Slice(all, time.Duration(from)*time.Minute, time.Duration(n)*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Service.RateRPS = 5.5 // the whole trace's mean, as an inference team would configure it
	return cfg
}
