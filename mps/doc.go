// Package mps drives the NVIDIA MPS control daemon of one GPU: it starts or
// attaches to the daemon, sends it typed commands built only from validated
// numbers and UUIDs, parses its answers, watches its health (and restarts a
// daemon colocd started), and offers Sim, an in-memory daemon for machines
// without a GPU.
package mps
