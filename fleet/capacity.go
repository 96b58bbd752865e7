package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/internal/termtext"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// CapacityFormat names a capacity summary document.
const CapacityFormat = "colocd.capacity/v1"

// CapacityBucket is the KV bucket in which every sidecar of a fleet keeps
// its capacity summary, one key each.
const CapacityBucket = "colocd-fleet"

// Capacity is one sidecar's summary of what it can take, published when it
// changes and on a heartbeat: what a launcher ranks GPUs by before it asks
// any for a quote (docs/fleet.md).
type Capacity struct {
	Format  string `json:"format"`
	Sidecar string `json:"sidecar"`
	// Node is the machine the sidecar runs on (config sidecar.node).
	Node string `json:"node,omitempty"`
	GPU  struct {
		Name string `json:"name"`
		UUID string `json:"uuid"`
		SMs  int    `json:"sms"`
		// MIG is the GPU instance profile of a MIG device ("" for a whole
		// GPU).
		MIG string `json:"mig,omitempty"`
	} `json:"gpu"`
	Mode string `json:"mode"`
	// Healthy says the sidecar admits now (GPU, daemon and predictor);
	// Reason says why not.
	Healthy bool   `json:"healthy"`
	Reason  string `json:"reason,omitempty"`
	// Draining says its operator drained it (colocd drain): it admits
	// nothing until colocd undrain, and placement passes it by.
	Draining bool `json:"draining,omitempty"`
	// FreeMemoryMiB is the GPU memory a job may take now: NVML's free
	// memory less the reserve and the memory of leases not yet visible.
	FreeMemoryMiB int `json:"free_memory_mib"`
	// Leases are the live co-located leases, MaxJobs their bound.
	Leases  int `json:"leases"`
	MaxJobs int `json:"max_jobs"`
	// FreeInstances counts MIG instances it would lend whole now.
	FreeInstances int `json:"free_instances"`
	// Margin is the least of the services' margins, 1 − predicted p99 /
	// limit with the live leases (negative: over the limit).
	Margin   float64           `json:"margin"`
	Services []CapacityService `json:"services"`
	// TypicalPct is the percentage a typical trainer would be granted now
	// (0: denied), from a quote of the sidecar's own typical profile.
	TypicalPct int       `json:"typical_pct"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// CapacityService is one service's part of a summary.
type CapacityService struct {
	Name           string  `json:"name"`
	SLOP99MS       float64 `json:"slo_p99_ms"`
	PredictedP99MS float64 `json:"predicted_p99_ms"`
	Margin         float64 `json:"margin"`
}

// Bounds on a capacity summary read from the bucket.
const (
	maxCapacityBytes    = 16 << 10
	maxCapacityServices = 64
)

// capacityBatchBytes bounds one batch's bytes: far below a server's
// max_pending (64 MB by default), past which it would drop the batch's end
// marker as to a slow consumer; a larger read goes on batch by batch.
const capacityBatchBytes = 128 << 10

// capacityShards is how many key prefixes the summaries spread over: one
// batch read returns at most 1,024 keys (nats-server's limit on a
// multi_last direct get), so a fleet above that is read shard by shard, up
// to 16,384 sidecars.
const capacityShards = 16

// CapacityKey is sidecar id's key in the bucket: a shard (one hex digit of
// the id's hash) and the id in unpadded base64url, so that any id is a
// valid key and the key gives the id back.
func CapacityKey(id string) string {
	h := sha256.Sum256([]byte(id))
	return strconv.FormatUint(uint64(h[0]%capacityShards), 16) + "." + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// idOfKey is CapacityKey's inverse ("" when key is not one).
func idOfKey(key string) string {
	shard, enc, ok := strings.Cut(key, ".")
	if !ok || len(shard) != 1 {
		return ""
	}
	id, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || CapacityKey(string(id)) != key {
		return ""
	}
	return string(id)
}

// Capacities is the bucket of capacity summaries, for a sidecar to
// publish its own in.
type Capacities struct{ kv jetstream.KeyValue }

// OpenCapacities binds to the capacity bucket, creating it (memory
// storage, one revision per key, replicas copies) with ttl as its maximum
// age: a summary not rewritten within ttl is gone, so a dead sidecar drops
// out by itself. An existing bucket keeps its configuration.
func OpenCapacities(ctx context.Context, js jetstream.JetStream, replicas int, ttl time.Duration) (*Capacities, error) {
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:       CapacityBucket,
		Description:  "colocd capacity summaries, one per sidecar",
		History:      1,
		TTL:          ttl,
		MaxValueSize: maxCapacityBytes,
		Storage:      jetstream.MemoryStorage,
		Replicas:     max(replicas, 1),
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, CapacityBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("open kv %s: %w", CapacityBucket, err)
	}
	return &Capacities{kv: kv}, nil
}

// TTL is the bucket's maximum age, which the sidecar that created it set.
func (s *Capacities) TTL(ctx context.Context) (time.Duration, error) {
	st, err := s.kv.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("capacity bucket status: %w", err)
	}
	return st.TTL(), nil
}

// Publish writes c as its sidecar's summary.
func (s *Capacities) Publish(ctx context.Context, c *Capacity) error {
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("publish capacity: %w", err)
	}
	if _, err := s.kv.Put(ctx, CapacityKey(c.Sidecar), data); err != nil {
		return fmt.Errorf("publish capacity: %w", err)
	}
	return nil
}

// Withdraw deletes sidecar id's summary, at a clean shutdown.
func (s *Capacities) Withdraw(ctx context.Context, id string) error {
	if err := s.kv.Delete(ctx, CapacityKey(id)); err != nil {
		return fmt.Errorf("withdraw capacity: %w", err)
	}
	return nil
}

// DecodeCapacity reads one summary from the bucket, which any sidecar
// identity may write: strict JSON, bounded in size and in every number, and
// named by its key (key "" skips that check).
func DecodeCapacity(key string, data []byte) (*Capacity, error) {
	if len(data) > maxCapacityBytes {
		return nil, fmt.Errorf("capacity: %d bytes, more than %d", len(data), maxCapacityBytes)
	}
	var c Capacity
	if err := v1.DecodeStrict("capacity", data, &c); err != nil {
		return nil, err
	}
	var bad []string
	add := func(field, want string, got any) {
		bad = append(bad, fmt.Sprintf("%s: want %s, got %v", field, want, got))
	}
	if c.Format != CapacityFormat {
		add("format", strconv.Quote(CapacityFormat), strconv.Quote(c.Format))
	}
	if err := v1.ValidateSidecarID(c.Sidecar); err != nil {
		add("sidecar", "a sidecar id", err)
	} else if key != "" && idOfKey(key) != c.Sidecar {
		add("sidecar", "the id its key names", strconv.Quote(c.Sidecar))
	}
	if len(c.Node) > 253 || strings.ContainsFunc(c.Node, func(r rune) bool { return r <= ' ' || r > '~' }) {
		add("node", "up to 253 printable characters", strconv.Quote(termtext.Clip(c.Node)))
	}
	for _, f := range []struct {
		name string
		v    int
		max  int
	}{{"free_memory_mib", c.FreeMemoryMiB, 1 << 24}, {"leases", c.Leases, 1 << 16}, {"max_jobs", c.MaxJobs, 1 << 16},
		{"free_instances", c.FreeInstances, 7}, {"typical_pct", c.TypicalPct, 100}, {"gpu.sms", c.GPU.SMs, 10_000}} {
		if f.v < 0 || f.v > f.max {
			add(f.name, fmt.Sprintf("an integer in [0, %d]", f.max), f.v)
		}
	}
	if !finiteIn(c.Margin, -1e6, 1) {
		add("margin", "a margin in [-1e6, 1]", c.Margin)
	}
	if len(c.Services) > maxCapacityServices {
		add("services", fmt.Sprintf("at most %d", maxCapacityServices), len(c.Services))
	}
	for i, s := range c.Services {
		if !finiteIn(s.SLOP99MS, 0, 3.6e6) || !finiteIn(s.PredictedP99MS, 0, 1e12) || !finiteIn(s.Margin, -1e6, 1) {
			add(fmt.Sprintf("services[%d]", i), "finite latencies and a margin in [-1e6, 1]", fmt.Sprintf("%+v", s))
		}
	}
	for _, f := range []struct{ name, v string }{{"gpu.name", c.GPU.Name}, {"gpu.uuid", c.GPU.UUID}, {"gpu.mig", c.GPU.MIG}, {"mode", c.Mode}, {"reason", c.Reason}} {
		if len(f.v) > 256 {
			add(f.name, "at most 256 bytes", len(f.v))
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("capacity of %q: %s", termtext.Clip(c.Sidecar), strings.Join(bad, "; "))
	}
	return &c, nil
}

func finiteIn(v, lo, hi float64) bool { return !math.IsNaN(v) && v >= lo && v <= hi }

// ReadCapacities reads every live summary of the bucket in one direct get
// (JetStream's multi_last batch: one request, one message per key, an end
// marker), shard by shard when the fleet is larger than one batch may
// return. It needs only publish permission on the bucket's direct-get
// subject. apiPrefix is the JetStream API prefix ("" for "$JS.API"; a
// leaf node reaches the hub's domain D as "$JS.D.API"). Without a deadline
// in ctx it waits ReadTimeout at most: a request the server refuses for
// permissions is never answered. Summaries that do not decode are returned
// as errors beside the good ones, never instead.
func ReadCapacities(ctx context.Context, nc *nats.Conn, apiPrefix string) ([]*Capacity, []error, error) {
	if _, ok := ctx.Deadline(); !ok { // a refused publish is never answered
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ReadTimeout)
		defer cancel()
	}
	if apiPrefix == "" {
		apiPrefix = "$JS.API"
	}
	subject := apiPrefix + ".DIRECT.GET.KV_" + CapacityBucket
	out, bad, err := readShard(ctx, nc, subject, "$KV."+CapacityBucket+".>")
	if !errors.Is(err, errTooManyResults) {
		return out, bad, err
	}
	out, bad = nil, nil
	for s := range capacityShards {
		o, b, err := readShard(ctx, nc, subject, "$KV."+CapacityBucket+"."+strconv.FormatUint(uint64(s), 16)+".*")
		if err != nil {
			return nil, nil, err
		}
		out, bad = append(out, o...), append(bad, b...)
	}
	return out, bad, nil
}

// ReadTimeout bounds a ReadCapacities whose context has no deadline: the
// bound a client of the API gives its requests (bus.DefaultTimeout).
const ReadTimeout = 5 * time.Second

var errTooManyResults = errors.New("read capacities: more keys than one batch returns")

// readShard reads the summaries under filter with multi_last direct
// gets: one, and more when the server ends a batch early (its byte
// limit) with messages pending, each from the last sequence on, up to the
// first batch's end sequence.
func readShard(ctx context.Context, nc *nats.Conn, subject, filter string) ([]*Capacity, []error, error) {
	var (
		out        []*Capacity
		bad        []error
		from, upTo uint64
	)
	for range 1 << 10 {
		o, b, next, end, err := readBatch(ctx, nc, subject, filter, from, upTo)
		if err != nil {
			return nil, nil, err
		}
		out, bad = append(out, o...), append(bad, b...)
		if next == 0 {
			return out, bad, nil
		}
		from, upTo = next, end
	}
	return nil, nil, errors.New("read capacities: the server kept ending batches early")
}

// readBatch is one multi_last direct get from sequence from (0: the
// first) up to sequence upTo (0: the stream's last). next is where to go on
// when the batch ended with messages pending (0: done), end the batch's
// last sequence considered.
func readBatch(ctx context.Context, nc *nats.Conn, subject, filter string, from, upTo uint64) (out []*Capacity, bad []error, next, end uint64, err error) {
	r := map[string]any{"multi_last": []string{filter}, "max_bytes": capacityBatchBytes}
	if from > 0 {
		r["seq"], r["up_to_seq"] = from, upTo
	}
	req, err := json.Marshal(r)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, nil, 0, 0, fmt.Errorf("read capacities: subscribe: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, req); err != nil {
		return nil, nil, 0, 0, fmt.Errorf("read capacities: %w", err)
	}
	prefix := "$KV." + CapacityBucket + "."
	var last uint64
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, nil, 0, 0, fmt.Errorf("read capacities: %w", err)
		}
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			switch code := m.Header.Get("Status"); {
			case code == "204": // end of batch
				pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
				upTo, _ := strconv.ParseUint(m.Header.Get("Nats-UpTo-Sequence"), 10, 64)
				if pending > 0 && last > 0 {
					return out, bad, last + 1, upTo, nil
				}
				return out, bad, 0, 0, nil
			case code == "404" && last == 0: // no summaries
				return out, bad, 0, 0, nil
			case code == "413":
				return nil, nil, 0, 0, errTooManyResults
			case code == "503":
				return nil, nil, 0, 0, fmt.Errorf("read capacities: %w", nats.ErrNoResponders)
			default:
				return nil, nil, 0, 0, fmt.Errorf("read capacities: status %s %s", code, m.Header.Get("Description"))
			}
		}
		last, _ = strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			continue // withdrawn
		}
		key, _ := strings.CutPrefix(m.Header.Get("Nats-Subject"), prefix)
		c, err := DecodeCapacity(key, bytes.TrimSpace(m.Data))
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, c)
	}
}
