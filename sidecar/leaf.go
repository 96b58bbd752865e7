package sidecar

import (
	"strings"

	"github.com/colocd/colocd/natsserver"
)

// leafOptions is nats.leaf for the embedded server: none when nats.leaf.url
// is "".
func (s *Sidecar) leafOptions() natsserver.LeafOptions {
	l := s.cfg.NATS.Leaf
	if l.URL == "" {
		return natsserver.LeafOptions{}
	}
	var urls []string
	for u := range strings.SplitSeq(l.URL, ",") {
		urls = append(urls, strings.TrimSpace(u))
	}
	return natsserver.LeafOptions{URLs: urls, NKeySeedFile: l.NKey, Credentials: l.Credentials,
		TLS: l.TLS}
}

// isLeaf reports whether the embedded server is a leaf node of a hub.
func (s *Sidecar) isLeaf() bool { return s.cfg.NATS.URL == "" && s.cfg.NATS.Leaf.URL != "" }

// hubDomain is the JetStream domain of the fleet's capacity summaries: the
// hub's when this host is a leaf node, else "" (the server's own).
func (s *Sidecar) hubDomain() string {
	if s.isLeaf() {
		return s.cfg.NATS.Leaf.HubDomain
	}
	return ""
}

// eventsDomain is the JetStream domain of the sidecar's events stream, for
// launchers on another server: the leaf's own, else "".
func (s *Sidecar) eventsDomain() string {
	if s.isLeaf() {
		return natsserver.LeafDomain(s.id)
	}
	return ""
}
