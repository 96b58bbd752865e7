package gpu

import "context"

// Both devices are what Open returns.
var (
	_ Handle = (*NVMLDevice)(nil)
	_ Handle = (*SimDevice)(nil)
	_ Device = (*NVMLDevice)(nil)
	_ Device = (*SimDevice)(nil)
)

// admissionDevice is the subset a consumer such as admission declares for
// itself (DESIGN: the package that uses an interface defines it); both
// devices satisfy it without importing anything but gpu's value types.
type admissionDevice interface {
	Health() Health
	State(ctx context.Context) (State, error)
}

var (
	_ admissionDevice = (*NVMLDevice)(nil)
	_ admissionDevice = (*SimDevice)(nil)
)

// The dgxh200 mock satisfies the NVML seam.
var _ Library = (*dgx)(nil)
