package bus

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/nats-io/nats.go"
)

// Every request a launcher sends crosses from the launchers' account into
// the sidecars' through a service import that shares the requester's
// identity: the server then puts a Nats-Request-Info header on it, with
// the account and the user (the NKey) it authenticated, replacing any
// header of that name the launcher wrote. That header is what the sidecar
// queues, limits and counts by: no launcher can pass for another.

// RequestInfoHeader is the header nats-server adds to a request that
// crosses a sharing service import: the requester's account and user.
const RequestInfoHeader = "Nats-Request-Info"

// maxRequestInfo bounds the header a tenant is read from: the server's is a
// few hundred bytes.
const maxRequestInfo = 8 << 10

// Tenants that carry no user of their own.
const (
	// TenantLocal is a request from the sidecars' own account (the
	// sidecar's connection, another sidecar on a shared server, a test in
	// the same process): no import was crossed, so no header was added.
	TenantLocal = "local"
	// TenantUnknown is a request whose identity header could not be read.
	TenantUnknown = "unknown"
)

// Tenant returns who sent a request with headers h: the user the server
// authenticated (an NKey "U…", or a user name), else the account, else
// TenantLocal when the server added no identity, or TenantUnknown when
// the header is unreadable. It never fails: a tenant is a queue to put the
// request in, not an authorisation (the server did that).
func Tenant(h nats.Header) string {
	v := h.Get(RequestInfoHeader)
	if v == "" {
		return TenantLocal
	}
	if len(v) > maxRequestInfo {
		return TenantUnknown
	}
	// The server writes the header with encoding/json: a user key holds
	// no character that JSON escapes, so the common case is read without
	// decoding the whole header (the hot path of a flood).
	if u, ok := scanUser(v); ok {
		return u
	}
	var ci struct {
		Account string `json:"acc"`
		User    string `json:"user"`
	}
	if err := json.Unmarshal([]byte(v), &ci); err != nil {
		return TenantUnknown
	}
	switch {
	case ci.User != "" && len(ci.User) <= maxTenantLen:
		return ci.User
	case ci.Account != "" && len(ci.Account) <= maxTenantLen:
		return "account:" + ci.Account
	default:
		return TenantUnknown
	}
}

// tenantKey carries the tenant handle read in a request's context, so that
// an endpoint need not read the header again.
type tenantKey struct{}

// TenantOf is who sent the request a handler's ctx belongs to (Tenant of
// its headers; TenantLocal when none): what a handler holds an identity's
// limits and privacy to.
func TenantOf(ctx context.Context) string { return tenantOf(ctx) }

// tenantOf is the tenant handle put in ctx (TenantLocal when none).
func tenantOf(ctx context.Context) string {
	if t, ok := ctx.Value(tenantKey{}).(string); ok {
		return t
	}
	return TenantLocal
}

// maxTenantLen bounds a tenant's name: an NKey is 56 characters.
const maxTenantLen = 256

// userField starts the user in the server's header.
const userField = `"user":"`

// scanUser finds the header's user when it is plain: letters, digits,
// and no escape; ok is false otherwise (decode the header instead).
func scanUser(v string) (string, bool) {
	i := strings.Index(v, userField)
	if i < 0 || strings.Count(v, userField) != 1 {
		return "", false
	}
	rest := v[i+len(userField):]
	j := strings.IndexByte(rest, '"')
	if j <= 0 || j > maxTenantLen {
		return "", false
	}
	u := rest[:j]
	for k := 0; k < len(u); k++ {
		c := u[k]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "", false
		}
	}
	return u, true
}

// RequestConn reads the server's id of the connection that sent a request
// from its RequestInfoHeader value; 0 when it says none.
func RequestConn(requestInfo string) uint64 {
	if len(requestInfo) > maxRequestInfo {
		return 0
	}
	var ci struct {
		ID uint64 `json:"id"`
	}
	if json.Unmarshal([]byte(requestInfo), &ci) != nil {
		return 0
	}
	return ci.ID
}
