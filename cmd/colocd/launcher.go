package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/colocd/colocd/admission"
	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/internal/termtext"
	"github.com/colocd/colocd/launch"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// launcherFlags are the connection flags every launcher command shares.
type launcherFlags struct {
	launch.Endpoint
	asJSON bool
	// flags tell a flag given from its environment variable's default
	// (credentials).
	flags *pflag.FlagSet
}

func (f *launcherFlags) register(cmd *cobra.Command, needSidecar bool) {
	fs := cmd.Flags()
	f.flags = fs
	fs.StringVar(&f.Server, "server", envOr(launch.EnvServer, nats.DefaultURL), "NATS server URL (env "+launch.EnvServer+")")
	fs.StringVar(&f.Creds, "creds", os.Getenv(launch.EnvCreds), "NATS credentials file (env "+launch.EnvCreds+")")
	fs.StringVar(&f.NKey, "nkey", os.Getenv(launch.EnvNKey), "NKey seed file, e.g. the launcher.nk colocd serve writes (env "+launch.EnvNKey+")")
	fs.StringVar(&f.TLSCA, "tls-ca", os.Getenv(launch.EnvTLSCA), "PEM file of the CA that signed the server's certificate (env "+launch.EnvTLSCA+")")
	fs.StringVar(&f.TLSCert, "tls-cert", os.Getenv(launch.EnvTLSCert), "PEM client certificate, for mutual TLS (env "+launch.EnvTLSCert+")")
	fs.StringVar(&f.TLSKey, "tls-key", os.Getenv(launch.EnvTLSKey), "PEM client key, for mutual TLS (env "+launch.EnvTLSKey+")")
	fs.DurationVar(&f.Timeout, "timeout", 10*time.Second, "how long to wait for the sidecar")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	if needSidecar {
		fs.StringVar(&f.Sidecar, "sidecar", os.Getenv(launch.EnvSidecar), "sidecar id (the GPU UUID by default; env "+launch.EnvSidecar+")")
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// writeEnv prints a decision's shell lines (launch.WriteEnv); a deny exits 3.
func writeEnv(w io.Writer, d *v1.Decision, lf *launcherFlags, token string) error {
	err := launch.WriteEnv(w, d, &lf.Endpoint, token)
	if errors.Is(err, launch.ErrDenied) {
		return deniedError{err}
	}
	return err
}

// printJSON writes v as indented JSON: what every --json flag prints.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printAs prints v as JSON with --json (asJSON), else as text writes it.
func printAs[T any](w io.Writer, asJSON bool, v T, text func(io.Writer, T) error) error {
	if asJSON {
		return printJSON(w, v)
	}
	return text(w, v)
}

func newAdmitCmd() *cobra.Command {
	var (
		lf launcherFlags
		af admitFlags
	)
	cmd := &cobra.Command{
		Use:   "admit --sidecar ID --job ID --profile FILE [--min-pct N --max-pct N] [--memory-mib N]",
		Short: "Ask a sidecar for a slot for a training job; prints the env to eval",
		Long: `Ask a sidecar to admit a training job onto its GPU. On a grant or a throttle it
prints shell lines to eval: the lease (COLOCD_LEASE_ID, COLOCD_LEASE_TOKEN,
COLOCD_SIDECAR) and the exact variables the job's processes must start with
(CUDA_MPS_*), with the decision as # comments:

  eval "$(colocd admit --sidecar GPU-… --job resnet-42 --profile train.json)"

A deny prints the reason and exits with status 3; a failed admit's output
ends with (exit N), so that the eval fails as admit did. --request-id makes a retry
return the same decision instead of a second lease (default: a random id).`,
		Args: cobra.NoArgs,
		RunE: af.run(&lf, true, func(cmd *cobra.Command, client *bus.Client) error {
			d, err := client.Admit(cmd.Context(), lf.Sidecar, &af.req)
			if err != nil {
				launch.RetryHint(cmd.ErrOrStderr(), lf.Sidecar, &af.req, err)
				return fmt.Errorf("admit: %w", launch.Describe(err))
			}
			if lf.asJSON {
				if err := printJSON(cmd.OutOrStdout(), admitJSON{d, leaseToken(d)}); err != nil {
					return err
				}
				if d.Decision == v1.DecisionDeny {
					return deniedError{fmt.Errorf("admit: denied (%s): %s", termtext.Line(d.Reason.Code), termtext.Line(d.Reason.Message))}
				}
				return nil
			}
			token := ""
			if d.Lease != nil {
				token = d.Lease.Token
			}
			return writeEnv(cmd.OutOrStdout(), d, &lf, token)
		}),
	}
	lf.register(cmd, true)
	af.register(cmd)
	af.registerRetry(cmd)
	return cmd
}

// admitJSON is what admit --json prints: the sidecar's answer, and the
// lease's token, which the answer never holds (the launcher drew it) and
// renew, release and register need.
type admitJSON struct {
	*v1.Decision
	LeaseToken string `json:"lease_token,omitempty"`
}

// leaseToken is d's lease's token, "" when it has no lease.
func leaseToken(d *v1.Decision) string {
	if d.Lease == nil {
		return ""
	}
	return d.Lease.Token
}

// admitFlags are the flags of an admission request, shared by admit, place
// and quote.
type admitFlags struct {
	req         v1.AdmitRequest
	profilePath string
	sendMode    string
	lease       time.Duration
	token       string // --token: a retry's lease token
}

// registerRetry declares --token, for admit: with --request-id it retries
// an admit whose outcome is unknown, at the sidecar it went to (place,
// which may choose another sidecar, has no --token).
func (f *admitFlags) registerRetry(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.token, "token", "", "with --request-id: the lease token of an earlier admit whose outcome is unknown, so that the retry gets that admit's decision (printed when no answer came)")
}

// prepare fills the request from the flags, connects, and sends the profile
// the way --send-profile says; the caller closes the connection.
func (f *admitFlags) prepare(cmd *cobra.Command, lf *launcherFlags, needSidecar bool) (*bus.Client, *nats.Conn, error) {
	if err := launch.FillRequest(&f.req, f.profilePath, f.lease, f.sendMode); err != nil {
		return nil, nil, err
	}
	if f.token != "" {
		if !cmd.Flags().Changed("request-id") {
			return nil, nil, errors.New("--token: only with --request-id, the two printed when an admit got no answer")
		}
		if err := f.req.WithToken(f.token); err != nil {
			return nil, nil, fmt.Errorf("--%w", err)
		}
	}
	client, nc, err := lf.Dial(needSidecar)
	if err != nil {
		return nil, nil, err
	}
	if err := launch.SendProfile(cmd.Context(), client, lf.Sidecar, &f.req, f.sendMode, cmd.ErrOrStderr()); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return client, nc, nil
}

// run makes the RunE of a command that sends an admission request (admit,
// place, quote): it prepares the request, connects, and runs do with the
// client; a failure to prepare or connect is prefixed with the command's
// name.
func (f *admitFlags) run(lf *launcherFlags, needSidecar bool, do func(cmd *cobra.Command, client *bus.Client) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		client, nc, err := f.prepare(cmd, lf, needSidecar)
		if err != nil {
			return fmt.Errorf("%s: %w", cmd.Name(), err)
		}
		defer nc.Close()
		return do(cmd, client)
	}
}

// register declares the flags.
func (f *admitFlags) register(cmd *cobra.Command) {
	req, profilePath, sendMode, lease := &f.req, &f.profilePath, &f.sendMode, &f.lease
	fs := cmd.Flags()
	fs.StringVar(&req.RequestID, "request-id", "", "idempotency key, 22 to 128 letters, digits, - and _ drawn at random: a retry with the same id (and the same token) gets the same decision (default: random)")
	fs.StringVar(&req.Job.ID, "job", "", "job id: letters, digits, - and _ (required)")
	fs.StringVar(&req.Job.Owner, "owner", os.Getenv("USER"), "who runs the job")
	fs.IntVar(&req.Job.Priority, "priority", 0, "job priority")
	fs.Float64Var(&req.Job.Weight, "weight", 0, "what a unit of the job's throughput is worth against other jobs', in (0, 1000] (default 1)")
	fs.StringVar(profilePath, "profile", "", "the job's training profile, colocd.profile/v1 (required)")
	fs.StringVar(sendMode, "send-profile", launch.SendAuto, "how the profile travels: inline (in the request), ref (uploaded through the sidecar, or with no --sidecar put in the colocd_profiles object store, then named by its sha256), or auto (ref only when the profile would not fit in one message)")
	fs.IntVar(&req.MemoryMiB, "memory-mib", 0, "GPU memory the job needs, MiB (required unless the profile has memory_mib)")
	fs.IntVar(&req.Processes, "processes", 1, "GPU processes the job starts")
	fs.IntVar(&req.Compute.MinPct, "min-pct", 10, "lowest MPS active-thread percentage the job accepts")
	fs.IntVar(&req.Compute.MaxPct, "max-pct", 100, "highest MPS active-thread percentage the job wants")
	fs.DurationVar(lease, "lease", 0, "lease duration (default: the sidecar's)")
	fs.BoolVar(&req.Checkpointable, "checkpointable", false, "say that the job can restart from a checkpoint (informational: any lease may be throttled, which is always a restart)")
}

func newQuoteCmd() *cobra.Command {
	var (
		lf   launcherFlags
		af   admitFlags
		wait time.Duration
	)
	cmd := &cobra.Command{
		Use:   "quote --job ID --profile FILE [--wait 1s]",
		Short: "Ask every sidecar what it would decide, without taking a lease",
		Args:  cobra.NoArgs,
		RunE: af.run(&lf, false, func(cmd *cobra.Command, client *bus.Client) error {
			ds, err := launch.Quote(cmd.Context(), client, &af.req, wait)
			if err != nil {
				return fmt.Errorf("quote: %w", launch.Describe(err))
			}
			return printAs(cmd.OutOrStdout(), lf.asJSON, ds, launch.WriteQuotes)
		}),
	}
	lf.register(cmd, false)
	cmd.Flags().StringVar(&lf.Sidecar, "sidecar", os.Getenv(launch.EnvSidecar), "the sidecar a profile sent by reference is uploaded through (env "+launch.EnvSidecar+"); the quote still asks every sidecar. Without it, ref puts the profile in the object store directly")
	af.register(cmd)
	cmd.Flags().DurationVar(&wait, "wait", time.Second, "how long to collect answers at most; the quote ends sooner once every sidecar with a live capacity summary answered")
	return cmd
}

// leaseFlags are the lease id and token, defaulting to what admit exported.
type leaseFlags struct{ id, token string }

func (f *leaseFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.id, "lease", os.Getenv(launch.EnvLease), "lease id (env "+launch.EnvLease+")")
	// The token's default is read when the command runs, not shown: help
	// must not print a secret from the environment.
	cmd.Flags().StringVar(&f.token, "token", "", "lease token (default: env "+launch.EnvToken+")")
}

func (f *leaseFlags) ref() (*v1.LeaseRef, error) {
	if f.token == "" {
		f.token = os.Getenv(launch.EnvToken)
	}
	if f.id == "" || f.token == "" {
		return nil, fmt.Errorf("--lease and --token: want the lease id and token that admit printed (or %s and %s in the environment)", launch.EnvLease, launch.EnvToken)
	}
	return &v1.LeaseRef{LeaseID: f.id, Token: f.token}, nil
}

// leaseCmd builds a command that acts on one lease: it reads the lease
// flags, connects, and runs do.
func leaseCmd(use, short string, args cobra.PositionalArgs,
	do func(cmd *cobra.Command, c *bus.Client, lf launcherFlags, ref *v1.LeaseRef, args []string) error) *cobra.Command {
	var (
		lf launcherFlags
		ls leaseFlags
	)
	name, _, _ := strings.Cut(use, " ")
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := ls.ref()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			client, nc, err := lf.Dial(true)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			defer nc.Close()
			if err := do(cmd, client, lf, ref, args); err != nil {
				return fmt.Errorf("%s: %w", name, launch.Describe(err))
			}
			return nil
		},
	}
	lf.register(cmd, true)
	ls.register(cmd)
	return cmd
}

func newRenewCmd() *cobra.Command {
	return leaseCmd("renew [--lease ID --token T]", "Extend a lease", cobra.NoArgs,
		func(cmd *cobra.Command, c *bus.Client, lf launcherFlags, ref *v1.LeaseRef, _ []string) error {
			l, err := c.Renew(cmd.Context(), lf.Sidecar, ref)
			if err != nil {
				return err
			}
			if lf.asJSON {
				return printJSON(cmd.OutOrStdout(), l)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lease %s renewed until %s\n", l.ID, l.ExpiresAt.Format(time.RFC3339))
			launch.RenewNotice(cmd.ErrOrStderr(), l, os.Getenv(admission.EnvActiveThreads)) // what admit exported
			return nil
		})
}

func newReleaseCmd() *cobra.Command {
	return leaseCmd("release [--lease ID --token T]", "Give a lease back", cobra.NoArgs,
		func(cmd *cobra.Command, c *bus.Client, lf launcherFlags, ref *v1.LeaseRef, _ []string) error {
			if err := c.Release(cmd.Context(), lf.Sidecar, ref); err != nil {
				return err
			}
			return printDone(cmd.OutOrStdout(), lf, "lease %s released\n", ref.LeaseID)
		})
}

func newRegisterCmd() *cobra.Command {
	return leaseCmd("register [--lease ID --token T] PID...", "Tell the sidecar which processes run under a lease (needed for eviction)",
		cobra.MinimumNArgs(1),
		func(cmd *cobra.Command, c *bus.Client, lf launcherFlags, ref *v1.LeaseRef, args []string) error {
			pids := make([]int, len(args))
			for i, a := range args {
				var err error
				if pids[i], err = strconv.Atoi(a); err != nil || pids[i] <= 0 {
					return fmt.Errorf("PID %q: want a process id > 0", a)
				}
			}
			req := &v1.RegisterRequest{LeaseID: ref.LeaseID, Token: ref.Token, PIDs: pids}
			if err := c.Register(cmd.Context(), lf.Sidecar, req); err != nil {
				return err
			}
			return printDone(cmd.OutOrStdout(), lf, "lease %s: registered %d processes\n", ref.LeaseID, len(pids))
		})
}

// printDone prints a sentence, or {} with --json (the API's empty answer).
func printDone(w io.Writer, lf launcherFlags, format string, args ...any) error {
	if lf.asJSON {
		_, err := fmt.Fprintln(w, "{}")
		return err
	}
	_, err := fmt.Fprintf(w, format, args...)
	return err
}

func newStatusCmd() *cobra.Command {
	var lf launcherFlags
	cmd := &cobra.Command{
		Use:   "status [--sidecar ID]",
		Short: "Show a sidecar's services, predictions, leases and health",
		Long: `Show a sidecar's services, predictions, leases and health. Without --sidecar
(and COLOCD_SIDECAR unset) it asks who is on the bus: the one sidecar there is
is shown; several are listed (id, node, GPU) and --sidecar must pick one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, nc, err := lf.dialSidecar(cmd)
			if err != nil {
				return fmt.Errorf("status: %w", err)
			}
			defer nc.Close()
			st, err := client.Status(cmd.Context(), lf.Sidecar)
			if err != nil {
				return fmt.Errorf("status: %w", launch.Describe(err))
			}
			return printAs(cmd.OutOrStdout(), lf.asJSON, st, launch.WriteStatus)
		},
	}
	lf.register(cmd, true)
	return cmd
}

// printJSONLine writes v as one line of JSON: what a command that streams
// (watch) prints with --json.
func printJSONLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
