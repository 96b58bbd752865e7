package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats.go/micro"
)

// DiscoverSubject is what Sidecars asks: micro's PING of the colocd
// service, which every sidecar answers and a launcher may send.
const DiscoverSubject = "$SRV.PING." + v1.ServiceName

// maxDiscovered bounds the sidecars Sidecars keeps: answers are untrusted,
// and a fleet is far smaller.
const maxDiscovered = 4096

// Sidecars asks every sidecar on the bus for its id (DiscoverSubject) and
// returns the ids that answered until wait elapsed or ctx ended, sorted and
// each once. Answers are untrusted: one that is not the colocd service's
// PING answer or does not name a valid sidecar id is skipped. With no
// answer at all it returns ErrNoSidecar (at once when nobody listens), or
// ctx's error when ctx ended before wait.
func (c *Client) Sidecars(ctx context.Context, wait time.Duration) ([]string, error) {
	if wait <= 0 {
		return nil, errors.New("discover: want a wait > 0")
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	msg := c.rawMsg(ctx, DiscoverSubject, nil)
	msg.Reply = c.nc.NewInbox()
	sub, err := c.nc.SubscribeSync(msg.Reply)
	if err != nil {
		return nil, fmt.Errorf("discover: subscribe: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.nc.PublishMsg(msg); err != nil {
		return nil, fmt.Errorf("discover: publish: %w", err)
	}
	seen := map[string]bool{}
	for len(seen) < maxDiscovered {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil || isNoResponders(m) {
			break // wait elapsed, ctx ended, or nobody listens
		}
		if id, ok := pingedSidecar(m.Data); ok {
			seen[id] = true
		}
	}
	switch {
	case len(seen) > 0:
		ids := make([]string, 0, len(seen))
		for id := range seen {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids, nil
	case parent.Err() != nil:
		return nil, fmt.Errorf("discover: %w", parent.Err())
	}
	return nil, fmt.Errorf("discover: %w", v1.ErrNoSidecar)
}

// pingedSidecar is the sidecar id a PING answer names, if it is a colocd
// service's answer with a valid id.
func pingedSidecar(data []byte) (string, bool) {
	var p micro.Ping
	if len(data) > maxPingAnswer || json.Unmarshal(data, &p) != nil || p.Type != micro.PingResponseType || p.Name != v1.ServiceName {
		return "", false
	}
	id := p.Metadata["sidecar"]
	return id, v1.ValidateSidecarID(id) == nil
}

// maxPingAnswer bounds the PING answer Sidecars decodes: micro's is a few
// hundred bytes.
const maxPingAnswer = 16 << 10
