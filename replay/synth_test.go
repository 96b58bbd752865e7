package replay

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// perMinute counts a trace's arrivals in each minute.
func perMinute(t *testing.T, kind string, seed uint64) []int {
	t.Helper()
	tr, err := Synthetic(kind, seed)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, SyntheticMinutes)
	for i, r := range tr {
		if i > 0 && r.Arrival < tr[i-1].Arrival {
			t.Fatalf("%s: arrival %d at %s before the one before it", kind, i, r.Arrival)
		}
		if r.PromptTokens < 1 || r.PromptTokens > maxPromptTokens || r.OutputTokens < 1 || r.OutputTokens > maxOutputTokens {
			t.Fatalf("%s: request %d has %d prompt and %d output tokens", kind, i, r.PromptTokens, r.OutputTokens)
		}
		counts[int(r.Arrival/time.Minute)]++
	}
	return counts
}

func meanRPS(counts []int) float64 {
	n := 0
	for _, c := range counts {
		n += c
	}
	return float64(n) / float64(len(counts)*60)
}

func TestSyntheticShapes(t *testing.T) {
	t.Parallel()
	for _, kind := range SyntheticKinds {
		counts := perMinute(t, kind, 1)
		if m := meanRPS(counts); m < 0.8*SyntheticMeanRPS || m > 1.25*SyntheticMeanRPS {
			t.Errorf("%s: mean %.2f req/s, want within 20 %% of %.2f", kind, m, SyntheticMeanRPS)
		}
		lo, hi := slices.Min(counts), slices.Max(counts)
		per := SyntheticMeanRPS * 60
		switch kind {
		case "onoff":
			if float64(lo) > 0.7*per || float64(hi) < 1.3*per {
				t.Errorf("onoff: minutes of %d to %d requests, want lulls below 0.7× and bursts above 1.3× the mean (%.0f)", lo, hi, per)
			}
		case "diurnal":
			ends, middle := counts[0]+counts[SyntheticMinutes-1], counts[29]+counts[30]
			if float64(middle) < 2*float64(ends) {
				t.Errorf("diurnal: %d requests in the middle two minutes, %d at the ends; want the middle at least twice", middle, ends)
			}
		case "flash":
			crowded := 0
			for _, c := range counts {
				if float64(c) > 1.6*per {
					crowded++
				}
			}
			if crowded < 3 || crowded > 12 {
				t.Errorf("flash: %d minutes above 1.6× the mean, want the crowds' 3 to 12", crowded)
			}
		}
	}
}

func TestSyntheticIsDeterministic(t *testing.T) {
	t.Parallel()
	a, b, other := perMinute(t, "flash", 7), perMinute(t, "flash", 7), perMinute(t, "flash", 8)
	if !slices.Equal(a, b) {
		t.Error("the same kind and seed drew two traces")
	}
	if slices.Equal(a, other) {
		t.Error("seeds 7 and 8 drew the same trace")
	}
}

func TestParseSynthetic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		kind   string
		seed   uint64
		ok     bool
		errHas string
	}{
		{"trace.csv", "", 0, false, ""},
		{"synthetic:onoff", "onoff", 1, true, ""},
		{"synthetic:flash:42", "flash", 42, true, ""},
		{"synthetic:tidal", "", 0, true, "onoff|diurnal|flash"},
		{"synthetic:diurnal:-1", "", 0, true, "whole number"},
		{"synthetic:", "", 0, true, "synthetic:onoff|diurnal|flash[:SEED]"},
	} {
		kind, seed, ok, err := ParseSynthetic(tc.in)
		if ok != tc.ok || kind != tc.kind || seed != tc.seed || (err == nil) != (tc.errHas == "") ||
			err != nil && !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("ParseSynthetic(%q) = %q, %d, %v, %v; want %q, %d, %v, an error with %q", tc.in, kind, seed, ok, err, tc.kind, tc.seed, tc.ok, tc.errHas)
		}
	}
}

// A --trace naming a synthetic trace replays it.
func TestPrepareSyntheticTrace(t *testing.T) {
	t.Parallel()
	cfg, err := Prepare(Options{Trace: "synthetic:onoff:3", Server: "predictor", Minutes: 5, Policies: []string{"static"}})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Synthetic("onoff", 3)
	if n := len(cfg.Trace); n == 0 || n >= len(want) || cfg.Trace[0] != want[0] {
		t.Errorf("replay of %d requests starting %+v; want the first 5 minutes of the drawn trace (%d in the hour, first %+v)", n, cfg.Trace[0], len(want), want[0])
	}
	if _, err := Prepare(Options{Trace: "synthetic:tidal", Server: "llm"}); err == nil || !strings.Contains(err.Error(), "--trace") {
		t.Errorf("an unknown kind: %v, want an error naming --trace", err)
	}
}

func FuzzParseSynthetic(f *testing.F) {
	for _, s := range []string{"synthetic:onoff", "synthetic:flash:42", "synthetic::", "synthetic:diurnal:18446744073709551616", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kind, _, ok, err := ParseSynthetic(s)
		if ok != strings.HasPrefix(s, SyntheticPrefix) {
			t.Fatalf("ParseSynthetic(%q): ok %v", s, ok)
		}
		if ok && err == nil && !slices.Contains(SyntheticKinds, kind) {
			t.Fatalf("ParseSynthetic(%q) accepted kind %q", s, kind)
		}
	})
}
