package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/colocd/colocd/internal/termtext"
	"github.com/colocd/colocd/sidecar"
	"github.com/spf13/cobra"
)

func newProbeCmd() *cobra.Command {
	var (
		target  string
		timeout time.Duration
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "probe [--url http://127.0.0.1:9464/healthz] [--timeout 2s]",
		Short: "Ask a sidecar's /healthz or /readyz, for a container's HEALTHCHECK; exits 0 on 2xx",
		Long: `Ask a sidecar's HTTP endpoint (telemetry.http) and exit 0 when it answers 2xx,
1 otherwise, printing the status and the first line of the body. It is the
container image's HEALTHCHECK, which has no curl.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !strings.HasPrefix(target, "http://") && !strings.HasPrefix(target, "https://") {
				return usageError{fmt.Errorf("probe: --url: want an http:// or https:// URL, got %q", target)}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			r, err := sidecar.Probe(ctx, target)
			if err != nil {
				return fmt.Errorf("probe: %w", err)
			}
			if asJSON {
				if err := printJSON(cmd.OutOrStdout(), r); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%d %s\n", r.Status, termtext.Line(r.Body))
			}
			if !r.OK {
				return fmt.Errorf("probe: %s answered %d", target, r.Status)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "url", "http://127.0.0.1:9464/healthz", "the endpoint: telemetry.http's /healthz (alive) or /readyz (ready to admit)")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Second, "how long to wait for the answer")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print {url, status, ok, body}")
	return cmd
}
