package bus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/colocd/colocd/natsserver"

	v1 "github.com/colocd/colocd/api/v1"
)

// openEvents opens sidecar id's events stream and serves its API, whose
// watch endpoint makes the launchers' consumers.
func openEvents(t *testing.T, e *natsserver.Embedded, id string) *Events {
	t.Helper()
	serve(t, e, id, newFakeHandler())
	js := jetStreamOf(t, e)
	ev, err := OpenEvents(testCtx(t), js, id, time.Hour, 1)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// eventsServer starts a server with sidecar gpu-a's service and events
// stream, and returns the stream's publisher.
func eventsServer(t *testing.T) (*natsserver.Embedded, *Events) {
	t.Helper()
	e := startServer(t)
	return e, openEvents(t, e, "gpu-a")
}

// next reads one event or fails after the test context's deadline.
func next(t *testing.T, s *EventSubscription) EventRecord {
	t.Helper()
	select {
	case r, ok := <-s.C():
		if !ok {
			t.Fatalf("subscription ended: %v", s.Err())
		}
		return r
	case <-testCtx(t).Done():
		t.Fatal("no event")
	}
	return EventRecord{}
}

func event(typ, job string, sec int) v1.Event {
	return v1.Event{Type: typ, LeaseID: "lease-" + job, JobID: job, Reason: typ + " " + job,
		Time: time.Date(2026, 3, 1, 12, 0, sec, 0, time.UTC)}
}

func TestEventsResumeFromSequence(t *testing.T) {
	t.Parallel()
	e, pub := eventsServer(t)
	ctx := testCtx(t)
	const job = "team.a/job 7" // not a subject token: escaped
	for i, ev := range []v1.Event{
		event(v1.EventThrottle, job, 1),
		event(v1.EventRevoke, "other-job", 2),
		event(v1.EventThrottle, job, 3),
		event(v1.EventThrottle, job, 3), // same id: deduplicated
		event(v1.EventRevoke, job, 4),
	} {
		if err := pub.Publish(ctx, ev); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}

	c := NewClient(connect(t, e))
	sub, err := c.Events(ctx, "gpu-a", job, 0)
	if err != nil {
		t.Fatal(err)
	}
	first, second := next(t, sub), next(t, sub)
	if first.Event.Time.Second() != 1 || second.Event.Time.Second() != 3 || first.Event.JobID != job {
		t.Fatalf("read %+v then %+v", first, second)
	}
	// The launcher goes away after the second event ...
	if err := sub.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-sub.C(); ok {
		t.Fatal("channel open after Stop")
	}
	// ... meanwhile the sidecar publishes one more ...
	mustPublish(t, ctx, pub, event(v1.EventExpire, job, 5))
	// ... and it comes back from the next sequence.
	sub, err = c.Events(ctx, "gpu-a", job, second.Seq+1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Stop() }()
	var got []string
	for range 2 {
		got = append(got, next(t, sub).Event.Type)
	}
	if got[0] != v1.EventRevoke || got[1] != v1.EventExpire {
		t.Errorf("after resume read %v, want [revoke expire]", got)
	}
	// Live events follow.
	mustPublish(t, ctx, pub, event(v1.EventThrottle, job, 6))
	if r := next(t, sub); r.Event.Time.Second() != 6 {
		t.Errorf("live event %+v", r)
	}
}

func TestEventsSinceAndAllJobs(t *testing.T) {
	t.Parallel()
	e, pub := eventsServer(t)
	ctx := testCtx(t)
	mustPublish(t, ctx, pub, event(v1.EventRevoke, "j1", 1))
	c := NewClient(connect(t, e))

	all, err := c.Events(ctx, "gpu-a", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = all.Stop() }()
	mustPublish(t, ctx, pub, event(v1.EventExpire, "j2", 2))
	if a, b := next(t, all), next(t, all); a.Event.JobID != "j1" || b.Event.JobID != "j2" {
		t.Errorf("all jobs: %+v, %+v", a, b)
	}

	// A start in the future skips what is stored and follows new events; a
	// start in the past reads what is stored first.
	future, err := c.EventsSince(ctx, "gpu-a", "j1", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = future.Stop() }()
	past, err := c.EventsSince(ctx, "gpu-a", "j1", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = past.Stop() }()
	if r := next(t, past); r.Event.Time.Second() != 1 {
		t.Errorf("since an hour ago: %+v", r)
	}
	mustPublish(t, ctx, pub, event(v1.EventThrottle, "j1", 9))
	if r := next(t, past); r.Event.Time.Second() != 9 {
		t.Errorf("since an hour ago, live: %+v", r)
	}
	if r := next(t, future); r.Event.Time.Second() != 9 {
		t.Errorf("since in an hour: first event %+v, want the live one", r)
	}
}

func TestEventsContextEndsSubscription(t *testing.T) {
	t.Parallel()
	e, _ := eventsServer(t)
	c := NewClient(connect(t, e))
	ctx, cancel := context.WithCancel(testCtx(t))
	sub, err := c.Events(ctx, "gpu-a", "j", 0)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range sub.C() {
	}
	if err := sub.Stop(); err != nil {
		t.Errorf("Stop after cancel: %v", err)
	}
}

func TestEventsErrors(t *testing.T) {
	t.Parallel()
	e, pub := eventsServer(t)
	ctx := testCtx(t)
	for _, ev := range []v1.Event{
		{Type: "explode", LeaseID: "l", JobID: "j"},
		{Type: v1.EventRevoke, JobID: "j"},
		{Type: v1.EventRevoke, LeaseID: "l"},
	} {
		if err := pub.Publish(ctx, ev); err == nil {
			t.Errorf("Publish(%+v) succeeded", ev)
		}
	}
	c := NewClient(connect(t, e))
	if _, err := c.Events(ctx, "gpu-unknown", "j", 0); !errors.Is(err, v1.ErrNoSidecar) {
		t.Errorf("Events on a sidecar that is not there: got %v, want ErrNoSidecar", err)
	}
	serve(t, e, "gpu-no-stream", newFakeHandler())
	if _, err := c.Events(ctx, "gpu-no-stream", "j", 0); v1.CodeOf(err) != v1.CodeUnavailable || !strings.Contains(err.Error(), "stream not found") {
		t.Errorf("Events on a sidecar without stream: got %v, want a 503 that says so", err)
	}
	if _, err := c.Events(ctx, "gpu.a", "j", 0); err == nil {
		t.Error("Events with a bad sidecar id succeeded")
	}
}

func TestOpenEventsUpdatesLimits(t *testing.T) {
	t.Parallel()
	e := startServer(t)
	js := jetStreamOf(t, e)
	ctx := testCtx(t)
	for _, age := range []time.Duration{time.Hour, 30 * time.Second, 0} {
		ev, err := OpenEvents(ctx, js, "GPU-5f2d/1", age, 1)
		if err != nil {
			t.Fatalf("maxAge %s: %v", age, err)
		}
		s, err := js.Stream(ctx, ev.Stream())
		if err != nil {
			t.Fatal(err)
		}
		want := age
		if want == 0 {
			want = DefaultEventsMaxAge
		}
		cfg := s.CachedInfo().Config
		if cfg.MaxAge != want || cfg.Duplicates > want || cfg.Subjects[0] != "colocd.v1.GPU-5f2d/1.events.>" {
			t.Errorf("maxAge %s: stream %s config %+v", age, ev.Stream(), cfg)
		}
	}
}

// A watch consumer's name is 26 random base32 characters (130 bits), not
// a nuid that follows the one before: one launcher cannot guess another's.
func TestWatchConsumerNamesUnguessable(t *testing.T) {
	t.Parallel()
	e, _ := eventsServer(t)
	c := NewClient(connect(t, e))
	names := map[string]bool{}
	for range 3 {
		wc, err := c.watch(testCtx(t), "gpu-a", v1.WatchRequest{})
		if err != nil {
			t.Fatal(err)
		}
		name := wc.cons.CachedInfo().Name
		wc.close()
		if len(name) != 26 || names[name] {
			t.Errorf("consumer %q: want 26 characters, none seen before", name)
		}
		names[name] = true
	}
}

// A launcher that asks for many more watches than MaxWatchConsumers uses
// up nothing: the sidecar keeps at most that many consumers, and another
// launcher's subscription, made before the flood, still gets its job's
// next event (its consumer, if deleted, is asked for again from its next
// sequence).
func TestWatchFloodKeepsOthersWatching(t *testing.T) {
	t.Parallel()
	e, pub := eventsServer(t)
	honest := NewClient(connect(t, e))
	// The subscription lives as long as the test: the flood below may take
	// longer than one request's deadline on a busy machine.
	sub, err := honest.Events(t.Context(), "gpu-a", "job-h", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	hostile := NewClient(connect(t, e))
	for i := range MaxWatchConsumers + 40 {
		// Each watch its own deadline: every one must be answered, however
		// long a thousand take on a busy machine.
		var r v1.WatchReply
		if err := hostile.call(testCtx(t), "gpu-a", v1.EndpointWatch, &v1.WatchRequest{}, &r); err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
	}
	ctx := testCtx(t)
	js := jetStreamOf(t, e)
	st, err := js.Stream(ctx, v1.EventStreamName("gpu-a"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Consumers; n > MaxWatchConsumers {
		t.Errorf("%d consumers on the stream after %d watches, want at most %d", n, MaxWatchConsumers+40, MaxWatchConsumers)
	}
	mustPublish(t, ctx, pub, event(v1.EventThrottle, "job-h", 1))
	if got := next(t, sub); got.Event.JobID != "job-h" || got.Event.Type != v1.EventThrottle {
		t.Errorf("the honest launcher got %+v, want its throttle", got)
	}
}
