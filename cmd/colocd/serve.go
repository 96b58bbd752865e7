package main

import (
	"fmt"
	"strings"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/configs"
	"github.com/colocd/colocd/internal/buildinfo"
	"github.com/colocd/colocd/internal/termtext"
	"github.com/colocd/colocd/launch"
	"github.com/colocd/colocd/sidecar"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	var (
		path, level, format string
		sets                []string
	)
	cmd := &cobra.Command{
		Use:   "serve --config FILE [--set key=value ...]",
		Short: "Run the sidecar: admission over NATS for this GPU",
		Long: `Run the colocd sidecar for one GPU: it hosts the MPS daemon settings, answers
admission requests on the NATS API (colocd.v1.<id>.*), keeps leases in
JetStream, and serves /healthz, /readyz and /metrics. With nats.url empty it
runs an embedded NATS server; with no GPU driver and gpu.backend auto it
simulates an H200 (and says so in the log).

Precedence: --set > COLOCD_* environment > the file > defaults. Services and
admission values in the file are reloaded live when it changes.
SIGINT or SIGTERM shut it down gracefully; no lease is lost.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := sidecar.NewLogger(cmd.ErrOrStderr(), level, format)
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			overrides := map[string]any{}
			for _, kv := range sets {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("serve: --set %q: want key=value, e.g. nats.url=nats://host:4222", kv)
				}
				overrides[k] = v
			}
			cfg, err := configs.LoadWith(path, overrides)
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("serve: %s: %w", path, err)
			}
			s, err := sidecar.New(cmd.Context(), cfg, sidecar.Options{Logger: logger, Version: buildinfo.Semver(version), ConfigPath: path, Overrides: overrides})
			if err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "colocd serving sidecar %s: nats %s, http %s\n", s.ID(), orEmbedded(s.ClientURL(), cfg.NATS.URL), s.HTTPAddr())
			if f := s.LauncherNKeyFile(); f != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "launchers connect with: export %s=%s %s=%s\n", launch.EnvNKey, termtext.ShellQuote(f), launch.EnvSidecar, termtext.ShellQuote(s.ID()))
				if line := natsCLILine(s.ClientURL(), f); line != "" {
					fmt.Fprintln(cmd.OutOrStdout(), line)
				}
			}
			return s.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&path, "config", "/etc/colocd/colocd.yaml", "configuration file")
	f.StringArrayVar(&sets, "set", nil, "override one key, e.g. --set nats.url=nats://host:4222 (repeatable)")
	f.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&format, "log-format", "text", "text or json")
	return cmd
}

func orEmbedded(embedded, url string) string {
	if embedded != "" {
		return embedded + " (embedded)"
	}
	return url
}

// natsCLILine is what a nats CLI user passes to reach the embedded server
// at url as the launcher whose seed is in seedFile: a launcher may read
// replies only below its own inbox (v1.LauncherInbox), so the CLI needs
// --inbox-prefix. "" without a listener or a readable seed.
func natsCLILine(url, seedFile string) string {
	pub := publicKeyOf(seedFile)
	if url == "" || pub == "" {
		return ""
	}
	return fmt.Sprintf("nats CLI (replies come only to the launcher's own inbox): nats --server %s --nkey %s --inbox-prefix %s micro ls colocd",
		termtext.ShellQuote(url), termtext.ShellQuote(seedFile), v1.LauncherInbox(pub))
}
