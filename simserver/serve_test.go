package simserver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/predictor"
)

// The cache is keyed by content: two copies of one profile share an entry,
// a different percentage or rate step does not, and the least recently
// used entry goes once the cache is full.
func TestModelCacheByContentAndBounded(t *testing.T) {
	t.Parallel()
	m := testModel(t)
	m.Requests, m.capacity = 50, 2
	a, b := v100(t, predictor.KindTraining), v100(t, predictor.KindTraining)
	steps := []struct {
		name     string
		rate     float64
		trainers []Trainer
		want     int
	}{
		{"first load", 4, []Trainer{{Profile: a, Pct: 30}}, 1},
		{"an equal profile elsewhere in memory", 4, []Trainer{{Profile: b, Pct: 30}}, 1},
		{"the same rate step", 3.9, []Trainer{{Profile: b, Key: a.Key(), Pct: 30}}, 1},
		{"another percentage", 4, []Trainer{{Profile: a, Pct: 40}}, 2},
		{"a third load evicts the oldest", 8, nil, 2},
	}
	var first predictor.Percentiles
	for i, st := range steps {
		p, err := m.Latency(st.rate, st.trainers)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if i == 0 {
			first = p
		}
		if i > 0 && i < 3 && p != first {
			t.Errorf("%s: %+v, want the first load's %+v", st.name, p, first)
		}
		if got := m.cacheLen(); got != st.want {
			t.Errorf("%s: %d entries, want %d", st.name, got, st.want)
		}
	}
	if m.cache.Contains(loadKey(4, steps[0].trainers)) { // the least recently used: gone
		t.Errorf("the least recently used entry is still cached")
	}
}

// TrainersOf takes the leases with processes on the shared GPU, each at
// its percentage with the profile's key, and leaves out a lent instance.
func TestTrainersOf(t *testing.T) {
	t.Parallel()
	tr := v100(t, predictor.KindTraining)
	st := &v1.Status{Leases: []v1.Lease{
		{ID: "l1", ActiveThreadPct: 30, PIDs: []int{7}},
		{ID: "l2", ActiveThreadPct: 50},
		{ID: "l3", ActiveThreadPct: 100, PIDs: []int{8}, Instance: &v1.Instance{UUID: "MIG-x"}},
	}}
	got := TrainersOf(st, tr)
	if len(got) != 1 || got[0].Pct != 30 || got[0].Profile != tr || got[0].Key != tr.Key() {
		t.Errorf("got %+v, want l1's job at 30 %% with the profile's key", got)
	}
}

// Follow keeps the last jobs read while reads fail, and says so once.
func TestJobsFollow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	reads := 0
	var warn strings.Builder
	j := &Jobs{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		j.Follow(ctx, time.Millisecond, func(context.Context) ([]Trainer, error) {
			reads++
			switch {
			case reads == 1:
				return []Trainer{{Pct: 40}}, nil
			case reads < 5:
				return nil, errors.New("no responders")
			}
			cancel()
			return []Trainer{{Pct: 40}, {Pct: 20}}, nil
		}, &warn)
	}()
	<-done
	if got := j.Now(); len(got) != 2 || got[1].Pct != 20 {
		t.Errorf("jobs %+v, want the last read's", got)
	}
	if n := strings.Count(warn.String(), "no responders"); n != 1 {
		t.Errorf("warned %d times, want once:\n%s", n, warn.String())
	}
}
