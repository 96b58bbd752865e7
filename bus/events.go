package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

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
	if err := ValidateSidecarID(sidecarID); err != nil {
		return nil, fmt.Errorf("open events: %w", err)
	}
	if maxAge <= 0 {
		maxAge = DefaultEventsMaxAge
	}
	e := &Events{
		js:      js,
		id:      sidecarID,
		stream:  EventStreamName(sidecarID),
		subject: EndpointSubject(sidecarID, "events"),
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
func (e *Events) Publish(ctx context.Context, ev Event) error {
	switch ev.Type {
	case EventThrottle, EventRevoke, EventExpire, EventRaise:
	default:
		return fmt.Errorf("publish event: unknown type %q", ev.Type)
	}
	if ev.LeaseID == "" {
		return errors.New("publish event: empty lease id")
	}
	subject, err := EventSubject(e.id, ev.JobID)
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
	Event Event
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
// follows new ones, with an ordered consumer. A launcher that reconnects
// passes the last Seq it handled plus one and misses nothing the stream
// still holds.
func (c *Client) Events(ctx context.Context, sidecarID, jobID string, fromSeq uint64) (*EventSubscription, error) {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if fromSeq > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = fromSeq
	}
	return c.events(ctx, sidecarID, jobID, cfg)
}

// EventsSince is Events from the first event stored at or after since (by
// the server's clock), or from the next new event when none is.
func (c *Client) EventsSince(ctx context.Context, sidecarID, jobID string, since time.Time) (*EventSubscription, error) {
	cfg := jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime:  &since,
	}
	return c.events(ctx, sidecarID, jobID, cfg)
}

func (c *Client) events(ctx context.Context, sidecarID, jobID string, cfg jetstream.OrderedConsumerConfig) (*EventSubscription, error) {
	if err := ValidateSidecarID(sidecarID); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	filter := EndpointSubject(sidecarID, "events") + ".>"
	if jobID != "" {
		var err error
		if filter, err = EventSubject(sidecarID, jobID); err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
	}
	cfg.FilterSubjects = []string{filter}
	stream := EventStreamName(sidecarID)
	cons, err := c.eventsConsumer(ctx, sidecarID, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("events: consumer on %s: %w", stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("events: consume %s: %w", stream, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &EventSubscription{c: make(chan EventRecord), cancel: cancel, done: make(chan struct{})}
	go s.run(ctx, it)
	return s, nil
}

// eventsConsumer makes an ordered consumer on a sidecar's event stream:
// in this server's JetStream, else, when no stream has that name here, in
// the sidecar's own domain, where a leaf host keeps it (LeafDomain).
func (c *Client) eventsConsumer(ctx context.Context, sidecarID, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return nil, err
	}
	cons, err := js.OrderedConsumer(ctx, stream, cfg)
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return cons, err
	}
	leaf, lerr := jetstream.NewWithDomain(c.nc, LeafDomain(sidecarID))
	if lerr != nil {
		return nil, err
	}
	if cons, lerr := leaf.OrderedConsumer(ctx, stream, cfg); lerr == nil {
		return cons, nil
	}
	return nil, err // the stream is nowhere: say so, not why the leaf did not answer
}

func (s *EventSubscription) run(ctx context.Context, it jetstream.MessagesContext) {
	defer close(s.done)
	defer close(s.c)
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() == nil {
				s.mu.Lock()
				s.err = fmt.Errorf("events: %w", err)
				s.mu.Unlock()
			}
			return
		}
		meta, err := m.Metadata()
		if err != nil {
			continue
		}
		ev, err := DecodeEvent(m.Data())
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
