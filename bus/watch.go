package bus

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// watchInactive is how long a watch consumer lives without a pull.
const watchInactive = 2 * time.Minute

// WithEventsDomain says in which JetStream domain the sidecar's events
// stream is, for launchers on another server (a leaf host's: its id).
func WithEventsDomain(domain string) ServeOption {
	return func(s *Service) { s.eventsDomain = domain }
}

// watch makes a pull consumer on the events stream with a config the
// sidecar chooses: the filter inside the events subjects, no acks, in
// memory, gone after watchInactive without a pull.
func (s *Service) watch(ctx context.Context, req micro.Request) (any, error) {
	r, err := v1.DecodeWatchRequest(req.Data())
	if err != nil {
		return nil, err
	}
	filter := v1.EndpointSubject(s.id, "events") + ".>"
	if r.JobID != "" {
		if filter, err = v1.EventSubject(s.id, r.JobID); err != nil {
			return nil, v1.BadRequest("watch request: job_id: " + err.Error())
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
	stream := v1.EventStreamName(s.id)
	tenant := tenantOf(ctx)
	s.makeRoom(ctx, js, stream, tenant)
	if _, err := js.CreateConsumer(ctx, stream, cfg); err != nil {
		return nil, v1.Unavailable(fmt.Sprintf("watch: consumer on %s: %v", stream, err))
	}
	s.watchMu.Lock()
	s.watches = append(s.watches, watchRecord{name: cfg.Name, tenant: tenant})
	s.watchMu.Unlock()
	return &v1.WatchReply{Stream: stream, Consumer: cfg.Name, Domain: s.eventsDomain}, nil
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
