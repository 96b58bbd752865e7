package v1

// The environment variables of a grant (docs/nats-api.md#admit): the
// lease's id, and MPS's own.
const (
	// EnvLeaseID names the lease a worker belongs to; a sidecar that can
	// read its processes' environment registers only processes started
	// with it.
	EnvLeaseID = "COLOCD_LEASE_ID"
	// EnvPipeDirectory is the MPS daemon's pipe directory the worker
	// connects through.
	EnvPipeDirectory = "CUDA_MPS_PIPE_DIRECTORY"
	// EnvActiveThreads is the granted MPS active-thread percentage.
	EnvActiveThreads = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
	// EnvPinnedMemory is the granted pinned device memory limit.
	EnvPinnedMemory = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
	// EnvPriority is the MPS client priority.
	EnvPriority = "CUDA_MPS_CLIENT_PRIORITY"
	// EnvVisibleDevices names the MIG device a job must use, when the
	// sidecar guards one or lends one whole.
	EnvVisibleDevices = "CUDA_VISIBLE_DEVICES"
)

// GrantEnv lists them, in the order a launcher checks them.
var GrantEnv = []string{EnvLeaseID, EnvPipeDirectory, EnvActiveThreads, EnvPinnedMemory, EnvPriority, EnvVisibleDevices}
