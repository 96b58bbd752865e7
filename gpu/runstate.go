package gpu

import (
	"context"
	"sync"
)

// runState is the lifecycle both devices share: Run at most once, Close at
// most once, and Close waits for a running Run. Its fields are guarded by the
// device's lock, which open, start and shut take.
type runState struct {
	closed  bool
	running bool
	stop    chan struct{} // closed by Close
	runDone chan struct{} // closed when Run returns
}

func newRunState() runState {
	return runState{stop: make(chan struct{}), runDone: make(chan struct{})}
}

// open takes lock for a reading of the device (State, Lendable). When ctx
// is done or the device is closed it returns why, with lock released;
// otherwise the caller releases lock.
func (r *runState) open(ctx context.Context, lock sync.Locker) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	lock.Lock()
	if r.closed {
		lock.Unlock()
		return ErrClosed
	}
	return nil
}

// start marks Run as started, or says why it cannot start. On success it
// returns what Run defers: it closes the monitor's events and then tells
// Close that Run has returned.
func (r *runState) start(lock sync.Locker, mon *monitor) (end func(), err error) {
	lock.Lock()
	defer lock.Unlock()
	switch {
	case r.closed:
		return nil, ErrClosed
	case r.running:
		return nil, ErrAlreadyRunning
	}
	r.running = true
	return func() {
		mon.close()
		close(r.runDone)
	}, nil
}

// shut marks the device closed, stops Run and waits for it (or, when Run
// never started, closes the event monitor itself). It reports false when the
// device was closed already.
func (r *runState) shut(lock sync.Locker, mon *monitor) bool {
	lock.Lock()
	if r.closed {
		lock.Unlock()
		return false
	}
	r.closed = true
	running := r.running
	close(r.stop)
	lock.Unlock()
	if running {
		<-r.runDone
	} else {
		mon.close()
	}
	return true
}
