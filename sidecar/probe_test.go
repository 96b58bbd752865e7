package sidecar

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Probe returns the status and the first line of the body; a URL that does
// not parse names --url.
func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			http.Error(w, "not ready: mps\nmore", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		path   string
		status int
		ok     bool
		body   string
	}{{"/healthz", 200, true, "ok"}, {"/readyz", 503, false, "not ready: mps"}} {
		got, err := Probe(context.Background(), srv.URL+tc.path)
		if err != nil || got.Status != tc.status || got.OK != tc.ok || got.Body != tc.body || got.URL != srv.URL+tc.path {
			t.Errorf("%s: %+v, %v; want %d %q", tc.path, got, err, tc.status, tc.body)
		}
	}
	if _, err := Probe(context.Background(), "http://\x7f"); err == nil || !strings.HasPrefix(err.Error(), "--url: ") {
		t.Errorf("a bad URL: %v", err)
	}
}

func TestNewLogger(t *testing.T) {
	for _, tc := range []struct{ level, format, wantErr string }{
		{"debug", "text", ""}, {"warn", "json", ""},
		{"loud", "text", "--log-level: want debug, info, warn or error"},
		{"info", "yaml", "--log-format: want text or json"},
	} {
		var b strings.Builder
		l, err := NewLogger(&b, tc.level, tc.format)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s/%s: %v, want %q", tc.level, tc.format, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		l.Warn("x")
		if (tc.format == "json") != strings.HasPrefix(b.String(), "{") {
			t.Errorf("%s: wrote %q", tc.format, b.String())
		}
	}
}
