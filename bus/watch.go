package bus

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// EndpointWatch is the endpoint that makes a launcher's consumer on the
// sidecar's events stream (colocd.v1.<id>.watch). A launcher may not create
// consumers itself: a consumer's config, which no permission sees, could
// name a deliver subject inside the sidecars' account, such as the
// JetStream API (docs/security.md).
const EndpointWatch = "watch"

// watchInactive is how long a watch consumer lives without a pull.
const watchInactive = 2 * time.Minute

// WatchRequest asks for a consumer on the sidecar's events: those of one
// job (JobID) or all, from stream sequence FromSeq, or from the first event
// stored at or after Since, or (neither) from the first event kept.
type WatchRequest struct {
	JobID   string     `json:"job_id,omitempty"`
	FromSeq uint64     `json:"from_seq,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
}

// WatchReply names the consumer made: pull it with
// $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>, or, when the stream is not
// on the launcher's server, with the same call in JetStream domain Domain
// (a leaf host's own; "" when there is none).
type WatchReply struct {
	Stream   string `json:"stream"`
	Consumer string `json:"consumer"`
	Domain   string `json:"domain,omitempty"`
}

// DecodeWatchRequest decodes a watch request body, like
// [DecodeAdmitRequest]: strict, and from_seq and since exclusive.
func DecodeWatchRequest(data []byte) (*WatchRequest, error) {
	var r WatchRequest
	if err := decodeStrict("watch request", data, &r); err != nil {
		return nil, err
	}
	if r.FromSeq > 0 && r.Since != nil {
		return nil, BadRequest("watch request: from_seq and since: want one of them, or neither")
	}
	if r.JobID != "" {
		if _, err := JobToken(r.JobID); err != nil {
			return nil, BadRequest("watch request: job_id: " + err.Error())
		}
	}
	return &r, nil
}

// WithEventsDomain says in which JetStream domain the sidecar's events
// stream is, for launchers on another server (a leaf host's: its id).
func WithEventsDomain(domain string) ServeOption {
	return func(s *Service) { s.eventsDomain = domain }
}

// watch makes a pull consumer on the events stream with a config the
// sidecar chooses: the filter inside the events subjects, no acks, in
// memory, gone after watchInactive without a pull.
func (s *Service) watch(ctx context.Context, req micro.Request) (any, error) {
	r, err := DecodeWatchRequest(req.Data())
	if err != nil {
		return nil, err
	}
	filter := EndpointSubject(s.id, "events") + ".>"
	if r.JobID != "" {
		if filter, err = EventSubject(s.id, r.JobID); err != nil {
			return nil, BadRequest("watch request: job_id: " + err.Error())
		}
	}
	cfg := jetstream.ConsumerConfig{
		// 130 random bits: no launcher can guess another's consumer
		// (a nuid is sequential from a random prefix).
		Name:              rand.Text(),
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: watchInactive,
		MemoryStorage:     true,
		Replicas:          1,
	}
	switch {
	case r.FromSeq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, r.FromSeq
	case r.Since != nil:
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, r.Since
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		return nil, err
	}
	stream := EventStreamName(s.id)
	tenant := tenantOf(ctx)
	s.makeRoom(ctx, js, stream, tenant)
	if _, err := js.CreateConsumer(ctx, stream, cfg); err != nil {
		return nil, Unavailable(fmt.Sprintf("watch: consumer on %s: %v", stream, err))
	}
	s.watchMu.Lock()
	s.watches = append(s.watches, watchRecord{name: cfg.Name, tenant: tenant})
	s.watchMu.Unlock()
	return &WatchReply{Stream: stream, Consumer: cfg.Name, Domain: s.eventsDomain}, nil
}

// MaxWatchConsumers bounds the consumers watch keeps on a sidecar's events
// stream: a launcher that asks for a thousand cannot use up the stream's
// consumers for everyone else. Past it the oldest is deleted; a launcher
// still pulling from it asks again from its next sequence (bus.Client's
// Events does) and misses no event. Each tenant keeps at most
// Limits.TenantWatches of them: past that its own oldest goes, so one
// launcher's watches never delete another's.
const MaxWatchConsumers = 256

// watchRecord is a consumer watch made, and for whom.
type watchRecord struct {
	name, tenant string
}

// makeRoom deletes tenant's oldest consumers until one more is within its
// share, then the oldest of all until one more fits. A consumer already
// gone (idled out) is only forgotten.
func (s *Service) makeRoom(ctx context.Context, js jetstream.JetStream, stream, tenant string) {
	s.watchMu.Lock()
	var drop []string
	mine := 0
	for _, w := range s.watches {
		if w.tenant == tenant {
			mine++
		}
	}
	s.watches = slices.DeleteFunc(s.watches, func(w watchRecord) bool {
		if w.tenant == tenant && mine >= s.limits.TenantWatches {
			mine--
			drop = append(drop, w.name)
			return true
		}
		return false
	})
	if n := len(s.watches) - MaxWatchConsumers + 1; n > 0 {
		for _, w := range s.watches[:n] {
			drop = append(drop, w.name)
		}
		s.watches = slices.Delete(s.watches, 0, n)
	}
	s.watchMu.Unlock()
	for _, name := range drop {
		_ = js.DeleteConsumer(ctx, stream, name) // gone already is as good
	}
}
