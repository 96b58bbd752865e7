// Package gpu reads the state of the one GPU a colocd sidecar sits next to:
// identity, memory, compute and MIG mode, utilization, processes and XID
// health, from NVML (go-nvml) or from a simulated device when no driver is
// installed. Open picks the backend; Device is the small interface consumers
// mirror. Only a device's Run loop logs.
package gpu
