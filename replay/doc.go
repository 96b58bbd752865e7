// Package replay answers an inference team's question before they deploy:
// what would colocd have done with my traffic? It replays a recorded
// arrival trace against a simulated inference server (package simserver),
// with a simulated training launcher that asks for a slot, renews it,
// honours throttles by restarting its workers, takes raises and asks again
// after a revoke, and runs colocd's own admission controller and observer
// on simulated time, under each of these policies:
//
//   - static: decide once on the configured rate; no guard;
//   - reactive: the guard on the observed rate, deciding on the model's
//     prior with the observed correction (learn_response off);
//   - forecast: the same guard on the rate forecast ahead;
//   - learned: the forecast guard deciding on the server's response it
//     has learned (admission.guard.learn_response), as colocd runs by
//     default;
//
// beside the hindsight oracle (oracle.go): the schedule with the most
// training work that keeps the SLO, found on the simulated server itself,
// and, when asked, the same oracle held to the guard's limit (the SLO
// less the headroom), which splits what the guard leaves into what its
// headroom costs and what its knowledge of the server costs.
// For each policy it reports the minutes whose p99 was over the SLO, the
// training work done as a fraction of the oracle's and of what a static
// grant did, its changes an hour, and the guard's actions. A run is deterministic for its seed; an hour of trace
// replays in seconds, the oracle included (BenchmarkReplayOracleHour).
package replay
