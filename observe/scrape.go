package observe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// DefaultMaxBody bounds a metrics page: a server's whole page is some
// hundred kilobytes, and a larger one is refused, not read into memory.
const DefaultMaxBody = 4 << 20

// ErrTooLarge is wrapped when a metrics page exceeds the bound.
var ErrTooLarge = errors.New("metrics page too large")

// Scraper reads one server's metrics endpoint.
type Scraper struct {
	// URL is the endpoint, e.g. http://127.0.0.1:8000/metrics.
	URL string
	// Preset names the metrics to read.
	Preset *Preset
	// Labels pick the series of one model when a server hosts several
	// (every label must match); nil takes every series.
	Labels map[string]string
	// Client makes the requests (nil: http.DefaultClient); the context
	// of each Scrape bounds its time.
	Client *http.Client
	// MaxBody bounds the page (0: DefaultMaxBody).
	MaxBody int64
}

// Scrape fetches and parses the page once, within ctx.
func (s *Scraper) Scrape(ctx context.Context) (Reading, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return Reading{}, fmt.Errorf("scrape %s: %w", s.URL, err)
	}
	// The classic text format, which every server offers and expfmt's
	// text parser reads.
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return Reading{}, fmt.Errorf("scrape %s: %w", s.URL, err)
	}
	defer resp.Body.Close()
	at := time.Now()
	if resp.StatusCode != http.StatusOK {
		return Reading{}, fmt.Errorf("scrape %s: %s", s.URL, resp.Status)
	}
	limit := s.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return Reading{}, fmt.Errorf("scrape %s: %w", s.URL, err)
	}
	if int64(len(body)) > limit {
		return Reading{}, fmt.Errorf("scrape %s: %w: more than %d bytes", s.URL, ErrTooLarge, limit)
	}
	return s.Parse(body, at)
}

// Parse reads a page of the text exposition format read at at.
func (s *Scraper) Parse(body []byte, at time.Time) (Reading, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return Reading{}, fmt.Errorf("scrape %s: parse: %w", s.URL, err)
	}
	r, err := s.Preset.read(fams, s.Labels, at)
	if err != nil {
		return Reading{}, fmt.Errorf("scrape %s (%s): %w", s.URL, s.Preset.Name, err)
	}
	return r, nil
}
