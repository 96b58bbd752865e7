package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/fleet"
	"github.com/colocd/colocd/launch"
)

// discoverWait is how long a command without --sidecar collects the
// sidecars' answers to discovery.
const discoverWait = time.Second

// listedSidecars bounds the sidecars an error lists.
const listedSidecars = 20

// dialSidecar is Dial for a command that acts on one sidecar (status,
// watch): without --sidecar it asks who is on the bus (bus.Sidecars) and
// takes the one sidecar there is, saying so on stderr; with several it
// lists them (id, node, GPU) and asks for --sidecar (a usage error); with
// none it says so and how to check.
func (f *launcherFlags) dialSidecar(cmd *cobra.Command) (*bus.Client, *nats.Conn, error) {
	if f.Sidecar != "" {
		return f.Dial(true)
	}
	client, nc, err := f.Dial(false)
	if err != nil {
		return nil, nil, err
	}
	id, err := chooseSidecar(cmd.Context(), client, nc.ConnectedUrlRedacted(), cmd.CommandPath())
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	f.Sidecar = id
	fmt.Fprintf(cmd.ErrOrStderr(), "colocd: %s is the one sidecar on the bus (--sidecar not given)\n", id)
	return client, nc, nil
}

// chooseSidecar is the one sidecar that answers discovery on server, or
// an error that lists them or says none did; command is the command line
// its advice names (colocd status).
func chooseSidecar(ctx context.Context, c *bus.Client, server, command string) (string, error) {
	ids, err := c.Sidecars(ctx, discoverWait)
	switch {
	case errors.Is(err, v1.ErrNoSidecar):
		return "", fmt.Errorf("--sidecar not given, and %w discovery (%s) on %s within %s: "+
			"is colocd serve running (its log says \"colocd ready\"), and is %s its NATS server (--server, env %s)? "+
			"With the id colocd serve prints on its first line, --sidecar ID asks that sidecar alone",
			v1.ErrNoSidecar, bus.DiscoverSubject, server, discoverWait, server, launch.EnvServer)
	case err != nil:
		return "", fmt.Errorf("--sidecar not given: %w", err)
	case len(ids) == 1:
		return ids[0], nil
	}
	return "", usageError{fmt.Errorf("--sidecar: want one of the %d sidecars on the bus, e.g. %s --sidecar %s (or export %s=%s):\n%s",
		len(ids), command, ids[0], launch.EnvSidecar, ids[0], strings.TrimRight(sidecarTable(ctx, c, ids), "\n"))}
}

// sidecarTable lists ids, at most listedSidecars of them, with the node
// and GPU their capacity summaries give ("-" where none is live).
func sidecarTable(ctx context.Context, c *bus.Client, ids []string) string {
	ctx, cancel := context.WithTimeout(ctx, discoverWait)
	defer cancel()
	caps, _, _ := c.Capacities(ctx) // no summary: ids alone
	byID := make(map[string]*fleet.Capacity, len(caps))
	for _, cp := range caps {
		byID[cp.Sidecar] = cp
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  SIDECAR\tNODE\tGPU")
	for i, id := range ids {
		if i == listedSidecars {
			fmt.Fprintf(w, "  … and %d more\t\t\n", len(ids)-i)
			break
		}
		node, gpu := "-", "-"
		if cp := byID[id]; cp != nil {
			node, gpu = orDash(cp.Node), orDash(cp.GPU.Name)
			if cp.GPU.MIG != "" {
				gpu += " (MIG " + cp.GPU.MIG + ")"
			}
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\n", id, node, gpu)
	}
	_ = w.Flush()
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
