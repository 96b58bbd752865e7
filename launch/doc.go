// Package launch is the launcher's side of a lease: a supervisor that owns
// one lease for the life of one command. It admits (or places), starts the
// command in its own process group with the lease's environment, registers
// its GPU processes, renews, follows the lease's events, restarts the
// command at a new percentage on a throttle, stops it on a revoke or before
// an unrenewed lease would end, and releases when the command exits.
package launch
