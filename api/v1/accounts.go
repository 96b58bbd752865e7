package v1

import "time"

// LauncherInboxPrefix is the reply-subject prefix launchers use (nats.go's
// and the nats CLI's default). Launchers may subscribe below it only.
const LauncherInboxPrefix = "_INBOX"

// SidecarInboxPrefix returns the reply-subject prefix of the sidecar's own
// connection, _COLOCD_INBOX.<id>. It is outside LauncherInboxPrefix, so no
// launcher can subscribe to the answers the sidecar gets from JetStream.
func SidecarInboxPrefix(sidecarID string) string {
	return SidecarInboxRoot + "." + sidecarID
}

// sidecarInboxRoot starts every sidecar's inbox.
const SidecarInboxRoot = "_COLOCD_INBOX"

// The two NATS accounts colocd uses (docs/security.md). The sidecars'
// account holds JetStream (the lease buckets, the events streams, the
// profiles and the fleet's summaries) and serves the API; the launchers'
// account has no JetStream and reaches the sidecars' account only through
// the services it exports. Every answer to a launcher, JetStream's too,
// crosses back on a reply the server made, so no launcher can aim an answer
// at the JetStream API.
const (
	SidecarAccount  = "COLOCD"
	LauncherAccount = "COLOCD_LAUNCHERS"
)

// LauncherService is one subject the sidecars' account exports to the
// launchers' account, and the launchers may publish to.
type LauncherService struct {
	// Subject is the subject, the same in both accounts.
	Subject string
	// Streamed is true where more than one answer comes back to one
	// request: a scatter-gather (every sidecar answers) or a pull of
	// several events.
	Streamed bool
	// Threshold, when set, is how long the server keeps a request's way
	// back open for its answer (nats-server's default: 2 minutes). Lease
	// calls are answered in milliseconds or dropped (a launcher past its
	// rate): ResponseThreshold keeps a flood of them from holding the
	// server's memory for minutes.
	Threshold time.Duration
}

// ResponseThreshold is the Threshold of every endpoint but the decisions'.
const ResponseThreshold = 15 * time.Second

// LauncherServices returns what launchers may ask on the NATS system of
// sidecar sidecarID: the endpoints of any sidecar, and pulls from the
// consumers it makes on sidecarID's events stream. With sidecarID "*" it is
// the set for a server that many sidecars share (an external server or
// cluster), deploy/nats/colocd-auth.conf: consumers of any stream, in this
// server's JetStream or a leaf host's domain.
func LauncherServices(sidecarID string) []LauncherService {
	stream := EventStreamName(sidecarID)
	if sidecarID == "*" {
		stream = "*" // a stream name is one token
	}
	// The endpoints of every sidecar, so that asking one that is not there
	// is a quick "no responders", not a permission error and a timeout.
	out := make([]LauncherService, 0, 17)
	for _, ep := range []string{EndpointAdmit, EndpointRenew, EndpointRelease, EndpointRegister, EndpointStatus, EndpointProfile, QuoteOneToken, EndpointWatch} {
		var threshold time.Duration
		if ep != EndpointAdmit && ep != QuoteOneToken {
			threshold = ResponseThreshold
		}
		out = append(out, LauncherService{Subject: EndpointSubject("*", ep), Threshold: threshold})
	}
	out = append(out,
		LauncherService{Subject: QuoteSubject, Streamed: true},
		// micro discovery, which every sidecar answers: PING and INFO.
		// Not STATS: its per-endpoint counts and timings tell one
		// launcher how busy the others keep a sidecar; operators read
		// them as the sidecar's user (docs/security.md#tenant-privacy).
		LauncherService{Subject: "$SRV.PING", Streamed: true},
		LauncherService{Subject: "$SRV.PING.>", Streamed: true},
		LauncherService{Subject: "$SRV.INFO", Streamed: true},
		LauncherService{Subject: "$SRV.INFO.>", Streamed: true},
		// Reading its events: pulls from a consumer on the events stream
		// that the sidecar made (the watch endpoint), with a filter inside
		// the events subjects. A launcher never creates a consumer: the
		// config in the create request, which no permission sees, could
		// name a deliver subject inside the sidecars' account.
		LauncherService{Subject: "$JS.API.CONSUMER.MSG.NEXT." + stream + ".*", Streamed: true},
		LauncherService{Subject: "$JS.API.CONSUMER.INFO." + stream + ".*"},
		LauncherService{Subject: "$JS.API.CONSUMER.DELETE." + stream + ".*"},
		// The sidecars' account's JetStream usage (sizes and counts, no
		// names). An account without JetStream of its own that does not
		// import this subject gets the whole JetStream API of the server
		// instead, answering every request above with an error of its own.
		LauncherService{Subject: "$JS.API.INFO"},
		// The fleet's capacity summaries, through any sidecar.
		LauncherService{Subject: FleetSubject, Threshold: ResponseThreshold},
	)
	if sidecarID == "*" {
		// A hub's launchers read a leaf host's events in the host's own
		// JetStream domain (LeafDomain), across the leaf connection.
		out = append(out,
			LauncherService{Subject: "$JS.*.API.CONSUMER.MSG.NEXT.*.*", Streamed: true},
			LauncherService{Subject: "$JS.*.API.CONSUMER.INFO.*.*"},
			LauncherService{Subject: "$JS.*.API.CONSUMER.DELETE.*.*"},
		)
	}
	return out
}

// LauncherInbox returns the reply-subject prefix of the launcher whose
// public NKey is key: _INBOX.<key>. A launcher may subscribe below its own
// only.
func LauncherInbox(key string) string { return LauncherInboxPrefix + "." + key }
