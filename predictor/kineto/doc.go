// Package kineto imports PyTorch profiler (Kineto) Chrome traces into
// predictor profiles: it picks one unit (a ProfilerStep or an annotation),
// merges the kernels of every GPU stream into one timeline of ops, and
// records what the trace held in the profile's source, so that a reader can
// check the import against the trace.
package kineto
