package sidecar

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/bus"
)

// How the sidecar looks after its lease store.
const (
	// storeCheckInterval is how often the store loop checks the bucket.
	storeCheckInterval = 5 * time.Second
	// markerPurgeInterval is how often delete markers are purged, and the
	// age from which a marker goes.
	markerPurgeInterval = 10 * time.Minute
)

// checkStore reports whether the lease bucket answers; /readyz and status
// include it, so a lost bucket or an unreachable JetStream shows.
func (s *Sidecar) checkStore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, storeCallTimeout)
	defer cancel()
	return s.store.bucket().Check(ctx)
}

// watchStore checks the lease bucket on a ticker until ctx ends: a bucket
// that is gone (deleted, or an external server lost its JetStream files) is
// created again and the live leases are written into it from memory, so
// renewals and admissions work again without a restart. It also purges old
// delete markers now and then.
func (s *Sidecar) watchStore(ctx context.Context) error {
	check := time.NewTicker(storeCheckInterval)
	defer check.Stop()
	purge := time.NewTicker(markerPurgeInterval)
	defer purge.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-check.C:
			if err := s.repairStore(ctx); err != nil {
				s.log.Error("lease store", "err", err)
			}
		case <-purge.C:
			s.purgeDeleteMarkers(ctx)
		}
	}
}

// repairStore recreates a lost lease bucket and resyncs the leases into
// it. A store that is there, or that does not answer, is left alone (the
// readiness check reports the latter).
func (s *Sidecar) repairStore(ctx context.Context) error {
	err := s.checkStore(ctx)
	if !errors.Is(err, bus.ErrBucketGone) {
		return nil
	}
	s.log.Warn("lease store: the bucket is gone; recreating it from the leases in memory", "bucket", v1.LeaseBucketName(s.id))
	octx, cancel := context.WithTimeout(ctx, storeCallTimeout)
	defer cancel()
	kv, err := bus.OpenKV(octx, s.js, v1.LeaseBucketName(s.id), s.replicas)
	if err != nil {
		return fmt.Errorf("recreate the lease bucket: %w", err)
	}
	s.store.replace(kv)
	n, err := s.adm.Resync(ctx)
	s.log.Info("lease store: bucket recreated", "leases_written", n)
	return err
}

// purgeDeleteMarkers removes the markers released and expired leases left
// in the bucket, older than markerPurgeInterval (all of them at start).
func (s *Sidecar) purgeDeleteMarkers(ctx context.Context) {
	olderThan := markerPurgeInterval
	if s.adm == nil { // at start: nothing of this run is in flight
		olderThan = 0
	}
	ctx, cancel := context.WithTimeout(ctx, storeLoadTimeout)
	defer cancel()
	if err := s.store.bucket().PurgeDeletes(ctx, olderThan); err != nil {
		s.log.Warn("lease store: purging delete markers", "err", err)
	}
}
