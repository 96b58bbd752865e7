package gpu

import "sync"

// runState is the lifecycle both devices share: Run at most once, Close at
// most once, and Close waits for a running Run. Its fields are guarded by the
// device's lock, which begin and shut take.
type runState struct {
	closed  bool
	running bool
	stop    chan struct{} // closed by Close
	runDone chan struct{} // closed when Run returns
}

func newRunState() runState {
	return runState{stop: make(chan struct{}), runDone: make(chan struct{})}
}

// begin marks Run as started, or says why it cannot start.
func (r *runState) begin(lock sync.Locker) error {
	lock.Lock()
	defer lock.Unlock()
	switch {
	case r.closed:
		return ErrClosed
	case r.running:
		return ErrAlreadyRunning
	}
	r.running = true
	return nil
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
