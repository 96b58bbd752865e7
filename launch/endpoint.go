package launch

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats.go"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/predictor"
)

// Environment variables a launcher reads its connection and lease from,
// and that `colocd admit` sets (docs/cli.md).
const (
	EnvServer  = "COLOCD_SERVER"
	EnvSidecar = "COLOCD_SIDECAR"
	EnvLease   = "COLOCD_LEASE_ID"
	EnvToken   = "COLOCD_LEASE_TOKEN"
	EnvNKey    = "COLOCD_NKEY"
	EnvCreds   = "COLOCD_CREDS"
	EnvTLSCA   = "COLOCD_TLS_CA"
	EnvTLSCert = "COLOCD_TLS_CERT"
	EnvTLSKey  = "COLOCD_TLS_KEY"
)

// Endpoint is how a launcher reaches a sidecar: the NATS server, the
// launcher's identity (an NKey seed file or a credentials file), TLS files,
// and the sidecar's id. Its errors name the launcher commands' flags
// (--server, --nkey, ...), which set these fields one for one.
type Endpoint struct {
	Server, Sidecar, Creds, NKey string
	TLSCA, TLSCert, TLSKey       string
	// Timeout bounds the connection and every request.
	Timeout time.Duration
	// Persistent reconnects for as long as the connection is open (a
	// launcher that lives as long as its job: colocd run, watch).
	Persistent bool
}

// Dial opens the NATS connection (bus.Connect) and a bus client on it;
// needSidecar checks the sidecar's id first. The caller closes the
// connection.
func (e *Endpoint) Dial(needSidecar bool) (*bus.Client, *nats.Conn, error) {
	if needSidecar {
		if err := v1.ValidateSidecarID(e.Sidecar); err != nil {
			return nil, nil, fmt.Errorf("--sidecar: %w", err)
		}
	}
	if e.Creds != "" && e.NKey != "" {
		return nil, nil, fmt.Errorf("--creds and --nkey: want one of the two (%s, %s)", EnvCreds, EnvNKey)
	}
	if (e.TLSCert == "") != (e.TLSKey == "") {
		return nil, nil, fmt.Errorf("--tls-cert and --tls-key: want both or neither (%s, %s)", EnvTLSCert, EnvTLSKey)
	}
	policy := bus.OneShot
	if e.Persistent {
		policy = bus.StayConnected
	}
	nc, err := bus.Connect(e.Server, bus.ConnectOptions{Name: "colocd launcher", Timeout: e.Timeout, Policy: policy,
		NKeySeedFile: e.NKey, Credentials: e.Creds, TLS: bus.TLSFiles{CA: e.TLSCA, Cert: e.TLSCert, Key: e.TLSKey}})
	var bad *bus.OptionsError
	switch {
	case errors.As(err, &bad):
		flag := "--nkey"
		if e.Creds != "" {
			flag = "--creds"
		}
		return nil, nil, fmt.Errorf("%s: %w", flag, bad.Err)
	case err != nil:
		return nil, nil, fmt.Errorf("--server %s: %w", e.Server, err)
	}
	return bus.NewClient(nc, bus.WithTimeout(e.Timeout)), nc, nil
}

// How an admit sends its profile (--send-profile).
const (
	SendAuto   = "auto"
	SendInline = "inline"
	SendRef    = "ref"
)

// RefAbove is the size above which SendAuto sends a profile by reference:
// when it would not fit in one message beside the rest of the request.
func RefAbove(c *bus.Client) int {
	return int(c.MaxPayload()) * 3 / 4
}

// SendProfile replaces the inline profile by a reference when mode says
// so: uploaded through the sidecar asked (which checks and stores it; any
// launcher may), or, with no sidecar named (a quote to all), put in the
// object store directly (a launcher identity allowed to write it). In auto
// mode a failure is not an error: the profile goes inline, as it always
// could, and warn says why.
func SendProfile(ctx context.Context, c *bus.Client, sidecar string, req *v1.AdmitRequest, mode string, warn io.Writer) error {
	if mode == SendInline || (mode == SendAuto && len(req.Profile) <= RefAbove(c)) {
		return nil
	}
	var ref string
	var err error
	if sidecar != "" {
		ref, err = c.UploadProfile(ctx, sidecar, req.Profile)
	} else {
		ref, err = c.PutProfile(ctx, req.Profile)
	}
	if err != nil && mode == SendAuto && ctx.Err() == nil {
		fmt.Fprintf(warn, "colocd: sending the profile inline: %v\n", Describe(err))
		return nil
	}
	if err != nil {
		return fmt.Errorf("--send-profile %s: %w", mode, Describe(err))
	}
	req.Profile, req.ProfileRef = nil, ref
	return nil
}

// FillRequest checks req's job and the send mode, loads the training
// profile at profilePath inline, and fills the lease's duration and, when
// empty, a random request id.
func FillRequest(req *v1.AdmitRequest, profilePath string, lease time.Duration, sendMode string) error {
	if req.Job.ID == "" {
		return errors.New("--job: want the job's id")
	}
	if sendMode != SendAuto && sendMode != SendInline && sendMode != SendRef {
		return fmt.Errorf("--send-profile: want auto, inline or ref, got %q", sendMode)
	}
	if profilePath == "" {
		return errors.New("--profile: want the path of the job's training profile")
	}
	p, err := predictor.LoadProfile(profilePath)
	if err != nil {
		return fmt.Errorf("--profile: %w", err)
	}
	if p.Kind != predictor.KindTraining {
		return fmt.Errorf("--profile: want a training profile, got kind %q", p.Kind)
	}
	if req.MemoryMiB == 0 && p.MemoryMiB == 0 {
		return fmt.Errorf("--memory-mib: want the GPU memory the job needs, in MiB (%s has no memory_mib to take it from)", profilePath)
	}
	if req.Profile, err = json.Marshal(p); err != nil {
		return fmt.Errorf("--profile: %w", err)
	}
	if lease < 0 || lease%time.Second != 0 {
		return fmt.Errorf("--lease: want a whole number of seconds ≥ 0, got %s", lease)
	}
	req.LeaseSeconds = int(lease / time.Second)
	if req.RequestID == "" {
		req.RequestID = rand.Text() // 130 bits: nobody can guess it
	}
	return nil
}

// Describe turns a sidecar's error into a sentence with its code.
func Describe(err error) error {
	var be *v1.Error
	switch {
	case errors.Is(err, v1.ErrNoSidecar):
		return fmt.Errorf("no sidecar answered (is colocd serve running with that --sidecar id?): %w", err)
	case errors.As(err, &be):
		return fmt.Errorf("sidecar refused (%d): %s", be.Code, be.Description)
	}
	return err
}
