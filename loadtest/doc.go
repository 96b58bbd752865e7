// Package loadtest is colocd's load test: many launchers, each on its own
// NATS connection, loop over admit, renew and release against one sidecar
// (an external one, or one started in this process on a simulated GPU),
// beside micro's discovery PING as the baseline; the Report has their
// rates, latencies and errors, the most leases the sidecar held, and the
// process's size before and after.
package loadtest
