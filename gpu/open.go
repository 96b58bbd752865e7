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
func Open(ctx context.Context, cfg Config, logger *slog.Logger) (Handle, error) {
	return open(ctx, cfg, logger, func() Library { return nvml.New() })
}

// open is Open with the NVML library supplied, for tests.
func open(ctx context.Context, cfg Config, logger *slog.Logger, lib func() Library) (Handle, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	switch cfg.Backend {
	case BackendSim:
		return handle(NewSim(cfg, logger))
	case BackendNVML:
		return handle(OpenNVML(ctx, lib(), cfg, logger))
	}
	d, err := OpenNVML(ctx, lib(), cfg, logger)
	if err == nil {
		return d, nil
	}
	if !errors.Is(err, ErrNoDriver) {
		return nil, fmt.Errorf("gpu backend auto: %w (set gpu.backend to sim to simulate a GPU on purpose)", err)
	}
	s, serr := NewSim(cfg, logger)
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
