package gpu

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrNoDriver means NVML could not start because no NVIDIA driver is
	// installed or loaded on this host. Backend "auto" falls back to the
	// simulated device on it; backend "nvml" returns it.
	ErrNoDriver = errors.New("no NVIDIA driver")

	// ErrDeviceNotFound means the configured GPU index or UUID names no GPU
	// on this host.
	ErrDeviceNotFound = errors.New("gpu not found")

	// ErrUnknownSMs means the device's SM count is not in the table and the
	// configuration does not override it (key gpu.sms).
	ErrUnknownSMs = errors.New("unknown SM count")

	// ErrUnknownMIG means colocd has no table of MIG profiles for the GPU
	// (MIGProfiles; on a MIG device NVML gives the instance's own figures).
	ErrUnknownMIG = errors.New("no MIG profiles")

	// ErrInvalidConfig is matched (errors.Is) by the list of ConfigErrors
	// that Config.Validate returns.
	ErrInvalidConfig = errors.New("invalid gpu config")

	// ErrInvalidSelector is wrapped by every error about a device selector
	// that ParseSelector does not read.
	ErrInvalidSelector = errors.New("invalid device selector")

	// ErrGPULost means the driver reports the GPU as lost (fallen off the
	// bus); nothing on it works until the host is repaired.
	ErrGPULost = errors.New("gpu is lost")

	// ErrClosed is returned by a device used after Close.
	ErrClosed = errors.New("gpu device closed")

	// ErrAlreadyRunning is returned by a second call of a device's Run.
	ErrAlreadyRunning = errors.New("gpu health loop already started")

	// ErrInsufficientMemory is returned by SimDevice.Reserve when the grant
	// does not fit in the simulated device's free memory.
	ErrInsufficientMemory = errors.New("insufficient gpu memory")

	// ErrGrantExists is returned by SimDevice.Reserve for an id that already
	// holds memory.
	ErrGrantExists = errors.New("grant already holds memory")

	// ErrUnknownGrant is returned by SimDevice.Release for an id that holds
	// no memory.
	ErrUnknownGrant = errors.New("unknown grant")
)

// NVMLError is an NVML call that did not return SUCCESS. Op names the call
// ("init", "get memory info", …). errors.Is maps its Return onto ErrNoDriver,
// ErrGPULost and ErrDeviceNotFound where they apply.
type NVMLError struct {
	Op     string
	Return nvml.Return
}

// Error names the call and what NVML said, without calling into NVML.
func (e *NVMLError) Error() string {
	return fmt.Sprintf("nvml %s: %s", e.Op, returnText(e.Return))
}

// Is lets errors.Is match the sentinel that a Return stands for.
func (e *NVMLError) Is(target error) bool {
	switch target {
	case ErrNoDriver:
		return isNoDriver(e.Return)
	case ErrGPULost:
		return e.Return == nvml.ERROR_GPU_IS_LOST
	}
	return false
}

// isNoDriver reports the Init results that mean "no usable NVIDIA driver
// here": the library is missing, or the kernel module is not loaded.
func isNoDriver(r nvml.Return) bool {
	return r == nvml.ERROR_LIBRARY_NOT_FOUND || r == nvml.ERROR_DRIVER_NOT_LOADED
}

// returnText describes an NVML return code without calling into the C
// library: after a failed Init nothing in libnvidia-ml may be called, not
// even nvmlErrorString.
func returnText(r nvml.Return) string {
	switch r {
	case nvml.SUCCESS:
		return "success"
	case nvml.ERROR_UNINITIALIZED:
		return "NVML not initialized"
	case nvml.ERROR_INVALID_ARGUMENT:
		return "invalid argument"
	case nvml.ERROR_NOT_SUPPORTED:
		return "not supported by this device"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission"
	case nvml.ERROR_NOT_FOUND:
		return "not found"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "NVIDIA kernel driver not loaded"
	case nvml.ERROR_TIMEOUT:
		return "timeout"
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "libnvidia-ml.so.1 not found (no NVIDIA driver installed)"
	case nvml.ERROR_FUNCTION_NOT_FOUND:
		return "function not in this driver's NVML"
	case nvml.ERROR_GPU_IS_LOST:
		return "GPU is lost (fallen off the bus)"
	case nvml.ERROR_RESET_REQUIRED:
		return "GPU reset required"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "NVML library and kernel driver versions differ (reload the driver)"
	case nvml.ERROR_INSUFFICIENT_SIZE:
		return "insufficient buffer size"
	case nvml.ERROR_MEMORY:
		return "out of host memory"
	case nvml.ERROR_GPU_NOT_FOUND:
		return "GPU not found"
	case nvml.ERROR_UNKNOWN:
		return "unknown error"
	}
	return fmt.Sprintf("NVML return code %d", int32(r))
}

// nvmlErr wraps a failed NVML call; it returns nil for SUCCESS.
func nvmlErr(op string, r nvml.Return) error {
	if r == nvml.SUCCESS {
		return nil
	}
	return &NVMLError{Op: op, Return: r}
}
