package sidecar

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/colocd/colocd/natsserver"

	"github.com/colocd/colocd/bus"
	"github.com/colocd/colocd/internal/credfiles"
)

// DefaultLauncher names the identity whose seed the sidecar makes at its
// first start (nats.launchers.nkey_file), for a first try on one machine.
// Give each team its own instead: `colocd launcher add NAME`.
const DefaultLauncher = "default"

// launcherPoll is how often the launchers directory is read again.
const launcherPoll = 2 * time.Second

// FloodShun is how long a launcher identity that flooded the sidecar (far
// past its rate, not reading the answers) may not connect again; the
// flooding connection is closed at once.
const FloodShun = 30 * time.Second

// onFlood closes the connection a flood came from and shuns its identity
// for FloodShun (the embedded server only: on a remote one the flood is
// dropped, unanswered, and the server's operators are told in the log).
func (s *Sidecar) onFlood(tenant, requestInfo string) {
	if s.embed == nil {
		s.log.Warn("a launcher floods the sidecar: its excess is dropped; close it on the NATS server", "tenant", tenant)
		return
	}
	cid := bus.RequestConn(requestInfo)
	if name := s.embed.Shun(tenant, cid, FloodShun); name != "" {
		s.log.Warn("a launcher flooded the sidecar: its connection is closed and it may not connect again for a while",
			"launcher", name, "connection", cid, "shunned_for", FloodShun)
	}
}

// launchers returns the identities that may connect as launchers: the
// default seed's, nats.launchers.nkeys, and the launchers directory's.
func (s *Sidecar) launchers() ([]natsserver.Launcher, error) {
	pub, err := credfiles.Ensure(s.cfg.LauncherNKeyFile())
	if err != nil {
		return nil, fmt.Errorf("nats.launchers.nkey_file: %w", err)
	}
	out := []natsserver.Launcher{{Name: DefaultLauncher, Key: pub}}
	for i, k := range s.cfg.NATS.Launchers.NKeys {
		out = append(out, natsserver.Launcher{Name: "nats.launchers.nkeys[" + strconv.Itoa(i) + "]", Key: k})
	}
	dir, err := natsserver.ReadLaunchers(s.cfg.LauncherDir())
	if err != nil {
		return nil, fmt.Errorf("nats.launchers.dir: %w", err)
	}
	return append(out, dir...), nil
}

// watchLaunchers reads the launchers directory every launcherPoll and
// hands a changed set to the embedded server, which closes the
// connections of removed identities. A directory that cannot be read (a
// bad file in it) keeps the identities of before, with an error in the
// log.
func (s *Sidecar) watchLaunchers(ctx context.Context) error {
	last, _ := s.launchers()
	var failed string
	return every(ctx, launcherPoll, func() {
		ls, err := s.launchers()
		if err != nil {
			if err.Error() != failed {
				s.log.Error("launchers: keeping the identities of before", "err", err)
				failed = err.Error()
			}
			return
		}
		failed = ""
		if slices.Equal(ls, last) {
			return
		}
		if err := s.embed.SetLaunchers(ls); err != nil {
			s.log.Error("launchers: keeping the identities of before", "err", err)
			return
		}
		s.setNames(ls)
		added, removed := diffLaunchers(last, ls)
		s.log.Info("launchers changed", "added", added, "removed", removed)
		for _, name := range removed {
			if slices.ContainsFunc(ls, func(l natsserver.Launcher) bool { return l.Name == name }) {
				continue // a new key under the same name: the same identity
			}
			evs, err := s.adm.RevokeIdentity(ctx, name)
			if err != nil {
				s.log.Error("launchers: revoking a removed identity's leases", "launcher", name, "err", err)
			}
			if len(evs) > 0 {
				s.log.Info("launchers: a removed identity's leases are revoked", "launcher", name, "leases", len(evs))
				s.afterLeaseChange()
			}
		}
		last = ls
	})
}

// every calls f every period until ctx ends.
func every(ctx context.Context, period time.Duration, f func()) error {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			f()
		}
	}
}

// setNames makes ls the identities requests are resolved against.
func (s *Sidecar) setNames(ls []natsserver.Launcher) {
	names := make(map[string]string, len(ls))
	for _, l := range ls {
		names[l.Key] = l.Name
	}
	s.names.Store(&names)
	s.registerIdentities()
}

// registerIdentities tells admission which identities are registered
// here: each one contends for the GPU (docs/security.md#quotas). Before
// admission exists it waits for New's call.
func (s *Sidecar) registerIdentities() {
	if s.adm == nil || s.names.Load() == nil {
		return
	}
	s.adm.SetIdentities(s.registeredIdentities())
}

// registeredIdentities are the names of the launcher identities of the
// moment (none with a remote server, whose users are its own).
func (s *Sidecar) registeredIdentities() []string {
	names := s.names.Load()
	if names == nil {
		return nil
	}
	out := make([]string, 0, len(*names))
	for _, n := range *names {
		out = append(out, n)
	}
	return out
}

// identity is the identity a request's ctx came from, as admission holds
// it to its limits (admission.identity, admission.identities): the
// launcher's name when the embedded server knows its key, else the user
// the server authenticated; "" for the sidecars' own account, which no
// identity's limits hold.
func (s *Sidecar) identity(ctx context.Context) string {
	t := bus.TenantOf(ctx)
	if t == bus.TenantLocal {
		return ""
	}
	if names := s.names.Load(); names != nil {
		if name, ok := (*names)[t]; ok {
			return name
		}
	}
	return t
}

// diffLaunchers names the identities in next and not in prev, and the
// reverse.
func diffLaunchers(prev, next []natsserver.Launcher) (added, removed []string) {
	for _, l := range next {
		if !slices.Contains(prev, l) {
			added = append(added, l.Name)
		}
	}
	for _, l := range prev {
		if !slices.Contains(next, l) {
			removed = append(removed, l.Name)
		}
	}
	return added, removed
}
