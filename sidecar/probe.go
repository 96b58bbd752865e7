package sidecar

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ProbeResult is what Probe found (colocd probe --json).
type ProbeResult struct {
	URL    string `json:"url"`
	Status int    `json:"status"`
	OK     bool   `json:"ok"`
	Body   string `json:"body,omitempty"`
}

// Probe asks a sidecar's HTTP endpoint (/healthz or /readyz) and returns
// its status and the first line of its body; OK is a 2xx. An error is no
// answer at all; its errors name colocd probe's --url.
func Probe(ctx context.Context, url string) (ProbeResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ProbeResult{}, fmt.Errorf("--url: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ProbeResult{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	return ProbeResult{URL: url, Status: resp.StatusCode, OK: resp.StatusCode/100 == 2, Body: line}, nil
}
