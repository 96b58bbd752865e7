// Package cache is colocd's one bounded cache: least recently used out
// first, keyed by content (a digest of what the value was computed from,
// never a pointer), bounded by the sum of its entries' costs. The sidecar's
// parsed profiles (cost: bytes), the admission model's predictions and the
// simulated server's latencies (cost: one an entry) all live in one.
package cache

import (
	"container/list"
	"sync"
)

// LRU holds at most Budget worth of values. Safe for concurrent use.
type LRU[K comparable, V any] struct {
	budget int

	mu    sync.Mutex
	index map[K]*list.Element // of *entry[K, V]
	order list.List           // most recent first
	cost  int
}

type entry[K comparable, V any] struct {
	key  K
	val  V
	cost int
}

// New returns an empty cache that holds values whose costs sum to at most
// budget (a count of entries when each costs 1, bytes when each costs its
// size).
func New[K comparable, V any](budget int) *LRU[K, V] {
	return &LRU[K, V]{budget: budget, index: map[K]*list.Element{}}
}

// Get returns the value kept for key and makes it the most recent.
func (c *LRU[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.index[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*entry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// Contains reports whether the cache holds a value for key, without making
// it the most recent.
func (c *LRU[K, V]) Contains(key K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.index[key]
	return ok
}

// Add keeps val for key at cost, evicting the least recently used values
// until it fits, and returns the value the cache holds for key: val, or
// the one a concurrent caller added first (which it keeps). A value whose
// cost exceeds the whole budget is not kept; Add then returns val.
func (c *LRU[K, V]) Add(key K, val V, cost int) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.index[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*entry[K, V]).val
	}
	if cost > c.budget {
		return val
	}
	for c.cost+cost > c.budget {
		old := c.order.Back()
		e := old.Value.(*entry[K, V])
		c.order.Remove(old)
		delete(c.index, e.key)
		c.cost -= e.cost
	}
	c.index[key] = c.order.PushFront(&entry[K, V]{key: key, val: val, cost: cost})
	c.cost += cost
	return val
}

// Len returns how many values the cache holds and the sum of their costs.
func (c *LRU[K, V]) Len() (n, cost int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.index), c.cost
}

// Purge empties the cache.
func (c *LRU[K, V]) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.index)
	c.order.Init()
	c.cost = 0
}
