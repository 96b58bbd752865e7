package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Open validates cfg and opens the device its backend names: NVML (through
// nvml.New()), the simulated device, or for "auto" NVML with a fall back to
// the simulated device when there is no NVIDIA driver. The fall back is
// logged as a warning with its reason and recorded in Info().Fallback. The
// caller runs the returned Handle's Run and calls its Close.
func Open(ctx context.Context, cfg Config, opts Options) (Handle, error) {
	return open(ctx, cfg, opts, func() Library { return nvml.New() })
}

// open is Open with the NVML library supplied, for tests.
func open(ctx context.Context, cfg Config, opts Options, lib func() Library) (Handle, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := opts.logger()
	switch cfg.Backend {
	case BackendSim:
		return handle(NewSim(cfg, opts))
	case BackendNVML:
		return handle(OpenNVML(ctx, lib(), cfg, opts))
	}
	d, err := OpenNVML(ctx, lib(), cfg, opts)
	if err == nil {
		return d, nil
	}
	if !errors.Is(err, ErrNoDriver) {
		return nil, fmt.Errorf("gpu backend auto: %w (set gpu.backend to sim to simulate a GPU on purpose)", err)
	}
	s, serr := NewSim(cfg, opts)
	if serr != nil {
		return nil, fmt.Errorf("gpu backend auto: %w; fall back to simulation: %w", err, serr)
	}
	s.info.Fallback = err.Error()
	logger.Warn("no NVIDIA driver: gpu backend auto falls back to a SIMULATED gpu; "+
		"memory, processes and health are made up",
		"reason", err, "name", s.info.Name, "uuid", s.info.UUID, "memory_mib", s.info.MemoryTotalMiB)
	return s, nil
}

// handle returns a nil Handle, not a typed nil pointer, with an error.
func handle[D Handle](d D, err error) (Handle, error) {
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Options are the devices' optional settings, apart from the configuration.
type Options struct {
	// Logger is used by Run (and Open's fallback warning); nil discards.
	Logger *slog.Logger
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}
