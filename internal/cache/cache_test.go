package cache

import (
	"fmt"
	"sync"
	"testing"
)

func TestLRUEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	c := New[string, int](3)
	for i, k := range []string{"a", "b", "c"} {
		c.Add(k, i, 1)
	}
	if _, ok := c.Get("a"); !ok { // a is now the most recent
		t.Fatal("Get(a) missed right after Add")
	}
	if !c.Contains("b") { // Contains does not make b recent
		t.Fatal("Contains(b) = false right after Add")
	}
	c.Add("d", 3, 1) // evicts b, the least recent
	for k, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := c.Get(k); ok != want {
			t.Errorf("Get(%s) held = %v, want %v", k, ok, want)
		}
	}
	if n, cost := c.Len(); n != 3 || cost != 3 {
		t.Errorf("Len() = %d, %d; want 3, 3", n, cost)
	}
}

func TestLRUBoundsByCost(t *testing.T) {
	t.Parallel()
	c := New[int, string](100)
	c.Add(1, "forty", 40)
	c.Add(2, "fifty", 50)
	c.Add(3, "thirty", 30) // 120 > 100: 1 goes
	if _, ok := c.Get(1); ok {
		t.Error("entry 1 kept past the budget")
	}
	if n, cost := c.Len(); n != 2 || cost != 80 {
		t.Errorf("Len() = %d, %d; want 2, 80", n, cost)
	}
	if got := c.Add(4, "huge", 101); got != "huge" {
		t.Errorf("Add of a value over the budget returned %q", got)
	}
	if _, ok := c.Get(4); ok {
		t.Error("a value over the whole budget was kept")
	}
	if n, _ := c.Len(); n != 2 {
		t.Errorf("a value over the budget evicted others: %d left", n)
	}
	c.Purge()
	if n, cost := c.Len(); n != 0 || cost != 0 {
		t.Errorf("after Purge Len() = %d, %d", n, cost)
	}
}

// TestLRUFirstAddWins: two callers that computed the same key share the
// value the first one added.
func TestLRUFirstAddWins(t *testing.T) {
	t.Parallel()
	c := New[string, *int](10)
	first, second := new(int), new(int)
	if got := c.Add("k", first, 1); got != first {
		t.Fatal("Add returned another value than the one it kept")
	}
	if got := c.Add("k", second, 1); got != first {
		t.Error("a second Add of a key replaced the first value")
	}
}

func TestLRUConcurrent(t *testing.T) {
	t.Parallel()
	c := New[string, int](64)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := fmt.Sprint((g * i) % 200)
				if v, ok := c.Get(k); ok && fmt.Sprint(v) != k {
					t.Errorf("Get(%s) = %d", k, v)
					return
				}
				c.Add(k, (g*i)%200, 1)
			}
		})
	}
	wg.Wait()
	if n, cost := c.Len(); n > 64 || cost != n {
		t.Errorf("Len() = %d, %d; want at most 64, cost = count", n, cost)
	}
}
