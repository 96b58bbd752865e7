package gpu

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// errStopped ends Run's loop when ctx is done or Close was called.
var errStopped = errors.New("stopped")

// failuresBeforeUnhealthy is how many NVML reads in a row may fail before
// the device is marked unhealthy.
const failuresBeforeUnhealthy = 3

// Run watches the device until ctx is done or Close is called: it waits on
// an NVML event set for critical XID events (EventWait at a time), and after
// each wait checks that the GPU still answers. An XID that is not an
// application-level one makes the device unhealthy (see Health). If the
// driver cannot deliver XID events, Run logs it and keeps only the liveness
// check. Run logs with the logger given to OpenNVML, closes Events when it
// returns, returns nil when stopped, and may be called once.
func (d *NVMLDevice) Run(ctx context.Context) error {
	end, err := d.start(&d.mu, d.mon)
	if err != nil {
		return err
	}
	defer end()

	log := d.logger.With("gpu", d.info.UUID)
	set := d.registerXIDEvents(log)
	if set != nil {
		defer func() {
			if ret := set.Free(); ret != nvml.SUCCESS {
				log.Warn("free nvml event set", "err", nvmlErr("free event set", ret))
			}
		}()
	}
	log.Info("gpu health loop started", "name", d.info.Name, "xid_events", set != nil, "wait", d.wait)
	defer log.Info("gpu health loop stopped")

	failures := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.stop:
			return nil
		default:
		}
		err := d.waitOnce(ctx, set, log)
		if err == nil {
			err = d.probe()
		}
		if err == errStopped {
			return nil
		}
		failures = d.account(err, failures, log)
		if err != nil && d.sleep(ctx) {
			return nil
		}
	}
}

// registerXIDEvents creates an event set for this device's critical XIDs.
// It returns nil, after logging why, when the driver cannot deliver them.
func (d *NVMLDevice) registerXIDEvents(log *slog.Logger) nvml.EventSet {
	supported, ret := d.parent.GetSupportedEventTypes()
	if ret != nvml.SUCCESS {
		log.Warn("xid events unavailable; health rests on the liveness check",
			"err", nvmlErr("get supported event types", ret))
		return nil
	}
	if supported&nvml.EventTypeXidCriticalError == 0 {
		log.Warn("xid events not supported by this device; health rests on the liveness check")
		return nil
	}
	set, ret := d.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		log.Warn("xid events unavailable; health rests on the liveness check",
			"err", nvmlErr("create event set", ret))
		return nil
	}
	if ret := d.parent.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
		log.Warn("xid events unavailable; health rests on the liveness check",
			"err", nvmlErr("register xid events", ret))
		set.Free()
		return nil
	}
	return set
}

// waitOnce waits for one event (or, without an event set, for one wait
// period) and handles it. It returns errStopped when ctx or Close ended the
// wait, or the NVML error of a failed wait.
func (d *NVMLDevice) waitOnce(ctx context.Context, set nvml.EventSet, log *slog.Logger) error {
	if set == nil {
		if d.sleep(ctx) {
			return errStopped
		}
		return nil
	}
	ms := max(d.wait.Milliseconds(), 1)
	data, ret := set.Wait(uint32(ms))
	switch ret {
	case nvml.SUCCESS:
		d.handleEvent(data, log)
		return nil
	case nvml.ERROR_TIMEOUT:
		return nil
	}
	return nvmlErr("wait for events", ret)
}

// handleEvent applies one event from the set to the device's health.
func (d *NVMLDevice) handleEvent(data nvml.EventData, log *slog.Logger) {
	if data.EventType != nvml.EventTypeXidCriticalError {
		return
	}
	gpuUUID := d.info.UUID
	if d.info.MIG != nil {
		gpuUUID = d.info.MIG.ParentUUID
	}
	if data.Device != nil {
		if uuid, ret := data.Device.GetUUID(); ret == nvml.SUCCESS && uuid != gpuUUID {
			return // not ours; only ours is registered, but be sure
		}
	}
	if d.info.MIG != nil {
		// An XID of a lent instance is that instance's fault; one of the
		// whole GPU (no instance named) is every instance's.
		d.lentFault(data.GpuInstanceId, data.EventData, log)
		// An XID of another GPU instance is not ours.
		if gi := data.GpuInstanceId; gi != allInstances && int(gi) != d.info.MIG.GI {
			return
		}
	}
	logXID(log, d.mon.xid(data.EventData, time.Now()))
}

// allInstances is an event's GpuInstanceId when it names no GPU instance
// (NVML's 0xFFFFFFFF).
const allInstances = 0xFFFFFFFF

// probe checks that the GPU still answers a cheap query.
func (d *NVMLDevice) probe() error {
	_, ret := d.dev.GetMemoryInfo()
	return nvmlErr("get memory info", ret)
}

// account turns the result of one loop iteration into health: a lost GPU
// is unhealthy for good; failuresBeforeUnhealthy failures in a row make the
// device unhealthy until an iteration succeeds. It returns the new count.
func (d *NVMLDevice) account(err error, failures int, log *slog.Logger) int {
	now := time.Now()
	if err == nil {
		if e, ok := d.mon.recover(now); ok {
			log.Info("gpu healthy again", "since", e.Time)
		}
		return 0
	}
	failures++
	if errors.Is(err, ErrGPULost) {
		if e, ok := d.mon.fail("gpu is lost: "+err.Error(), true, now); ok {
			log.Error("gpu unhealthy", "reason", e.Health.Reason)
		}
		return failures
	}
	log.Warn("nvml read failed", "err", err, "failures", failures)
	if failures >= failuresBeforeUnhealthy {
		if e, ok := d.mon.fail("nvml reads failing: "+err.Error(), false, now); ok {
			log.Error("gpu unhealthy", "reason", e.Health.Reason)
		}
	}
	return failures
}

// sleep waits one wait period; it returns true when ctx or Close ended it.
func (d *NVMLDevice) sleep(ctx context.Context) bool {
	t := time.NewTimer(d.wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true
	case <-d.stop:
		return true
	case <-t.C:
		return false
	}
}
