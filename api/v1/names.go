package v1

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Names of the NATS API, v1.
const (
	// ServiceName is the micro service name every sidecar registers
	// (nats micro ls shows it).
	ServiceName = "colocd"
	// SubjectPrefix starts every colocd v1 subject.
	SubjectPrefix = "colocd.v1"
	// QuoteSubject is answered by every sidecar (scatter-gather).
	QuoteSubject = SubjectPrefix + ".quote"
	// FleetSubject is answered by one sidecar of the queue group: every
	// live capacity summary of the fleet (Client.Capacities).
	FleetSubject = SubjectPrefix + ".fleet"
)

// Endpoint names; a sidecar serves each on colocd.v1.<id>.<name>.
const (
	EndpointAdmit    = "admit"
	EndpointRenew    = "renew"
	EndpointRelease  = "release"
	EndpointRegister = "register"
	EndpointStatus   = "status"
	// EndpointProfile takes a profile upload in chunks (upload.go).
	EndpointProfile = "profile"
	// EndpointQuote is served on QuoteSubject, not under the sidecar's id.
	EndpointQuote = "quote"
	// EndpointFleet is served on FleetSubject.
	EndpointFleet = "fleet"
	// EndpointQuoteOne is the same quote from this sidecar alone, on
	// colocd.v1.<id>.quote: what colocd place asks of the best few.
	EndpointQuoteOne = "quote-one"
	// quoteOneToken is EndpointQuoteOne's subject token.
	QuoteOneToken = "quote"
)

const (
	maxSidecarIDLen = 128
	maxJobIDLen     = 256
)

// ValidateSidecarID checks that id can be one NATS subject token: not empty,
// at most 128 bytes of UTF-8, and no white space, control characters, '.',
// '*' or '>'. The default id, a GPU UUID, passes.
func ValidateSidecarID(id string) error {
	if id == "" {
		return errors.New("sidecar id is empty")
	}
	if len(id) > maxSidecarIDLen {
		return fmt.Errorf("sidecar id %q is longer than %d bytes", id, maxSidecarIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("sidecar id %q is not valid UTF-8", id)
	}
	for _, r := range id {
		if r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("sidecar id %q: %q is not allowed in a NATS subject token", id, r)
		}
	}
	return nil
}

// EndpointSubject returns the subject of a per-sidecar endpoint,
// colocd.v1.<id>.<endpoint>. It does not validate id.
func EndpointSubject(sidecarID, endpoint string) string {
	return SubjectPrefix + "." + sidecarID + "." + endpoint
}

// JobToken maps a job id to the subject token used in
// colocd.v1.<id>.events.<token>. An id made only of ASCII letters, digits,
// '-' and '_' is its own token; any other id becomes '=' followed by the
// unpadded base64url encoding of its bytes. The mapping is one-to-one, since
// plain tokens never contain '='. Empty ids and ids over 256 bytes are errors.
func JobToken(jobID string) (string, error) {
	if jobID == "" {
		return "", errors.New("job id is empty")
	}
	if len(jobID) > maxJobIDLen {
		return "", fmt.Errorf("job id is longer than %d bytes", maxJobIDLen)
	}
	if isPlainName(jobID) {
		return jobID, nil
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(jobID)), nil
}

// EventSubject returns the subject an event for jobID is published on,
// colocd.v1.<id>.events.<JobToken(jobID)>.
func EventSubject(sidecarID, jobID string) (string, error) {
	if err := ValidateSidecarID(sidecarID); err != nil {
		return "", err
	}
	tok, err := JobToken(jobID)
	if err != nil {
		return "", err
	}
	return EndpointSubject(sidecarID, "events") + "." + tok, nil
}

// EventStreamName returns the JetStream stream that keeps a sidecar's
// events: COLOCD_EVENTS_<id>, with every character of id other than ASCII
// letters, digits, '-' and '_' replaced by '_'.
func EventStreamName(sidecarID string) string {
	return "COLOCD_EVENTS_" + sanitizeName(sidecarID)
}

// LeaseBucketName returns the recommended KV bucket for a sidecar's leases:
// colocd_leases_<id>, sanitized like [EventStreamName].
func LeaseBucketName(sidecarID string) string {
	return "colocd_leases_" + sanitizeName(sidecarID)
}

func isPlainName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isPlainByte(s[i]) {
			return false
		}
	}
	return s != ""
}

func isPlainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// sanitizeName keeps the characters JetStream allows in stream and bucket
// names and replaces every other byte with '_'.
func sanitizeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if isPlainByte(s[i]) {
			b.WriteByte(s[i])
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
