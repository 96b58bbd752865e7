package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Limits of a sidecar's event stream.
const (
	// DefaultEventsMaxAge is the retention OpenEvents uses for maxAge <= 0.
	DefaultEventsMaxAge = 24 * time.Hour
	// EventsMaxMsgs caps the stream; the oldest events go first.
	EventsMaxMsgs = 100_000
	// EventsMaxMsgsPerJob caps the events kept for one job.
	EventsMaxMsgsPerJob = 1_000
	// eventsDuplicateWindow is how long a Nats-Msg-Id deduplicates.
	eventsDuplicateWindow = 2 * time.Minute
)

// Events publishes a sidecar's lease events to its JetStream stream,
// EventStreamName(id), on colocd.v1.<id>.events.<JobToken(job)>.
type Events struct {
	js      jetstream.JetStream
	id      string
	stream  string
	subject string
}

// OpenEvents creates the sidecar's event stream, or updates its limits when
// it exists: subjects colocd.v1.<id>.events.>, file storage, events older
// than maxAge (DefaultEventsMaxAge when <= 0) dropped, at most EventsMaxMsgs
// in all and EventsMaxMsgsPerJob per job, replicas copies (at least one; a
// cluster keeps them on as many servers).
func OpenEvents(ctx context.Context, js jetstream.JetStream, sidecarID string, maxAge time.Duration, replicas int) (*Events, error) {
	if err := v1.ValidateSidecarID(sidecarID); err != nil {
		return nil, fmt.Errorf("open events: %w", err)
	}
	if maxAge <= 0 {
		maxAge = DefaultEventsMaxAge
	}
	e := &Events{
		js:      js,
		id:      sidecarID,
		stream:  v1.EventStreamName(sidecarID),
		subject: v1.EndpointSubject(sidecarID, "events"),
	}
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              e.stream,
		Description:       "colocd lease events of sidecar " + sidecarID,
		Subjects:          []string{e.subject + ".>"},
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxAge:            maxAge,
		MaxMsgs:           EventsMaxMsgs,
		MaxMsgsPerSubject: EventsMaxMsgsPerJob,
		Storage:           jetstream.FileStorage,
		Replicas:          max(replicas, 1),
		Duplicates:        min(eventsDuplicateWindow, maxAge),
	})
	if err != nil {
		return nil, fmt.Errorf("open events: stream %s: %w", e.stream, err)
	}
	return e, nil
}

// Stream returns the stream's name.
func (e *Events) Stream() string { return e.stream }

// Publish stores ev (Type, LeaseID and JobID required; a zero Time becomes
// now) on the job's subject. Its Nats-Msg-Id is lease id, type and time, so
// publishing the same event twice within two minutes stores it once.
func (e *Events) Publish(ctx context.Context, ev v1.Event) error {
	switch ev.Type {
	case v1.EventThrottle, v1.EventRevoke, v1.EventExpire, v1.EventRaise:
	default:
		return fmt.Errorf("publish event: unknown type %q", ev.Type)
	}
	if ev.LeaseID == "" {
		return errors.New("publish event: empty lease id")
	}
	subject, err := v1.EventSubject(e.id, ev.JobID)
	if err != nil {
		return fmt.Errorf("publish event: %w", err)
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ev.Time = ev.Time.UTC()
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("publish event: %w", err)
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	msgID := ev.LeaseID + "/" + ev.Type + "/" + ev.Time.Format(time.RFC3339Nano)
	if _, err := e.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID)); err != nil {
		return fmt.Errorf("publish event %s for lease %s: %w", ev.Type, ev.LeaseID, err)
	}
	return nil
}

// EventRecord is an event read from the stream with its stream sequence: a
// launcher that keeps the last Seq it handled resumes from Seq+1.
type EventRecord struct {
	// Seq is the event's sequence in the sidecar's stream.
	Seq uint64
	// Event is the decoded event.
	Event v1.Event
}

// EventSubscription delivers a job's events in stream order on C until it
// is stopped, its context ends, or reading fails (then Err says why).
// Messages on the stream that are not valid events are skipped.
type EventSubscription struct {
	c      chan EventRecord
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error
}

// C returns the channel of events; it is closed when the subscription ends.
func (s *EventSubscription) C() <-chan EventRecord { return s.c }

// Stop ends the subscription, waits for its goroutine and returns Err.
func (s *EventSubscription) Stop() error {
	s.cancel()
	<-s.done
	return s.Err()
}

// Err returns why the subscription ended: nil while it runs, and when it
// was stopped or its context ended.
func (s *EventSubscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Events reads the events of one job (all jobs when jobID is "") of sidecar
// sidecarID from stream sequence fromSeq on (0: from the oldest kept), then
// follows new ones, through a consumer the sidecar makes (the watch
// endpoint) and that is made again, from the next sequence, when it goes. A
// launcher that reconnects passes the last Seq it handled plus one and
// misses nothing the stream still holds.
func (c *Client) Events(ctx context.Context, sidecarID, jobID string, fromSeq uint64) (*EventSubscription, error) {
	return c.events(ctx, sidecarID, v1.WatchRequest{JobID: jobID, FromSeq: fromSeq})
}

// EventsSince is Events from the first event stored at or after since (by
// the server's clock), or from the next new event when none is.
func (c *Client) EventsSince(ctx context.Context, sidecarID, jobID string, since time.Time) (*EventSubscription, error) {
	return c.events(ctx, sidecarID, v1.WatchRequest{JobID: jobID, Since: &since})
}

func (c *Client) events(ctx context.Context, sidecarID string, w v1.WatchRequest) (*EventSubscription, error) {
	if err := v1.ValidateSidecarID(sidecarID); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if w.JobID != "" {
		if _, err := v1.EventSubject(sidecarID, w.JobID); err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
	}
	wc, err := c.watch(ctx, sidecarID, w)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &EventSubscription{c: make(chan EventRecord), cancel: cancel, done: make(chan struct{})}
	go s.run(ctx, c, sidecarID, w, wc)
	return s, nil
}

// watchConsumer is a consumer the sidecar made, bound and consumed.
type watchConsumer struct {
	js   jetstream.JetStream // where it is: this server's, or the leaf's domain
	cons jetstream.Consumer
	it   jetstream.MessagesContext
}

// close stops consuming and deletes the consumer at once rather than at
// its inactive threshold, best effort.
func (w *watchConsumer) close() {
	w.it.Stop()
	info := w.cons.CachedInfo()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = w.js.DeleteConsumer(ctx, info.Stream, info.Name)
}

// watch asks the sidecar for a consumer and binds to it: on this server's
// JetStream, else in the domain the sidecar names (a leaf host's).
func (c *Client) watch(ctx context.Context, sidecarID string, w v1.WatchRequest) (*watchConsumer, error) {
	var r v1.WatchReply
	if err := c.call(ctx, sidecarID, v1.EndpointWatch, &w, &r); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	bctx, cancel := c.Bound(ctx)
	defer cancel()
	js, err := jetstream.New(c.nc)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	cons, err := js.Consumer(bctx, r.Stream, r.Consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		if r.Domain == "" {
			return nil, fmt.Errorf("events: consumer %s on %s: %w", r.Consumer, r.Stream, err)
		}
		if js, err = jetstream.NewWithDomain(c.nc, r.Domain); err == nil {
			cons, err = js.Consumer(bctx, r.Stream, r.Consumer)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("events: consumer %s on %s: %w", r.Consumer, r.Stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("events: consume %s: %w", r.Stream, err)
	}
	return &watchConsumer{js: js, cons: cons, it: it}, nil
}

// rewatchWait is the pause before a consumer that went is asked for again.
const rewatchWait = time.Second

func (s *EventSubscription) run(ctx context.Context, c *Client, sidecarID string, w v1.WatchRequest, wc *watchConsumer) {
	defer close(s.done)
	defer close(s.c)
	defer func() {
		if wc != nil {
			wc.close()
		}
	}()
	for {
		m, err := wc.it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// The consumer went (the server restarted, or it idled out):
			// ask for another from the next event on.
			wc.close()
			if wc = s.rewatch(ctx, c, sidecarID, w, err); wc == nil {
				return
			}
			continue
		}
		meta, err := m.Metadata()
		if err != nil {
			continue
		}
		w.FromSeq, w.Since = meta.Sequence.Stream+1, nil
		ev, err := v1.DecodeEvent(m.Data())
		if err != nil {
			continue
		}
		select {
		case s.c <- EventRecord{Seq: meta.Sequence.Stream, Event: *ev}:
		case <-ctx.Done():
			return
		}
	}
}

// rewatch asks for a new consumer every rewatchWait until one comes or ctx
// ends; nil when none will (ctx ended, or the sidecar refuses the request,
// which is then the subscription's error).
func (s *EventSubscription) rewatch(ctx context.Context, c *Client, sidecarID string, w v1.WatchRequest, cause error) *watchConsumer {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(rewatchWait):
		}
		wc, err := c.watch(ctx, sidecarID, w)
		if err == nil {
			return wc
		}
		if v1.CodeOf(err) == v1.CodeBadRequest {
			s.mu.Lock()
			s.err = fmt.Errorf("%w (after %v)", err, cause)
			s.mu.Unlock()
			return nil
		}
	}
}
