package natsserver

import (
	v1 "github.com/colocd/colocd/api/v1"

	"github.com/nats-io/nats-server/v2/server"
)

// Who may do what on NATS (docs/security.md). The sidecar's own identity
// may do everything; a launcher may only send requests to the API, discover
// services, read its events through a JetStream consumer on the events
// stream, and receive replies on its inbox. A launcher can therefore not
// read another connection's traffic to the sidecar, answer in the sidecar's
// name, or touch the lease bucket, the events stream or any other stream.

// LauncherPermissions returns what launcher key may publish and subscribe
// to in the launchers' account: the subjects of LauncherServices, and its
// own inbox (LauncherInbox(key); every launcher's, _INBOX.>, when key is
// "", as on a shared server whose users share one permission set). The
// account boundary is what keeps a launcher away from JetStream; these
// permissions keep it from answering other launchers' requests in its own
// account, and from reading their replies.
func LauncherPermissions(sidecarID, key string) *server.Permissions {
	var pub []string
	for _, s := range v1.LauncherServices(sidecarID) {
		pub = append(pub, s.Subject)
	}
	inbox := v1.LauncherInboxPrefix
	if key != "" {
		inbox = v1.LauncherInbox(key)
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: []string{inbox + ".>"}},
	}
}
