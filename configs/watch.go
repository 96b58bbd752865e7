package configs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long the watcher waits after the last change to
// the file before reloading it, so that a burst (an in-place write fires
// twice, a ConfigMap swap several times) reloads once.
const DefaultDebounce = 100 * time.Millisecond

// maxBurst bounds how long a stream of changes can postpone a reload.
const maxBurst = 10 * DefaultDebounce

// ErrWatcherUsed is returned by a second call of Watcher.Run.
var ErrWatcherUsed = errors.New("config watcher already ran")

// Watcher holds the configuration in effect and reloads it when its file
// changes. It watches the file's directory, so that atomic renames,
// Kubernetes ConfigMap symlink swaps and deleting and recreating the file
// are all seen.
//
// The reload policy: a new file that does not load or validate is refused
// as a whole (the configuration in effect stays, and Run logs every
// problem). A valid one applies its services and admission sections at
// once (HotReloadable); every other key keeps the value colocd started
// with, and Run logs a warning naming the keys the file changed
// (RestartKeys). Current always describes what is in effect.
type Watcher struct {
	path      string
	abs       string
	overrides map[string]any
	logger    *slog.Logger
	debounce  time.Duration

	current  atomic.Pointer[Config]
	rejected atomic.Pointer[Rejection] // the last edit not applied

	// Owned by the goroutine in Run (set by NewWatcher before it).
	sum     [sha256.Size]byte
	missing bool

	mu   sync.Mutex
	subs map[chan *Config]struct{}
	used bool // Run was called
	done bool // Run returned
}

// WatchOptions are a Watcher's optional settings.
type WatchOptions struct {
	// Overrides are the values of command-line flags, by dotted key
	// path, applied at every load as LoadWith applies them.
	Overrides map[string]any
	// Logger is used by Run only; nil discards.
	Logger *slog.Logger
}

// NewWatcher loads and validates the file at path with the same overrides
// LoadWith takes (flag values, applied again at every reload). It returns
// the loading or validation error of the first load: colocd does not start
// on an invalid file.
func NewWatcher(path string, opts WatchOptions) (*Watcher, error) {
	overrides, logger := opts.Overrides, opts.Logger
	if path == "" {
		return nil, errors.New("watch config: no file")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("watch config: %w", err)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("watch config: %w", err)
	}
	c, err := load(path, data, overrides)
	if err == nil {
		err = c.Validate()
	}
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{
		path:      path,
		abs:       abs,
		overrides: overrides,
		logger:    logger,
		debounce:  DefaultDebounce,
		sum:       sha256.Sum256(data),
		subs:      map[chan *Config]struct{}{},
	}
	w.current.Store(c)
	return w, nil
}

// Current returns the configuration in effect. It is shared: do not
// modify it.
func (w *Watcher) Current() *Config {
	return w.current.Load()
}

// Subscribe returns a channel that receives each new configuration in
// effect after a reload, and a function that ends the subscription and
// closes the channel. The channel holds the latest configuration only: a
// slow reader misses intermediate ones, never the last. It is closed when
// Run returns.
func (w *Watcher) Subscribe() (<-chan *Config, func()) {
	ch := make(chan *Config, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		close(ch)
		return ch, func() {}
	}
	w.subs[ch] = struct{}{}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.subs[ch]; ok {
			delete(w.subs, ch)
			close(ch)
		}
	}
}

func (w *Watcher) publish(c *Config) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.subs {
		select {
		case <-ch: // drop the unread older configuration
		default:
		}
		ch <- c // cannot block: only publish sends, under mu
	}
}

// Run watches the file until ctx is done, then returns nil; it returns an
// error only when the watch cannot be set up. It may be called once.
func (w *Watcher) Run(ctx context.Context) error {
	w.mu.Lock()
	used := w.used
	w.used = true
	w.mu.Unlock()
	if used {
		return ErrWatcherUsed
	}
	defer w.closeSubs()

	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config: %w", err)
	}
	defer fw.Close()
	dir := filepath.Dir(w.abs)
	if err := fw.Add(dir); err != nil {
		return fmt.Errorf("watch config %s: %w", dir, err)
	}
	w.logger.Info("watching config", "path", w.path)
	w.check() // a change between NewWatcher and the watch

	timer := time.NewTimer(w.debounce)
	timer.Stop()
	defer timer.Stop()
	var burst time.Time // first event of the burst in progress
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				<-ctx.Done()
				return nil
			}
			if ev.Name == dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				w.logger.Error("config directory removed: hot reload stopped", "path", w.path)
				continue
			}
			if !w.relevant(ev) {
				continue
			}
			now := time.Now()
			if burst.IsZero() {
				burst = now
			}
			timer.Reset(min(w.debounce, max(0, burst.Add(maxBurst).Sub(now))))
		case err, ok := <-fw.Errors:
			if ok {
				w.logger.Warn("config watch error", "path", w.path, "err", err)
			}
		case <-timer.C:
			burst = time.Time{}
			w.check()
		}
	}
}

// relevant reports whether an event can have changed the file's content:
// an event on the file itself, or on a Kubernetes ConfigMap's "..data"
// links and timestamped directories, through which the file is a symlink.
// A change of mode alone is not.
func (w *Watcher) relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	return filepath.Clean(ev.Name) == w.abs || strings.HasPrefix(filepath.Base(ev.Name), "..")
}

func (w *Watcher) closeSubs() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	for ch := range w.subs {
		delete(w.subs, ch)
		close(ch)
	}
}

// check reloads the file if its content changed since the last look.
func (w *Watcher) check() {
	data, err := os.ReadFile(w.abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if !w.missing {
				w.logger.Warn("config file removed: keeping the current configuration", "path", w.path)
			}
			w.missing = true
			return
		}
		w.logger.Error("config reload failed: keeping the current configuration", "path", w.path, "err", err)
		w.reject(err)
		return
	}
	w.missing = false
	sum := sha256.Sum256(data)
	if sum == w.sum {
		return
	}
	w.sum = sum
	next, err := load(w.path, data, w.overrides)
	if err == nil {
		err = next.Validate()
	}
	if err != nil {
		w.logger.Error("config reload rejected: keeping the current configuration", "path", w.path, "err", err)
		w.reject(err)
		return
	}
	w.rejected.Store(nil)
	cur := w.Current()
	if keys := RestartKeys(cur, next); len(keys) > 0 {
		w.logger.Warn("config keys changed that take effect only after a restart: keeping their running values",
			"path", w.path, "keys", strings.Join(keys, ", "))
	}
	merged := *cur
	merged.Services = next.Services
	merged.Admission = next.Admission
	if reflect.DeepEqual(&merged, cur) {
		return
	}
	w.current.Store(&merged)
	w.logger.Info("config reloaded", "path", w.path, "services", len(merged.Services))
	w.publish(&merged)
}

// HotReloadable reports whether a dotted key path takes effect without a
// restart: services and every admission key.
func HotReloadable(key string) bool {
	return key == "services" || strings.HasPrefix(key, "services[") || key == "admission" || strings.HasPrefix(key, "admission.")
}

// RestartKeys lists the keys whose values differ between two
// configurations and that take effect only after a restart, in file
// order.
func RestartKeys(old, next *Config) []string {
	a := leafKeys(reflect.ValueOf(*old), "")
	b := leafKeys(reflect.ValueOf(*next), "")
	var keys []string
	for i := range a {
		if !HotReloadable(a[i].key) && !reflect.DeepEqual(a[i].val, b[i].val) {
			keys = append(keys, a[i].key)
		}
	}
	return keys
}

// Rejection is an edit of the file that was not applied.
type Rejection struct {
	At  time.Time
	Err error
}

func (w *Watcher) reject(err error) {
	w.rejected.Store(&Rejection{At: time.Now(), Err: err})
}

// Rejected returns the last edit that was rejected (the configuration
// before it stays in force), or nil when the file's last edit was applied.
func (w *Watcher) Rejected() *Rejection { return w.rejected.Load() }
