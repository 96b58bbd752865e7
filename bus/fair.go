package bus

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/colocd/colocd/field"
)

// How one launcher is kept from starving the others (docs/security.md#
// containment). micro hands each endpoint's requests to one goroutine, in
// arrival order: one slow admit would hold every other behind it, and a
// flood from one launcher would fill the queue everyone shares. So the
// endpoint's goroutine only sorts: it reads who sent the request (Tenant),
// takes a token from that tenant's bucket (past its rate: a 429 at once),
// and puts the request in that tenant's queue (full: a 503 at once, with
// Retry-After). Workers take the queues' heads in turn, one tenant after
// another, so a tenant with a thousand requests waiting delays another's
// next one by at most one request per worker. Decisions (admit, quote) and
// lease calls (renew, release, register, status) have their own queues and
// workers: a renew never waits behind a prediction.

// Limits bound what the launchers can make a sidecar do, per tenant (a
// launcher identity) and in all. The zero value of a field takes its
// default (DefaultLimits).
type Limits struct {
	// DecideWorkers decide admits and quotes in parallel (0: one per CPU,
	// at least 2).
	DecideWorkers int `mapstructure:"decide_workers" json:"decide_workers"`
	// DecideQueue is how many admits and quotes wait for a worker, all
	// tenants together; TenantDecideQueue how many of them one tenant may
	// have waiting. Past either, a request is a 503 with Retry-After.
	DecideQueue       int `mapstructure:"decide_queue" json:"decide_queue"`
	TenantDecideQueue int `mapstructure:"tenant_decide_queue" json:"tenant_decide_queue"`
	// LeaseQueue and TenantLeaseQueue are the same for renew, release,
	// register and status, which LeaseWorkers serve.
	LeaseWorkers     int `mapstructure:"lease_workers" json:"lease_workers"`
	LeaseQueue       int `mapstructure:"lease_queue" json:"lease_queue"`
	TenantLeaseQueue int `mapstructure:"tenant_lease_queue" json:"tenant_lease_queue"`
	// TenantRate is the requests per second one tenant may send to each
	// class of endpoints (decisions; lease calls; the rest), with bursts of
	// TenantBurst; past it a request is a 429 with Retry-After.
	TenantRate  float64 `mapstructure:"tenant_rate" json:"tenant_rate"`
	TenantBurst int     `mapstructure:"tenant_burst" json:"tenant_burst"`
	// TenantWatches is how many watch consumers one tenant keeps; its
	// next watch deletes its oldest.
	TenantWatches int `mapstructure:"tenant_watches" json:"tenant_watches"`
}

// DefaultLimits returns the limits a zero field takes. A launcher renews
// each lease every few seconds and admits once per job: the rates are far
// above what an honest fleet's launcher sends, and far below what floods a
// sidecar.
func DefaultLimits() Limits {
	return Limits{
		DecideQueue: 1024, TenantDecideQueue: 64,
		LeaseWorkers: 2, LeaseQueue: 4096, TenantLeaseQueue: 256,
		TenantRate: 1000, TenantBurst: 2000,
		TenantWatches: 32,
	}
}

// MaxLimit bounds every count in Limits.
const MaxLimit = 1 << 20

// count is one of the integer limits and its key in the configuration.
type count struct {
	key string
	v   *int
}

// counts lists l's integer limits, for withDefaults and Validate alike, so
// that a new limit is one line here.
func (l *Limits) counts() []count {
	return []count{
		{"decide_workers", &l.DecideWorkers}, {"decide_queue", &l.DecideQueue}, {"tenant_decide_queue", &l.TenantDecideQueue},
		{"lease_workers", &l.LeaseWorkers}, {"lease_queue", &l.LeaseQueue}, {"tenant_lease_queue", &l.TenantLeaseQueue},
		{"tenant_burst", &l.TenantBurst}, {"tenant_watches", &l.TenantWatches},
	}
}

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.DecideWorkers == 0 {
		l.DecideWorkers = max(2, runtime.GOMAXPROCS(0))
	}
	defs := d.counts()
	for i, c := range l.counts() {
		if *c.v == 0 {
			*c.v = *defs[i].v
		}
	}
	if l.TenantRate == 0 {
		l.TenantRate = d.TenantRate
	}
	return l
}

// Validate checks every field under prefix (the configuration's key of
// the section, "nats.limits") and returns all problems at once.
func (l Limits) Validate(prefix string) error {
	var fc field.Checker
	for _, c := range l.counts() {
		if *c.v < 0 || *c.v > MaxLimit {
			fc.Add(prefix+c.key, fmt.Sprintf("0 (the default) or a count from 1 to %d", MaxLimit), strconv.Itoa(*c.v))
		}
	}
	if l.TenantWatches > MaxWatchConsumers {
		fc.Add(prefix+"tenant_watches", fmt.Sprintf("at most the sidecar's %d watch consumers", MaxWatchConsumers), strconv.Itoa(l.TenantWatches))
	}
	if math.IsNaN(l.TenantRate) || l.TenantRate < 0 || l.TenantRate > 1e6 {
		fc.Add(prefix+"tenant_rate", "0 (the default) or requests per second from above 0 to 1e6", strconv.FormatFloat(l.TenantRate, 'g', -1, 64))
	}
	return fc.Err("limits")
}

// RetryAfterHeader tells a client refused for load when to ask again, in
// whole seconds, as HTTP's Retry-After.
const RetryAfterHeader = "Retry-After"

// bucket is one tenant's token bucket.
type bucket struct {
	tokens float64
	last   time.Time
	told   time.Time // when a refusal was last answered
	// refused counts the refusals since told; past floodRefusals the
	// tenant is flooding.
	refused int
}

// FloodFactor times a tenant's burst, refused within a second, is a
// flood: no launcher that reads its answers sends that many past a 429.
const FloodFactor = 10

// rateLimiter keeps a token bucket per tenant. Tenants are launcher
// identities, which the server authenticated, so there are few; an idle
// bucket is full again and is dropped once many are kept.
type rateLimiter struct {
	mu      sync.Mutex
	rate    float64
	burst   float64
	buckets map[string]*bucket
}

// maxBuckets bounds the buckets kept; past it the full ones go.
const maxBuckets = 4096

func newRateLimiter(rate float64, burst int) *rateLimiter {
	return &rateLimiter{rate: rate, burst: float64(burst), buckets: map[string]*bucket{}}
}

// verdict is what the rate limiter says of one request.
type verdict struct {
	ok   bool          // within the tenant's rate
	wait time.Duration // refused: until the tenant has a token again
	// tell: answer this refusal (a 429); once a second at most, the rest
	// of a tenant's excess is dropped unanswered, which costs the sidecar
	// least.
	tell bool
	// flood: the tenant's refusals in this second just passed FloodFactor
	// times its burst (said once a second).
	flood bool
}

// allow takes a token of tenant's at now, or says why not.
func (r *rateLimiter) allow(tenant string, now time.Time) verdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[tenant]
	if b == nil {
		if len(r.buckets) >= maxBuckets {
			r.dropFullLocked(now)
		}
		b = &bucket{tokens: r.burst, last: now}
		r.buckets[tenant] = b
	}
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens = min(r.burst, b.tokens+dt.Seconds()*r.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return verdict{ok: true}
	}
	v := verdict{wait: time.Duration((1 - b.tokens) / r.rate * float64(time.Second))}
	if now.Sub(b.told) >= time.Second {
		v.tell, b.told, b.refused = true, now, 0
	}
	b.refused++
	v.flood = b.refused == FloodFactor*int(max(r.burst, 1))
	return v
}

// dropFullLocked forgets the buckets that would be full at now.
func (r *rateLimiter) dropFullLocked(now time.Time) {
	for k, b := range r.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*r.rate >= r.burst {
			delete(r.buckets, k)
		}
	}
}

// fairQueue holds the requests waiting for one class's workers: a FIFO per
// tenant, served round robin, with at most maxRunning of one tenant's
// requests running at a time, so that a tenant whose requests are slow
// cannot hold every worker: one is always left for the others.
type fairQueue struct {
	mu         sync.Mutex
	cond       *sync.Cond
	tenants    map[string]*tenantQueue
	ring       []*tenantQueue // the tenants with requests waiting, in turn order
	turn       int            // the ring's next tenant
	n          int            // requests waiting, all tenants
	max        int
	perTenant  int
	maxRunning int
	closed     bool
	wg         sync.WaitGroup
}

type tenantQueue struct {
	name    string
	jobs    []job
	running int
	inRing  bool
}

// job is one queued request: run answers it; refuse answers it without
// running it, when the queue closes first.
type job struct {
	run, refuse func()
}

// errQueueFull and errQueueClosed say why push refused a request.
var (
	errQueueFull   = fmt.Errorf("queue full")
	errQueueClosed = fmt.Errorf("stopping")
)

// newFairQueue starts workers goroutines that run the queue's requests;
// one tenant's requests run on all but one of them at most.
func newFairQueue(workers, max, perTenant int) *fairQueue {
	q := &fairQueue{tenants: map[string]*tenantQueue{}, max: max, perTenant: perTenant, maxRunning: tenantWorkers(workers)}
	q.cond = sync.NewCond(&q.mu)
	q.wg.Add(workers)
	for range workers {
		go q.work()
	}
	return q
}

// tenantWorkers is how many of workers one tenant may hold at a time.
func tenantWorkers(workers int) int { return max(1, workers-1) }

// push queues job for tenant. It fails at once when the queue or the
// tenant's share of it is full, or the queue is closed; the caller then
// answers the request itself.
func (q *fairQueue) push(tenant string, j job) (waiting int, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return q.n, errQueueClosed
	}
	t := q.tenants[tenant]
	if q.n >= q.max || (t != nil && len(t.jobs) >= q.perTenant) {
		return q.n, errQueueFull
	}
	if t == nil {
		t = &tenantQueue{name: tenant}
		q.tenants[tenant] = t
	}
	if !t.inRing {
		q.ring = append(q.ring, t)
		t.inRing = true
	}
	t.jobs = append(t.jobs, j)
	q.n++
	q.cond.Broadcast()
	return q.n, nil
}

// pop takes the oldest request of the next tenant in turn that is below
// its running share; false once the queue is closed. done must be called
// when the request has run.
func (q *fairQueue) pop() (run func(), done func(), ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.closed {
			return nil, nil, false
		}
		if t := q.nextLocked(); t != nil {
			j := t.jobs[0]
			t.jobs[0] = job{}
			t.jobs = t.jobs[1:]
			q.n--
			t.running++
			if len(t.jobs) == 0 {
				q.leaveRingLocked()
			} else {
				q.turn++
			}
			return j.run, func() { q.finish(t) }, true
		}
		q.cond.Wait()
	}
}

// nextLocked returns the tenant whose turn it is among those with
// requests waiting and a worker to spare, with q.turn at it; nil when
// there is none.
func (q *fairQueue) nextLocked() *tenantQueue {
	for range len(q.ring) {
		if q.turn >= len(q.ring) {
			q.turn = 0
		}
		if t := q.ring[q.turn]; t.running < q.maxRunning {
			return t
		}
		q.turn++
	}
	return nil
}

// leaveRingLocked takes the tenant at q.turn out of the ring; the next one
// moves into its turn.
func (q *fairQueue) leaveRingLocked() {
	t := q.ring[q.turn]
	t.inRing = false
	q.ring = append(q.ring[:q.turn], q.ring[q.turn+1:]...)
}

// finish records that one of t's requests has run.
func (q *fairQueue) finish(t *tenantQueue) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t.running--
	if t.running == 0 && !t.inRing {
		delete(q.tenants, t.name)
	}
	q.cond.Broadcast()
}

func (q *fairQueue) work() {
	defer q.wg.Done()
	for {
		job, done, ok := q.pop()
		if !ok {
			return
		}
		job()
		done()
	}
}

// close refuses what is still queued (each request's refuse answers it,
// a 503), lets the requests running finish, and waits for the workers.
func (q *fairQueue) close() {
	q.mu.Lock()
	q.closed = true
	var left []job
	for _, t := range q.ring {
		left = append(left, t.jobs...)
		t.jobs, t.inRing = nil, false
	}
	q.ring, q.n = nil, 0
	q.cond.Broadcast()
	q.mu.Unlock()
	for _, j := range left {
		j.refuse()
	}
	q.wg.Wait()
}
